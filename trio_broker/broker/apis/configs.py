"""DescribeConfigs (v0-4), AlterConfigs (v0-2) and IncrementalAlterConfigs (v0-1).

Why one module: the three APIs share the resources (topics, the broker, the cluster default,
the broker's loggers), the checks Kafka makes before touching anything (each resource once, no
duplicate keys, no null values), and the error texts. Topic configs go to the log manager, which
persists them with the topic; broker configs to the dynamic store (``config.dynamic``), whose
``log.*`` topic defaults are applied to every topic at once. Resource types follow Kafka's
``ConfigResource.Type``: TOPIC 2, BROKER 4, BROKER_LOGGER 8, CLIENT_METRICS 16 (KIP-714's
subscriptions, handled in ``client_metrics.py``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import response_type
from ..config import ConfigError
from ..config.defs import ConfigType
from ..config.describe import ConfigSource, Entry, Sources, describe_broker, describe_topic
from ..config.dynamic import (
    ELR_BROKER_LEVEL,
    ELR_CLUSTER_REMOVAL,
    MIN_INSYNC_REPLICAS,
    DynamicConfigError,
)
from ..config.keys import (
    BROKER_KEYS,
    NO_EFFECT,
    base_key,
    no_effect_broker_keys,
    no_effect_topic_keys,
)
from ..config.topic_keys import TOPIC_KEYS
from ..server import authz
from ..server.bodies import RequestBody, Struct
from ..server.context import HandlerContext, HandlerResult
from ..server.state import BrokerState
from ..storage import StorageError, log_config_from, validate_topic_name
from ..storage.cleaner_manager import cleaner_settings
from . import client_metrics, loggers, share_configs

LOGGER = logging.getLogger(__name__)

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
_TYPE_NAMES = {0: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS",
               32: "GROUP"}


class _Refused(Exception):
    """A resource Kafka refuses: its error code and message."""

    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# --- DescribeConfigs -------------------------------------------------------------------------

_DC = response_type(ApiKey.DescribeConfigs)
_DCResult = _DC.DescribeConfigsResult
_DCConfig = _DCResult.DescribeConfigsResourceResult
_DCSyn = _DCConfig.DescribeConfigsSynonym


async def handle_describe_configs(ctx: HandlerContext, request: RequestBody) -> HandlerResult:
    broker = ctx.broker
    synonyms = ctx.version >= 1 and request.include_synonyms
    documentation = ctx.version >= 3 and request.include_documentation
    results = []
    # read once per request, not per resource: a request may name a thousand topics
    sources, topics = Sources(broker.dynamic_configs), broker.logs.topics()
    for r in request.resources:
        keys = set(r.configuration_keys or ()) or None
        try:
            refused_code = authz.config_error(ctx, authz.DESCRIBE_CONFIGS, r.resource_type,
                                              r.resource_name)
            if refused_code:
                raise _Refused(refused_code, None)
            entries = _describe(broker, r.resource_type, r.resource_name, keys, sources, topics)
        except _Refused as refused:
            results.append(_DCResult(error_code=refused.code, error_message=refused.message,
                                     resource_type=r.resource_type,
                                     resource_name=r.resource_name, configs=[]))
            continue
        configs = [_DCConfig(
            name=e.name, value=e.value, read_only=e.read_only, config_source=int(e.source),
            is_default=e.source is ConfigSource.DEFAULT_CONFIG, is_sensitive=e.sensitive,
            synonyms=[_DCSyn(name=s.name, value=s.value, source=int(s.source))
                      for s in e.synonyms] if synonyms else [],
            config_type=e.config_type, documentation=e.documentation if documentation else None)
            for e in entries]
        results.append(_DCResult(error_code=0, error_message=None, resource_type=r.resource_type,
                                 resource_name=r.resource_name, configs=configs))
    return ctx.response(throttle_time_ms=0, results=results)


def _describe(broker: BrokerState, resource_type: int, name: str, keys: set[str] | None,
              sources: Sources, topics: Mapping[str, int]) -> list[Entry]:
    dynamic = broker.dynamic_configs
    if resource_type == TOPIC:
        invalid = validate_topic_name(name)
        if invalid is not None:
            raise _Refused(ErrorCode.INVALID_TOPIC_EXCEPTION, invalid)
        if name not in topics:
            raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        values = broker.logs.topic_config(name).to_topic_configs()
        return describe_topic(values, broker.logs.topic_overrides(name), sources, keys)
    if resource_type == BROKER:
        if name and _broker_id(name, "Broker id must be an integer, but it is: ") != (
                broker.node_id):
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected "
                           f"{broker.node_id} or empty string, but received {name}")
        return describe_broker(dynamic.effective(), sources, keys,
                               per_broker=bool(name))
    if resource_type == BROKER_LOGGER:
        if not name:
            raise _Refused(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
        if _broker_id(name, "Broker id must be an integer, but it is: ") != broker.node_id:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected "
                           f"{broker.node_id} but received {name}")
        return [Entry(logger, level, ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, False, False, (),
                      None, 0) for logger, level in loggers.levels().items()
                if not keys or logger in keys]
    if resource_type == CLIENT_METRICS:
        try:
            return client_metrics.describe(broker, name, keys)
        except client_metrics.Refused as refused:
            raise _Refused(refused.code, refused.message) from None
    if resource_type == GROUP:
        return share_configs.describe(broker, name, keys)
    raise _Refused(ErrorCode.INVALID_REQUEST,
                   f"Unsupported resource type: {_TYPE_NAMES.get(resource_type, 'UNKNOWN')}")


def _broker_id(name: str, message: str) -> int:
    try:
        return int(name)
    except ValueError:
        raise _Refused(ErrorCode.INVALID_REQUEST, message + name) from None


# --- AlterConfigs and IncrementalAlterConfigs --------------------------------------------------

_AC = response_type(ApiKey.AlterConfigs)
_IAC = response_type(ApiKey.IncrementalAlterConfigs)


async def handle_alter_configs(ctx: HandlerContext, request: RequestBody) -> HandlerResult:
    """AlterConfigs: each resource's configs replace all of its previous ones."""
    return ctx.response(throttle_time_ms=0, responses=_alter_all(
        ctx.broker, request, _AC.AlterConfigsResourceResponse, incremental=False,
        denied=_alter_denied(ctx, request)))


