import pytest

from trio_broker.log import TOPIC_CONFIG_KEYS, InvalidConfigError, LogConfig
from trio_broker.log.config import LONG_MAX


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
        ("retention.ms", "abc", "expected an integer"),
        ("retention.ms", "-2", "[-1,"),
        ("segment.bytes", "10", "[14,"),
        ("message.timestamp.type", "Now", "CreateTime, LogAppendTime"),
        ("cleanup.policy", "shred", "delete, compact"),
        ("flush.messages", "0", "[1,"),
        ("made.up", "1", "unknown topic config"),
        ("compression.type", "brotli", "uncompressed, zstd, lz4, snappy, gzip, producer"),
        ("min.insync.replicas", "0", "[1,"),
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
    from trio_broker.config import BrokerConfig
    from trio_broker.log import log_config_from

    config = log_config_from(BrokerConfig(compression_type="gzip", min_insync_replicas=3))
    assert (config.compression_type, config.min_insync_replicas) == ("gzip", 3)
