"""Per-log configuration (Kafka's ``LogConfig``) and the topic-level config names that set it.

Why a single frozen object: a log reads its config on every append, and topic configs change at
runtime (AlterConfigs). Swapping one immutable ``LogConfig`` is atomic, so an append never sees a
half-applied change. Names and defaults follow Kafka so that ``kafka-configs`` and admin clients
behave as they would against a Kafka broker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ..config import BrokerConfig
from .errors import InvalidConfigError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("delete", "compact")
#: Kafka's BrokerCompressionType names: "producer" keeps batches as the producer sent them
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


@attrs.frozen(slots=True)
class LogConfig:
    #: segment.bytes / log.segment.bytes: roll to a new segment file at this size
    segment_bytes: int = 1024 * 1024 * 1024
    #: segment.ms / log.roll.ms (log.roll.hours): roll a non-empty segment after this long
    segment_ms: int = 7 * 24 * 3600 * 1000
    #: segment.index.bytes / log.index.size.max.bytes: roll when an index file reaches this size
    segment_index_bytes: int = 10 * 1024 * 1024
    #: retention.ms / log.retention.ms: delete segments whose newest record is older; -1 keeps all
    retention_ms: int = 7 * 24 * 3600 * 1000
    #: retention.bytes / log.retention.bytes: delete oldest segments above this size; -1 = no cap
    retention_bytes: int = -1
    #: index.interval.bytes / log.index.interval.bytes: bytes between sparse index entries
    index_interval_bytes: int = 4096
    #: flush.messages / log.flush.interval.messages: fsync after this many records (Kafka: never)
    flush_interval_messages: int = LONG_MAX
    #: flush.ms / log.flush.interval.ms: fsync after this long; None leaves it to the OS
    flush_interval_ms: int | None = None
    #: max.message.bytes / message.max.bytes: largest batch accepted
    max_message_bytes: int = 1048588
    #: message.timestamp.type / log.message.timestamp.type
    message_timestamp_type: str = "CreateTime"
    #: cleanup.policy / log.cleanup.policy; "compact" is stored but not acted upon
    cleanup_policy: str = "delete"
    #: compression.type / compression.type: codec batches are stored with; producer = as sent
    compression_type: str = "producer"
    #: min.insync.replicas / min.insync.replicas: acks=all needs this many in-sync replicas
    min_insync_replicas: int = 1

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def with_overrides(self, overrides: Mapping[str, str]) -> LogConfig:
        """Apply topic-level configs (Kafka names) on top of this config.

        Raises InvalidConfigError naming the first bad key, so CreateTopics and AlterConfigs can
        reject the request without changing anything.
        """
        changes: dict[str, Any] = {}
        for key, raw in overrides.items():
            spec = _TOPIC_SPECS.get(key)
            if spec is None:
                raise InvalidConfigError(key, raw, "unknown topic config")
            changes[spec.attr] = spec.parse(key, raw)
        return attrs.evolve(self, **changes)

    def topic_config_value(self, name: str) -> str:
        """The value of a topic config as DescribeConfigs shows it."""
        spec = _TOPIC_SPECS[name]
        return spec.render(getattr(self, spec.attr))

    def to_topic_configs(self) -> dict[str, str]:
        return {name: self.topic_config_value(name) for name in _TOPIC_SPECS}

    @classmethod
    def from_broker_config(cls, props: Mapping[str, str]) -> LogConfig:
        """Build the broker-wide default from Kafka broker property names (``log.*``)."""
        changes: dict[str, Any] = {}
        for key, (attr, scale) in _BROKER_KEYS.items():
            if key in props and attr not in changes:
                spec = _SPECS_BY_ATTR[attr]
                value = spec.parse(key, props[key])
                if scale != 1 and value is not None and value >= 0:
                    value *= scale
                changes[attr] = value
        return attrs.evolve(cls(), **changes)


def log_config_from(config: BrokerConfig) -> LogConfig:
    """The default topic config implied by a validated broker config's ``log.*`` keys."""
    return LogConfig(
        segment_bytes=config.log_segment_bytes,
        segment_ms=config.log_roll_effective_ms,
        retention_ms=config.log_retention_effective_ms,
        retention_bytes=config.log_retention_bytes,
        index_interval_bytes=config.log_index_interval_bytes,
        flush_interval_messages=config.log_flush_interval_messages,
        flush_interval_ms=config.log_flush_interval_ms,
        max_message_bytes=config.message_max_bytes,
        message_timestamp_type=config.log_message_timestamp_type,
        cleanup_policy=config.log_cleanup_policy,
        compression_type=config.compression_type,
        min_insync_replicas=config.min_insync_replicas,
    )


@attrs.frozen(slots=True)
class _ConfigSpec:
    attr: str
    parse: Callable[[str, str], Any]
    render: Callable[[Any], str]
    doc: str


def _int_parser(minimum: int, maximum: int = LONG_MAX) -> Callable[[str, str], int]:
    def parse(key: str, raw: str) -> int:
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise InvalidConfigError(key, raw, "expected an integer") from None
        if not minimum <= value <= maximum:
            raise InvalidConfigError(key, raw, f"expected a value in [{minimum}, {maximum}]")
        return value

    return parse