async def handle_incremental_alter_configs(ctx: HandlerContext,
                                           request: RequestBody) -> HandlerResult:
    """IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT (lists) per key."""
    return ctx.response(throttle_time_ms=0, responses=_alter_all(
        ctx.broker, request, _IAC.AlterConfigsResourceResponse, incremental=True,
        denied=_alter_denied(ctx, request)))


def _alter_denied(ctx: HandlerContext, request: RequestBody) -> dict[tuple[int, str], int]:
    """The resources the principal may not ALTER_CONFIGS, with Kafka's error code."""
    found = {(r.resource_type, r.resource_name): authz.config_error(
        ctx, authz.ALTER_CONFIGS, r.resource_type, r.resource_name) for r in request.resources}
    return {k: v for k, v in found.items() if v}


def _alter_all(broker: BrokerState, request: RequestBody, result_type: Any, *,
               incremental: bool, denied: Mapping[tuple[int, str], int]) -> list[Struct]:
    seen = Counter((r.resource_type, r.resource_name) for r in request.resources)
    results = []
    for r in request.resources:
        code, message = 0, None
        try:
            if seen[(r.resource_type, r.resource_name)] > 1:
                raise _Refused(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            if (r.resource_type, r.resource_name) in denied:
                raise _Refused(denied[(r.resource_type, r.resource_name)], None)
            _check_configs(r.configs, incremental)
            ops = [(c.name, c.config_operation if incremental else SET, c.value)
                   for c in r.configs]
            _alter_one(broker, r.resource_type, r.resource_name, ops, incremental,
                       request.validate_only)
        except _Refused as refused:
            code, message = refused.code, refused.message
        results.append(result_type(error_code=code, error_message=message,
                                   resource_type=r.resource_type, resource_name=r.resource_name))
    return results


def _check_configs(configs: list[Struct], incremental: bool) -> None:
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise _Refused(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [c.name for c in configs
             if c.value is None and not (incremental and c.config_operation == DELETE)]
    if nulls:
        raise _Refused(ErrorCode.INVALID_REQUEST, "Null value not supported for : " +
                       ", ".join(nulls))


def _alter_one(broker: BrokerState, resource_type: int, name: str,
               ops: list[tuple[str, int, str | None]], incremental: bool,
               validate_only: bool) -> None:
    if resource_type == TOPIC:
        _alter_topic(broker, name, ops, incremental, validate_only)
    elif resource_type == BROKER:
        if name:
            node = _broker_id(name, "Node id must be an integer, but it is: ")
            if node != broker.node_id:
                raise _Refused(ErrorCode.INVALID_REQUEST,
                               f"Unexpected broker id, expected {broker.node_id}, but received "
                               f"{name}")
        _alter_broker(broker, bool(name), ops, incremental, validate_only)
    elif resource_type == BROKER_LOGGER and incremental:
        node = _broker_id(name, "Node id must be an integer, but it is: ")
        if node != broker.node_id:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Unexpected node id. Expected "
                           f"{broker.node_id}, but received {name}")
        try:
            loggers.alter(ops, validate_only=validate_only)
        except loggers.LoggerConfigError as exc:
            raise _Refused(exc.error_code, str(exc)) from None
    elif resource_type == CLIENT_METRICS:
        try:
            client_metrics.alter(broker, name, ops, incremental, validate_only)
        except client_metrics.Refused as refused:
            raise _Refused(refused.code, refused.message) from None
    elif resource_type == GROUP and incremental:
        error = share_configs.alter(broker, name, ops, validate_only)
        if error is not None:
            raise _Refused(*error)
    else:
        raise _Refused(ErrorCode.INVALID_REQUEST, f"Unknown resource type {resource_type}")


def _apply_ops(current: dict[str, str], ops: list[tuple[str, int, str | None]],
               is_list: Any, default_of: Any, not_list: Any) -> dict[str, str]:
    """The new key -> value map after Kafka's SET/DELETE/APPEND/SUBTRACT, in request order."""
    out = dict(current)
    for key, op, value in ops:
        if op == SET:
            out[key] = value or ""
        elif op == DELETE:
            out.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            if not is_list(key):
                raise not_list(key, op)
            base = out.get(key)
            if base is None:
                base = default_of(key) or ""
            items = [v for v in base.split(",") if v]
            for item in (value or "").split(","):
                if op == APPEND and item not in items:
                    items.append(item)
                elif op == SUBTRACT and item in items:
                    items.remove(item)
            out[key] = ",".join(items)
        else:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Unknown operations type {op}")
    return out


def _alter_topic(broker: BrokerState, name: str, ops: list[tuple[str, int, str | None]],
                 incremental: bool, validate_only: bool) -> None:
    if not name:
        raise _Refused(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
    invalid = validate_topic_name(name)
    if invalid is not None:
        raise _Refused(ErrorCode.INVALID_TOPIC_EXCEPTION, invalid)
    logs = broker.logs
    exists = name in logs.topics()
    current = logs.topic_overrides(name) if exists and incremental else {}

    def not_list(key: str, op: int) -> _Refused:
        return _Refused(ErrorCode.INVALID_CONFIG,
                        f"Can't {_OP_NAMES[op]} to key {key} because its type is not LIST.")

    def default_of(key: str) -> str | None:
        config = logs.topic_config(name) if exists else logs.default_config
        return config.topic_config_value(key)

    new = _apply_ops(current, ops, lambda k: k in TOPIC_KEYS and (
        TOPIC_KEYS[k].key.type is ConfigType.LIST), default_of, not_list)
    try:
        logs.default_config.with_overrides(new)  # Kafka validates before the existence check
        if not exists:
            raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                           f"The topic '{name}' does not exist.")
        logs.alter_topic_config(name, new, validate_only=validate_only)
    except StorageError as exc:
        raise _Refused(exc.error_code, str(exc)) from None
    if not validate_only:
        _log_no_effect(no_effect_topic_keys(_set_keys(ops)), f"topic {name}")


def _check_eligible_leader_replicas(per_broker: bool, ops: list[tuple[str, int, str | None]],
                                    incremental: bool, current: dict[str, str]) -> None:
    """KIP-966's rules on ``min.insync.replicas`` while eligible leader replicas are on, as
    Kafka 4.1+'s controller checks them: never per broker, never removed at cluster level."""
    touched = [op for key, op, _value in ops if key == MIN_INSYNC_REPLICAS]
    if per_broker and touched:
        raise _Refused(ErrorCode.INVALID_CONFIG, ELR_BROKER_LEVEL)
    removed = DELETE in touched if incremental else (
        MIN_INSYNC_REPLICAS in current and not touched)
    if not per_broker and removed:
        raise _Refused(ErrorCode.INVALID_CONFIG, ELR_CLUSTER_REMOVAL)


def _alter_broker(broker: BrokerState, per_broker: bool,
                  ops: list[tuple[str, int, str | None]], incremental: bool,
                  validate_only: bool) -> None:
    dynamic = broker.dynamic_configs
    current = dict(dynamic.per_broker if per_broker else dynamic.cluster_default)
    _check_eligible_leader_replicas(per_broker, ops, incremental, current)

    def key_of(key: str) -> Any:
        return BROKER_KEYS.get(base_key(key) or key)

    def is_list(key: str) -> bool:
        found = key_of(key)
        if found is None:
            raise _Refused(ErrorCode.INVALID_CONFIG, f"Unknown config name: {key}")
        return bool(found.type is ConfigType.LIST)

    def not_list(key: str, op: int) -> _Refused:
        verb = "append" if op == APPEND else "subtract"
        return _Refused(ErrorCode.INVALID_CONFIG,
                        f"Config value {verb} is not allowed for config key: {key}")

    def default_of(key: str) -> str | None:
        found = key_of(key)
        return None if found is None else found.default_text

    new = _apply_ops(current if incremental else {}, ops, is_list, default_of, not_list)
    try:
        effective = dynamic.replace(new, per_broker, validate_only=validate_only)
    except (DynamicConfigError, ConfigError) as exc:
        # Kafka answers INVALID_REQUEST for a broker config it cannot apply (KAFKA-13609).
        raise _Refused(ErrorCode.INVALID_REQUEST, str(exc)) from None
    except OSError as exc:
        LOGGER.error("Cannot persist dynamic broker configs: %s", exc)
        raise _Refused(ErrorCode.KAFKA_STORAGE_ERROR,  # a disk failure, as Kafka names it
                       f"Cannot persist dynamic broker configs: {exc.strerror or exc}") from None
    if not validate_only:
        scope = "per-broker" if per_broker else "cluster default"
        LOGGER.info("Dynamic %s configs are now: %s", scope, sorted(new))
        _log_no_effect(no_effect_broker_keys(_set_keys(ops)), f"dynamic {scope} config")
        apply_log_defaults(broker, log_config_from(effective))
        for reconfigure in broker.reconfigurables:
            reconfigure(effective)
        if broker.cleaner is not None:  # the dynamic log.cleaner.* keys apply at once
            broker.cleaner.reconfigure(**cleaner_settings(effective.value_of))


def _set_keys(ops: list[tuple[str, int, str | None]]) -> list[str]:
    return [key for key, op, _ in ops if op != DELETE]


def _log_no_effect(keys: list[str], where: str) -> None:
    if keys:
        LOGGER.info("%s (%s): %s", NO_EFFECT, where, ", ".join(keys))


def apply_log_defaults(broker: BrokerState, default: Any) -> None:
    """Make ``default`` every topic's base config (dynamic ``log.*`` keys apply at once)."""
    logs = broker.logs
    if default == logs.default_config:
        return
    logs.default_config = default
    for topic, partitions in sorted(logs.topics().items()):
        if partitions == 0:
            continue  # a topic whose metadata could not be read keeps its state
        try:
            logs.alter_topic_config(topic, logs.topic_overrides(topic))
        except StorageError as exc:
            LOGGER.warning("Topic %s keeps its previous config: %s", topic, exc)
