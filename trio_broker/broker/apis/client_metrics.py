"""CLIENT_METRICS config resources (KIP-714): DescribeConfigs and (Incremental)AlterConfigs on
them, for ``configs.py``, and ListConfigResources (v0-1; ListClientMetricsResources in Kafka
3.9), which lists them.

Why apart from ``configs.py``: a subscription is not a broker or topic config; its keys, checks
and store are KIP-714's (``server/client_metrics.py``), and ``configs.py`` only routes resource
type 16 here.

ListConfigResources v1 (KIP-1142) lists config resources of the asked types: client-metrics
subscriptions, topics, and this node as a broker and as a broker logger; no type asked means
those four. Another type (GROUP: this broker has no group configs) is answered
UNSUPPORTED_VERSION, as Kafka answers a type it does not list.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import response_type
from ..config.describe import ConfigSource, Entry
from ..server import authz
from ..server import client_metrics as cm
from ..server.bodies import RequestBody
from ..server.context import HandlerContext, HandlerResult
from ..server.state import BrokerState

CLIENT_METRICS = 16
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
_LISTED = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS)
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


class Refused(Exception):
    """A subscription Kafka refuses: its error code and message."""

    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def describe(broker: BrokerState, name: str, keys: set[str] | None) -> list[Entry]:
    """Every key of subscription ``name``: the set ones as CLIENT_METRICS_CONFIG, the others as
    their defaults (Kafka describes a name that was never set with the defaults)."""
    if not name:
        raise Refused(ErrorCode.INVALID_REQUEST,
                      "Client metrics subscription name must not be empty")
    values = broker.client_metrics.describe(name)
    return [Entry(key, values.get(key, default),
                  ConfigSource.CLIENT_METRICS_CONFIG if key in values
                  else ConfigSource.DEFAULT_CONFIG, False, False, (), cm.DOCS[key],
                  cm.CONFIG_TYPES[key])
            for key, default in cm.DEFAULTS.items() if not keys or key in keys]


def alter(broker: BrokerState, name: str, ops: list[tuple[str, int, str | None]],
          incremental: bool, validate_only: bool) -> None:
    """Kafka's SET/DELETE/APPEND/SUBTRACT on subscription ``name`` (AlterConfigs replaces all
    of its keys); no key left deletes it."""
    current = broker.client_metrics.describe(name) if incremental else {}
    new = dict(current)
    for key, op, value in ops:
        if op == SET:
            new[key] = value or ""
        elif op == DELETE:
            new.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            if cm.CONFIG_TYPES.get(key) != 7:
                raise Refused(ErrorCode.INVALID_CONFIG,
                              f"Config value append is not allowed for config key: {key}"
                              if op == APPEND else
                              f"Config value subtract is not allowed for config key: {key}")
            items = cm.split_list(new.get(key, ""))
            for item in cm.split_list(value or ""):
                if op == APPEND and item not in items:
                    items.append(item)
                elif op == SUBTRACT and item in items:
                    items.remove(item)
            new[key] = ",".join(items)
        else:
            raise Refused(ErrorCode.INVALID_REQUEST, f"Unknown operations type {op}")
    try:
        broker.client_metrics.alter(name, new, validate_only=validate_only)
    except cm.ClientMetricsConfigError as exc:
        raise Refused(exc.error_code, str(exc)) from None
    except OSError as exc:
        raise Refused(ErrorCode.UNKNOWN_SERVER_ERROR,
                      f"Cannot persist client metrics subscriptions: {exc.strerror or exc}"
                      ) from None


_LCR = response_type(ApiKey.ListConfigResources)


async def handle_list_config_resources(ctx: HandlerContext,
                                       request: RequestBody) -> HandlerResult:
    # Kafka: DESCRIBE_CONFIGS on the cluster
    if ctx.broker.authorizer is not None and not authz.cluster(ctx, authz.DESCRIBE_CONFIGS):
        return ctx.response(throttle_time_ms=0,
                            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            config_resources=[])
    types = list(request.resource_types or ()) if ctx.version >= 1 else [CLIENT_METRICS]
    unsupported = sorted(set(types) - set(_LISTED))
    if unsupported:
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION,
                            config_resources=[])
    found = _resources(ctx.broker, types or list(_LISTED))
    return ctx.response(throttle_time_ms=0, error_code=0, config_resources=[
        _LCR.ConfigResource(resource_name=name, resource_type=kind)
        for kind, names in sorted(found.items()) for name in sorted(names)])


def _resources(broker: BrokerState, types: list[int]) -> Mapping[int, list[str]]:
    out: dict[int, list[str]] = {}
    for kind in set(types):
        if kind == CLIENT_METRICS:
            out[kind] = list(broker.client_metrics.configs)
        elif kind == TOPIC:
            out[kind] = list(broker.logs.topics())
        else:
            out[kind] = [str(broker.node_id)]
    return out