def _parse_flush_ms(key: str, raw: str) -> int | None:
    value = _int_parser(0)(key, raw)
    return None if value == LONG_MAX else value


def _parse_timestamp_type(key: str, raw: str) -> str:
    if raw not in TIMESTAMP_TYPES:
        raise InvalidConfigError(key, raw, f"expected one of {', '.join(TIMESTAMP_TYPES)}")
    return raw


def _parse_compression_type(key: str, raw: str) -> str:
    if raw not in COMPRESSION_TYPES:
        raise InvalidConfigError(key, raw, f"String must be one of: {', '.join(COMPRESSION_TYPES)}")
    return raw


def _parse_cleanup_policy(key: str, raw: str) -> str:
    parts = [part.strip() for part in str(raw).split(",") if part.strip()]
    if not parts or any(part not in CLEANUP_POLICIES for part in parts):
        raise InvalidConfigError(key, raw, "expected a list of delete, compact")
    return ",".join(dict.fromkeys(parts))


def _render_optional(value: int | None) -> str:
    return str(LONG_MAX if value is None else value)


_TOPIC_SPECS: dict[str, _ConfigSpec] = {
    "segment.bytes": _ConfigSpec(
        "segment_bytes", _int_parser(14, INT_MAX), str, "Size of one segment file."
    ),
    "segment.ms": _ConfigSpec(
        "segment_ms", _int_parser(1), str, "Roll a non-empty segment after this many ms."
    ),
    "segment.index.bytes": _ConfigSpec(
        "segment_index_bytes", _int_parser(8, INT_MAX), str, "Maximum size of an index file."
    ),
    "retention.ms": _ConfigSpec(
        "retention_ms", _int_parser(-1), str, "Delete segments older than this; -1 keeps all."
    ),
    "retention.bytes": _ConfigSpec(
        "retention_bytes", _int_parser(-1), str, "Delete old segments above this size; -1 off."
    ),
    "index.interval.bytes": _ConfigSpec(
        "index_interval_bytes", _int_parser(0, INT_MAX), str, "Bytes between index entries."
    ),
    "flush.messages": _ConfigSpec(
        "flush_interval_messages", _int_parser(1), str, "fsync after this many records."
    ),
    "flush.ms": _ConfigSpec(
        "flush_interval_ms", _parse_flush_ms, _render_optional, "fsync after this many ms."
    ),
    "max.message.bytes": _ConfigSpec(
        "max_message_bytes", _int_parser(0, INT_MAX), str, "Largest record batch accepted."
    ),
    "message.timestamp.type": _ConfigSpec(
        "message_timestamp_type",
        _parse_timestamp_type,
        str,
        "CreateTime keeps the producer's timestamps; LogAppendTime uses the broker's clock.",
    ),
    "cleanup.policy": _ConfigSpec(
        "cleanup_policy",
        _parse_cleanup_policy,
        str,
        "delete enables retention; compact is accepted but compaction is not implemented.",
    ),
    "compression.type": _ConfigSpec(
        "compression_type",
        _parse_compression_type,
        str,
        "Codec of stored batches; producer keeps the codec the producer chose.",
    ),
    "min.insync.replicas": _ConfigSpec(
        "min_insync_replicas",
        _int_parser(1, INT_MAX),
        str,
        "In-sync replicas an acks=all write needs; above 1 fails on one node.",
    ),
}
_SPECS_BY_ATTR = {spec.attr: spec for spec in _TOPIC_SPECS.values()}

_DEFAULTS = LogConfig()

#: topic config name -> (LogConfig attribute, Kafka default as a string, description)
TOPIC_CONFIG_KEYS: dict[str, tuple[str, str, str]] = {
    name: (spec.attr, spec.render(getattr(_DEFAULTS, spec.attr)), spec.doc)
    for name, spec in _TOPIC_SPECS.items()
}

# broker property -> (attribute, multiplier to ms); earlier keys win, as in Kafka
_BROKER_KEYS: dict[str, tuple[str, int]] = {
    "log.segment.bytes": ("segment_bytes", 1),
    "log.roll.ms": ("segment_ms", 1),
    "log.roll.hours": ("segment_ms", 3600 * 1000),
    "log.index.size.max.bytes": ("segment_index_bytes", 1),
    "log.retention.ms": ("retention_ms", 1),
    "log.retention.minutes": ("retention_ms", 60 * 1000),
    "log.retention.hours": ("retention_ms", 3600 * 1000),
    "log.retention.bytes": ("retention_bytes", 1),
    "log.index.interval.bytes": ("index_interval_bytes", 1),
    "log.flush.interval.messages": ("flush_interval_messages", 1),
    "log.flush.interval.ms": ("flush_interval_ms", 1),
    "message.max.bytes": ("max_message_bytes", 1),
    "log.message.timestamp.type": ("message_timestamp_type", 1),
    "log.cleanup.policy": ("cleanup_policy", 1),
    "compression.type": ("compression_type", 1),
    "min.insync.replicas": ("min_insync_replicas", 1),
}
