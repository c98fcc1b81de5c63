"""Client-metrics subscriptions (KIP-714): Kafka's CLIENT_METRICS config resources, persisted.

Why Kafka's model: a subscription is a named config resource (type 16) with three keys,
``metrics`` (metric name prefixes, ``*`` for all), ``interval.ms`` (the push interval, 100 ms to
an hour) and ``match`` (``client_id=regex`` and the like; none matches every client). Admins set
them with IncrementalAlterConfigs (``kafka-client-metrics.sh``, ``kafka-configs.sh --entity-type
client-metrics``) and list them with ListConfigResources; a client is sent the union of the
metrics of every subscription that matches it, at the shortest of their intervals. Kafka keeps
them in its metadata log; one node keeps them in a small JSON file in the first log dir, written
atomically, so they outlive restarts like the other dynamic configs.

``telemetry.subscribe.all`` (this broker's own key) adds a subscription to all metrics that
matches every client, for local use: a developer sees every client's metrics without an admin
step.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ...protocol.errors import ErrorCode
from ..security.patterns import InvalidPattern, compile_pattern
from ..storage.files import atomic_write

if TYPE_CHECKING:
    import re2

LOGGER = logging.getLogger(__name__)

#: the file of subscriptions in the first log directory
CLIENT_METRICS_FILE = "client-metrics.json"
METRICS_CONFIG, INTERVAL_MS_CONFIG, MATCH_CONFIG = "metrics", "interval.ms", "match"
#: ClientMetricsConfigs: the keys and their defaults, as DescribeConfigs shows them
DEFAULTS = {METRICS_CONFIG: "", INTERVAL_MS_CONFIG: str(5 * 60 * 1000), MATCH_CONFIG: ""}
#: DescribeConfigs v3+ config types: LIST 7, INT 3
CONFIG_TYPES = {METRICS_CONFIG: 7, INTERVAL_MS_CONFIG: 3, MATCH_CONFIG: 7}
DOCS = {METRICS_CONFIG: "Metric name prefixes the matching clients push; * for all.",
        INTERVAL_MS_CONFIG: "How often the matching clients push, in milliseconds.",
        MATCH_CONFIG: "Client selectors (client_id=regex, ...); none matches every client."}
INTERVAL_MS_DEFAULT = 5 * 60 * 1000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3600000
ALL_SUBSCRIBED_METRICS = "*"
CLIENT_INSTANCE_ID, CLIENT_ID = "client_instance_id", "client_id"
CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION = "client_software_name", "client_software_version"
CLIENT_SOURCE_ADDRESS, CLIENT_SOURCE_PORT = "client_source_address", "client_source_port"
MATCH_PARAMS = frozenset({CLIENT_INSTANCE_ID, CLIENT_ID, CLIENT_SOFTWARE_NAME,
                          CLIENT_SOFTWARE_VERSION, CLIENT_SOURCE_ADDRESS, CLIENT_SOURCE_PORT})
#: the name of the subscription telemetry.subscribe.all adds (not a resource: not listed)
SUBSCRIBE_ALL = "<telemetry.subscribe.all>"


class ClientMetricsConfigError(ValueError):
    """A subscription Kafka refuses: its error code, and Kafka's message as ``str()``."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class Subscription(NamedTuple):
    """One subscription, parsed (a tuple, not an attrs class: every broker imports this
    module, few ever hold a subscription)."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    #: match parameter -> the pattern its value must match entirely
    match: tuple[tuple[str, re2._Regexp], ...]

    def matches(self, client: Mapping[str, str]) -> bool:
        return all(pattern.fullmatch(client.get(param, "")) is not None
                   for param, pattern in self.match)


def split_list(value: str) -> list[str]:
    """A LIST config's items, as Kafka's ConfigDef parses them (comma-separated, trimmed)."""
    return [item.strip() for item in value.split(",") if item.strip()]


def _split_match(item: str) -> tuple[str, str]:
    param, sep, pattern = item.partition("=")
    if not sep or param.strip() not in MATCH_PARAMS:
        raise ClientMetricsConfigError(ErrorCode.INVALID_CONFIG,
                                       f"Illegal client matching pattern: {item}")
    return param.strip(), pattern.strip()


def _compile(param: str, pattern: str) -> re2._Regexp:
    # RE2, as Kafka's RE2/J: linear-time matching of a pattern an admin sent over the wire
    try:
        return compile_pattern(pattern)
    except InvalidPattern as exc:
        raise ClientMetricsConfigError(
            ErrorCode.INVALID_CONFIG, f"Client match pattern `{param}={pattern}` is not a valid "
            f"regular expression: {exc}.") from None


def validate(name: str, configs: Mapping[str, str]) -> None:
    """Kafka's ClientMetricsConfigs.validate: the name, known keys, the interval's bounds, the
    match patterns."""
    if not name:
        raise ClientMetricsConfigError(ErrorCode.INVALID_REQUEST,
                                       "Subscription name can't be empty")
    for key in configs:
        if key not in DEFAULTS:
            raise ClientMetricsConfigError(ErrorCode.INVALID_REQUEST,
                                           f"Unknown client metrics configuration: {key}")
    if INTERVAL_MS_CONFIG in configs:
        raw = configs[INTERVAL_MS_CONFIG].strip()
        try:
            interval = int(raw)
        except ValueError:
            raise ClientMetricsConfigError(
                ErrorCode.INVALID_CONFIG, f"Invalid value {raw} for configuration "
                f"{INTERVAL_MS_CONFIG}: Not a number of type INT") from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise ClientMetricsConfigError(
                ErrorCode.INVALID_REQUEST, f"Invalid value {interval} for {INTERVAL_MS_CONFIG}, "
                "interval must be between 100 and 3600000 (1 hour)")
    for item in split_list(configs.get(MATCH_CONFIG, "")):
        _compile(*_split_match(item))


def parse(name: str, configs: Mapping[str, str]) -> Subscription:
    """The subscription of validated ``configs`` (defaults for the keys not set)."""
    interval = int(configs.get(INTERVAL_MS_CONFIG, INTERVAL_MS_DEFAULT))
    match = tuple((param, _compile(param, pattern)) for param, pattern in (
        _split_match(item) for item in split_list(configs.get(MATCH_CONFIG, ""))))
    return Subscription(name, tuple(split_list(configs.get(METRICS_CONFIG, ""))), interval, match)


class ClientMetricsStore:
    """The named subscriptions of one node, persisted; ``version`` moves on every change so
    client instances know to take their subscription again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.configs: dict[str, dict[str, str]] = {}
        self.version = 0
        self._subscriptions: list[Subscription] | None = None
        try:
            doc = json.loads(path.read_text())
            for name, configs in doc.get("subscriptions", {}).items():
                validate(name, configs)
                self.configs[name] = dict(configs)
        except FileNotFoundError:
            pass
        except (OSError, ValueError, AttributeError) as exc:
            LOGGER.error("Client metrics subscriptions in %s not loaded: %s", path, exc)

    def describe(self, name: str) -> dict[str, str]:
        """The keys set on ``name`` (none for a name never set)."""
        return dict(self.configs.get(name, {}))

    def alter(self, name: str, configs: Mapping[str, str], *, validate_only: bool) -> None:
        """Replace ``name``'s keys with ``configs`` (none left: the subscription is gone)."""
        validate(name, configs)
        if validate_only or self.configs.get(name, {}) == dict(configs):
            return
        new = dict(self.configs)
        if configs:
            new[name] = dict(configs)
        else:
            new.pop(name, None)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps({"version": 1, "subscriptions": new}, indent=2,
                                           sort_keys=True).encode() + b"\n")
        self.configs = new
        self.version += 1
        self._subscriptions = None
        LOGGER.info("Client metrics subscription %s is now %s", name, dict(configs) or "deleted")

    def subscriptions(self) -> list[Subscription]:
        if self._subscriptions is None:
            self._subscriptions = [parse(name, c) for name, c in sorted(self.configs.items())]
        return self._subscriptions


def subscribe_all(interval_ms: int) -> Subscription:
    """The subscription telemetry.subscribe.all adds: every metric of every client."""
    return Subscription(SUBSCRIBE_ALL, (ALL_SUBSCRIBED_METRICS,), interval_ms, ())
