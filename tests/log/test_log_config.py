import pytest

from trio_broker.broker.storage import TOPIC_CONFIG_KEYS, InvalidConfigError, LogConfig
from trio_broker.broker.storage.config import LONG_MAX


def test_defaults_match_kafka() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1073741824
    assert config.segment_ms == 168 * 3600 * 1000
    assert config.retention_ms == 7 * 24 * 3600 * 1000
    assert config.retention_bytes == -1
    assert config.index_interval_bytes == 4096
    assert config.max_message_bytes == 1048588
    assert config.flush_interval_messages == LONG_MAX
    assert config.flush_interval_ms is None
    assert config.message_timestamp_type == "CreateTime"
    assert config.cleanup_policy == "delete"
    assert config.compression_type == "producer"
    assert config.min_insync_replicas == 1


def test_with_overrides_parses_kafka_names() -> None:
    config = LogConfig().with_overrides(
        {
            "segment.bytes": "1024",
            "segment.ms": "60000",
            "retention.ms": "-1",
            "retention.bytes": "5000000",
            "max.message.bytes": "2000000",
            "message.timestamp.type": "LogAppendTime",
            "cleanup.policy": "compact,delete",
            "flush.messages": "1",
            "flush.ms": "1000",
            "index.interval.bytes": "128",
            "segment.index.bytes": "4096",
            "compression.type": "zstd",
            "min.insync.replicas": "2",
        }
    )
    assert config == LogConfig(
        segment_bytes=1024,
        segment_ms=60000,
        retention_ms=-1,
        retention_bytes=5000000,
        max_message_bytes=2000000,
        message_timestamp_type="LogAppendTime",
        cleanup_policy="compact,delete",
        flush_interval_messages=1,
        flush_interval_ms=1000,
        index_interval_bytes=128,
        segment_index_bytes=4096,
        compression_type="zstd",
        min_insync_replicas=2,
    )
    assert config.log_append_time
    assert LogConfig().with_overrides({"flush.ms": str(LONG_MAX)}).flush_interval_ms is None


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("retention.ms", "abc", "Invalid value abc for configuration retention.ms: "
         "Not a number of type LONG"),
        ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: "
         "Value must be at least -1"),
        ("segment.bytes", "10", "Value must be at least 14"),
        ("message.timestamp.type", "Now", "String must be one of: CreateTime, LogAppendTime"),
        ("cleanup.policy", "shred", "Invalid value shred for configuration cleanup.policy: "
         "String must be one of: compact, delete"),
        ("flush.messages", "0", "Value must be at least 1"),
        ("made.up", "1", "Unknown topic config name: made.up"),
        ("compression.type", "brotli", "String must be one of: uncompressed, zstd, lz4, snappy, "
         "gzip, producer"),
        ("min.insync.replicas", "0", "Value must be at least 1"),
        ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
        ("unclean.leader.election.enable", "yes", "Expected value to be either true or false"),
        ("compression.gzip.level", "0", "Value must be between 1 and 9 or equal to -1"),
        ("leader.replication.throttled.replicas", "0-1", "must be the literal '*'"),
    ],
)
def test_invalid_overrides(key: str, value: str, expected: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        LogConfig().with_overrides({key: value})
    message = str(info.value)
    assert "\n" not in message
    assert key in message
    assert expected in message
    assert (info.value.key, info.value.value) == (key, value)


def test_topic_config_keys_describe_every_override() -> None:
    assert set(TOPIC_CONFIG_KEYS) == set(LogConfig().to_topic_configs())
    attr, default, doc = TOPIC_CONFIG_KEYS["retention.ms"]
    assert (attr, default) == ("retention_ms", "604800000")
    assert doc
    assert TOPIC_CONFIG_KEYS["flush.ms"][1] == str(LONG_MAX)
    assert LogConfig(flush_interval_ms=5).topic_config_value("flush.ms") == "5"


def test_from_broker_config_precedence() -> None:
    config = LogConfig.from_broker_config(
        {
            "log.retention.hours": "1",
            "log.retention.minutes": "5",
            "log.roll.hours": "2",
            "log.segment.bytes": "2048",
            "message.max.bytes": "100",
        }
    )
    assert config.retention_ms == 5 * 60 * 1000  # minutes beat hours
    assert config.segment_ms == 2 * 3600 * 1000
    assert config.segment_bytes == 2048
    assert config.max_message_bytes == 100
    assert LogConfig.from_broker_config({"log.retention.hours": "-1"}).retention_ms == -1


def test_compression_and_min_insync_from_broker_keys() -> None:
    config = LogConfig.from_broker_config({"compression.type": "lz4", "min.insync.replicas": "2"})
    assert (config.compression_type, config.min_insync_replicas) == ("lz4", 2)
    for codec in ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"):
        assert LogConfig().with_overrides({"compression.type": codec}).compression_type == codec


def test_log_config_from_broker_config_carries_codec_and_min_insync() -> None:
    from trio_broker.broker.config import BrokerConfig
    from trio_broker.broker.storage import log_config_from

    config = log_config_from(BrokerConfig(compression_type="gzip", min_insync_replicas=3))
    assert (config.compression_type, config.min_insync_replicas) == ("gzip", 3)


def test_every_topic_config_round_trips_through_describe() -> None:
    defaults = LogConfig().to_topic_configs()
    assert len(defaults) == len(TOPIC_CONFIG_KEYS) >= 36
    for name, (_, default, doc) in TOPIC_CONFIG_KEYS.items():
        assert defaults[name] == default, name
        assert doc, name
        assert LogConfig().with_overrides({name: default or ""}).to_topic_configs() == defaults


def test_stored_configs_are_typed() -> None:
    config = LogConfig().with_overrides({
        "min.cleanable.dirty.ratio": "0.25", "unclean.leader.election.enable": "TRUE",
        "delete.retention.ms": "1000", "preallocate": "true", "segment.jitter.ms": "5",
        "follower.replication.throttled.replicas": "*", "compression.zstd.level": "-5",
        "local.retention.ms": "-2", "message.format.version": "2.8-IV1"})
    assert config.min_cleanable_dirty_ratio == 0.25
    assert config.unclean_leader_election_enable is True
    assert (config.delete_retention_ms, config.segment_jitter_ms) == (1000, 5)
    assert config.topic_config_value("min.cleanable.dirty.ratio") == "0.25"
    assert config.topic_config_value("unclean.leader.election.enable") == "true"
    assert LogConfig().topic_config_value("min.cleanable.dirty.ratio") == "0.5"


def test_cross_field_checks() -> None:
    with pytest.raises(InvalidConfigError, match=r"min\.compaction\.lag\.ms \(10\) > "
                                                 r"max\.compaction\.lag\.ms \(5\)"):
        LogConfig().with_overrides({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    with pytest.raises(InvalidConfigError, match="Tiered Storage functionality is disabled"):
        LogConfig().with_overrides({"remote.storage.enable": "true"})
    tiered = LogConfig.from_broker_config({"remote.log.storage.system.enable": "true"})
    assert tiered.with_overrides({"remote.storage.enable": "true"}).remote_storage_enable
    with pytest.raises(InvalidConfigError, match="unsupported for the compacted topics"):
        tiered.with_overrides({"remote.storage.enable": "true", "cleanup.policy": "compact"})
    with pytest.raises(InvalidConfigError, match=r"Value must not be more than retention\.bytes"):
        tiered.with_overrides({"remote.storage.enable": "true", "retention.bytes": "100",
                               "local.retention.bytes": "200"})


def test_every_broker_synonym_sets_its_topic_default() -> None:
    config = LogConfig.from_broker_config({
        "log.cleaner.delete.retention.ms": "5", "log.cleaner.min.compaction.lag.ms": "6",
        "log.cleaner.max.compaction.lag.ms": "7", "log.cleaner.min.cleanable.ratio": "0.9",
        "log.segment.delete.delay.ms": "8", "log.preallocate": "true",
        "unclean.leader.election.enable": "true", "log.roll.jitter.hours": "1",
        "log.index.size.max.bytes": "4096", "log.message.timestamp.after.max.ms": "3600000",
        "compression.gzip.level": "6", "log.local.retention.ms": "-1"})
    assert (config.delete_retention_ms, config.min_compaction_lag_ms,
            config.max_compaction_lag_ms) == (5, 6, 7)
    assert (config.min_cleanable_dirty_ratio, config.file_delete_delay_ms) == (0.9, 8)
    assert config.preallocate
    assert config.unclean_leader_election_enable
    assert (config.segment_jitter_ms, config.segment_index_bytes) == (3_600_000, 4096)
    assert (config.message_timestamp_after_max_ms, config.compression_gzip_level) == (3_600_000, 6)
    assert config.local_retention_ms == -1
    with pytest.raises(InvalidConfigError, match=r"log\.roll\.hours"):
        LogConfig.from_broker_config({"log.roll.hours": "0"})
