"""Per-log configuration (Kafka's ``LogConfig``): every topic config, parsed and typed.

Why a single frozen object: a log reads its config on every append, and topic configs change at
runtime (AlterConfigs). Swapping one immutable ``LogConfig`` is atomic, so an append never sees a
half-applied change. The names, types, defaults, validation and broker synonyms come from the
topic config table (``trio_broker.broker.config.topic_keys``), so ``kafka-configs`` and admin
clients see what a Kafka broker would show them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ..config.defs import LONG_MAX, ConfigType, ConfigValueError
from ..config.keys import BROKER_KEYS
from ..config.topic_keys import COMPRESSION_TYPES, TOPIC_KEYS, TopicKey
from .errors import InvalidConfigError

if TYPE_CHECKING:
    from ..config import BrokerConfig

__all__ = ["COMPRESSION_TYPES", "INT_MAX", "LONG_MAX", "TOPIC_CONFIG_KEYS", "LogConfig",
           "TopicConfigError", "log_config_from"]

INT_MAX = 2**31 - 1
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("delete", "compact")


class TopicConfigError(InvalidConfigError):
    """INVALID_CONFIG with Kafka's own message (``Invalid value x for configuration y: ...``,
    ``Unknown topic config name: y``)."""

    def __init__(self, key: str, value: str | None, message: str) -> None:
        super().__init__(key, value, message)
        self.args = (message,)


def _default(name: str) -> Any:
    return _to_attr(TOPIC_KEYS[name], TOPIC_KEYS[name].key.default)


def _to_attr(topic_key: TopicKey, value: Any) -> Any:
    """A parsed ConfigDef value as the LogConfig attribute holds it."""
    if topic_key.key.type is ConfigType.LIST:
        return ",".join(dict.fromkeys(value))
    if topic_key.name == "flush.ms":
        return None if value == LONG_MAX else value
    return value


def _from_attr(topic_key: TopicKey, value: Any) -> Any:
    if topic_key.key.type is ConfigType.LIST:
        return [v for v in value.split(",") if v]
    if topic_key.name == "flush.ms":
        return LONG_MAX if value is None else value
    return value


@attrs.frozen(slots=True)
class LogConfig:
    """Every topic config by attribute; Kafka's default unless a broker key or override says."""

    segment_bytes: int = _default("segment.bytes")
    segment_ms: int = _default("segment.ms")
    segment_jitter_ms: int = _default("segment.jitter.ms")
    segment_index_bytes: int = _default("segment.index.bytes")
    retention_ms: int = _default("retention.ms")
    retention_bytes: int = _default("retention.bytes")
    index_interval_bytes: int = _default("index.interval.bytes")
    #: flush.messages: fsync after this many records (Kafka's default: never)
    flush_interval_messages: int = _default("flush.messages")
    #: flush.ms: fsync after this long; None (Kafka's Long.MAX_VALUE) leaves it to the OS
    flush_interval_ms: int | None = _default("flush.ms")
    max_message_bytes: int = _default("max.message.bytes")
    message_timestamp_type: str = _default("message.timestamp.type")
    message_timestamp_before_max_ms: int = _default("message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = _default("message.timestamp.after.max.ms")
    message_timestamp_difference_max_ms: int = _default("message.timestamp.difference.max.ms")
    #: "delete", "compact" or both, comma-separated (compact: by the log cleaner)
    cleanup_policy: str = _default("cleanup.policy")
    #: codec batches are stored with; "producer" keeps them as sent
    compression_type: str = _default("compression.type")
    compression_gzip_level: int = _default("compression.gzip.level")
    compression_lz4_level: int = _default("compression.lz4.level")
    compression_zstd_level: int = _default("compression.zstd.level")
    #: acks=all needs this many in-sync replicas (one node has one)
    min_insync_replicas: int = _default("min.insync.replicas")
    delete_retention_ms: int = _default("delete.retention.ms")
    min_compaction_lag_ms: int = _default("min.compaction.lag.ms")
    max_compaction_lag_ms: int = _default("max.compaction.lag.ms")
    min_cleanable_dirty_ratio: float = _default("min.cleanable.dirty.ratio")
    file_delete_delay_ms: int = _default("file.delete.delay.ms")
    preallocate: bool = _default("preallocate")
    unclean_leader_election_enable: bool = _default("unclean.leader.election.enable")
    leader_replication_throttled_replicas: str = _default("leader.replication.throttled.replicas")
    follower_replication_throttled_replicas: str = _default(
        "follower.replication.throttled.replicas")
    message_downconversion_enable: bool = _default("message.downconversion.enable")
    message_format_version: str = _default("message.format.version")
    remote_storage_enable: bool = _default("remote.storage.enable")
    remote_log_copy_disable: bool = _default("remote.log.copy.disable")
    remote_log_delete_on_disable: bool = _default("remote.log.delete.on.disable")
    local_retention_ms: int = _default("local.retention.ms")
    local_retention_bytes: int = _default("local.retention.bytes")
    #: broker's remote.log.storage.system.enable: topics may enable remote storage only if set
    remote_storage_system_enable: bool = attrs.field(default=False, repr=False)

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def with_overrides(self, overrides: Mapping[str, str]) -> LogConfig:
        """Apply topic-level configs (Kafka names) on top of this config.

        Raises TopicConfigError (INVALID_CONFIG, Kafka's message) for the first unknown name or
        bad value, and for combinations Kafka refuses, so CreateTopics and AlterConfigs can
        reject the request without changing anything.
        """
        for key in overrides:
            if key not in TOPIC_KEYS:
                raise TopicConfigError(key, overrides[key], f"Unknown topic config name: {key}")
        changes: dict[str, Any] = {}
        for key, raw in overrides.items():
            topic_key = TOPIC_KEYS[key]
            try:
                value = topic_key.key.parse(raw)
            except ConfigValueError as exc:
                raise TopicConfigError(key, raw, str(exc)) from None
            changes[topic_key.attr] = _to_attr(topic_key, value)
        config = attrs.evolve(self, **changes)
        config.validate()
        return config

    def validate(self) -> None:
        """Kafka's cross-field checks (``LogConfig.validateValues`` and the remote ones)."""
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise TopicConfigError(
                "min.compaction.lag.ms", str(self.min_compaction_lag_ms),
                f"conflict topic config setting min.compaction.lag.ms "
                f"({self.min_compaction_lag_ms}) > max.compaction.lag.ms "
                f"({self.max_compaction_lag_ms})")
        if not self.remote_storage_enable:
            return
        if not self.remote_storage_system_enable:
            raise TopicConfigError("remote.storage.enable", "true",
                                   "Tiered Storage functionality is disabled in the broker. "
                                   "Topic cannot be configured with remote log storage.")
        if "compact" in self.cleanup_policy.split(","):
            raise TopicConfigError("cleanup.policy", self.cleanup_policy,
                                   "Remote log storage is unsupported for the compacted topics")
        for local, total, name in (
                (self.local_retention_bytes, self.retention_bytes, "bytes"),
                (self.local_retention_ms, self.retention_ms, "ms")):
            key = f"local.retention.{name}"
            if total != -1 and local != -2:
                if local == -1:
                    raise TopicConfigError(key, str(local), (
                        f"Invalid value {local} for configuration {key}: Value must not be -1 as "
                        f"retention.{name} value is set as {total}."))
                if local > total:
                    raise TopicConfigError(key, str(local), (
                        f"Invalid value {local} for configuration {key}: Value must not be more "
                        f"than retention.{name} property value: {total}"))

    def topic_config_value(self, name: str) -> str | None:
        """The value of a topic config as DescribeConfigs shows it."""
        topic_key = TOPIC_KEYS[name]
        return topic_key.key.render(_from_attr(topic_key, getattr(self, topic_key.attr)))

    def to_topic_configs(self) -> dict[str, str | None]:
        return {name: self.topic_config_value(name) for name in TOPIC_KEYS}

    @classmethod
    def from_broker_config(cls, props: Mapping[str, Any]) -> LogConfig:
        """The broker-wide default from Kafka broker keys (``log.*``), strings or values.

        Each topic config takes the first of its broker synonyms that is set, in Kafka's order
        (``log.retention.ms``, then ``.minutes``, then ``.hours``); a negative time stays -1.
        """
        changes: dict[str, Any] = {}
        for topic_key in TOPIC_KEYS.values():
            for broker_key, scale in topic_key.synonyms:
                raw = props.get(broker_key)
                if raw is None:
                    continue
                try:
                    value = BROKER_KEYS[broker_key].parse(raw)
                except ConfigValueError as exc:
                    raise TopicConfigError(broker_key, str(raw), str(exc)) from None
                if value is None:
                    continue
                if scale != 1:
                    value = -1 if value < 0 else value * scale
                changes[topic_key.attr] = _to_attr(topic_key, value)
                break
        if "remote.log.storage.system.enable" in props:
            changes["remote_storage_system_enable"] = BROKER_KEYS[
                "remote.log.storage.system.enable"].parse(props["remote.log.storage.system.enable"])
        return attrs.evolve(cls(), **changes)


def log_config_from(config: BrokerConfig) -> LogConfig:
    """The default topic config implied by a validated broker config's ``log.*`` keys."""
    values = config.log_config_values()
    # LogConfig is frozen: brokers started with the same keys (tests, embedded brokers) share
    # one, built and validated once, not at every start (docs/benchmarks.md, "Start-up")
    key = repr(sorted(values.items()))
    cached = _LOG_CONFIGS.get(key)
    if cached is None:
        if len(_LOG_CONFIGS) >= 16:
            _LOG_CONFIGS.clear()
        cached = _LOG_CONFIGS[key] = LogConfig.from_broker_config(values)
    return cached


_LOG_CONFIGS: dict[str, LogConfig] = {}


#: topic config name -> (LogConfig attribute, Kafka default as a string, description)
TOPIC_CONFIG_KEYS: dict[str, tuple[str, str | None, str]] = {
    name: (t.attr, t.key.default_text, t.key.doc) for name, t in TOPIC_KEYS.items()
}
