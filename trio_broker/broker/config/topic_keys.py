"""Every Kafka topic config (Kafka 3.9 and 4.x ``LogConfig``), with its broker-level synonyms.

Why the synonyms live here: a topic's value comes from its own override, else from the broker
keys that supply its default, in Kafka's order (``ServerTopicConfigSynonyms``: ``retention.ms``
from ``log.retention.ms``, then ``log.retention.minutes``, then ``log.retention.hours``). The
same chain builds the default ``LogConfig``, names the synonyms DescribeConfigs lists, and marks
which broker keys may be altered dynamically as topic defaults.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from .defs import (
    LONG_MAX,
    AtLeast,
    Between,
    Check,
    ConfigKey,
    ListOf,
    OneOf,
    Support,
)
from .defs import ConfigType as T

__all__ = ["COMPRESSION_TYPES", "TOPIC_KEYS", "TopicKey", "metadata_version_reason"]

#: Kafka's BrokerCompressionType names, in Kafka's order (its error message lists them so)
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
HOUR_MS = 3_600_000
MINUTE_MS = 60_000

_REPLICA_LIST = re.compile(r"([0-9]+:[0-9]+)?")
_VERSION = re.compile(r"(0\.[0-9]+\.[0-9]+|[1-9][0-9]*\.[0-9]+)(-IV[0-9]+)?")


def _throttled_replicas(name: str) -> Check:
    def reason(value: list[str]) -> str | None:
        items = [item.strip() for item in value]
        if all(_REPLICA_LIST.fullmatch(item) for item in items) or "".join(items) == "*":
            return None
        return (f"{name} must be the literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return Check(reason, "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


def metadata_version_reason(value: str) -> str | None:
    """Kafka's MetadataVersionValidator, by shape: "0.10.2", "2.8", "3.0-IV1"."""
    parts = value.split(".")
    keep = 3 if value.startswith("0.") else 2
    key = ".".join(parts[:keep]) if len(parts) > keep else value
    return None if _VERSION.fullmatch(key) else f"Version {value} is not a valid version"


def _gzip_level(value: int) -> str | None:
    if value > 9 or (value < 1 and value != -1):
        return "Value must be between 1 and 9 or equal to -1"
    return None


GZIP_LEVEL = Check(_gzip_level, "[1,...,9] or -1")
METADATA_VERSION = Check(metadata_version_reason, "[0.8.0, ..., 3.9-IV0]")


class TopicKey(NamedTuple):
    """A topic config: its ConfigDef facts, the LogConfig attribute, its broker synonyms."""

    key: ConfigKey
    #: LogConfig attribute name
    attr: str
    #: broker keys supplying the default, first wins: (broker key, multiplier to this unit)
    synonyms: tuple[tuple[str, int], ...] = ()

    @property
    def name(self) -> str:
        return self.key.name

    @property
    def broker_key(self) -> str | None:
        """The broker key DescribeConfigs names as this config's synonym (Kafka's first)."""
        return self.synonyms[0][0] if self.synonyms else None


H, S = Support.HONOURED, Support.STORED
_CLEANER = "by the log cleaner"
_CODEC_DEFAULT = "recompression uses the codec's default level"
_ONE_NODE = "no meaning on one node"
_TIERED = "tiered storage is not supported"


def _t(name: str, type_: T, default: Any, validator: Any, attr: str, support: Support, doc: str,
       *synonyms: str | tuple[str, int], note: str = "", versions: str = "") -> TopicKey:
    syn = tuple(s if isinstance(s, tuple) else (s, 1) for s in synonyms)
    return TopicKey(ConfigKey(name, type_, default, validator, doc, support, versions=versions,
                              note=note), attr, syn)


_TOPIC_KEYS: tuple[TopicKey, ...] = (
    _t("cleanup.policy", T.LIST, ["delete"], ListOf(("compact", "delete")), "cleanup_policy", H,
       "delete: drop old segments by retention.ms and retention.bytes; compact: keep the last "
       "record per key.", "log.cleanup.policy", note="compact: by the log cleaner"),
    _t("compression.gzip.level", T.INT, -1, GZIP_LEVEL, "compression_gzip_level", S,
       "gzip level used when the broker recompresses to gzip.", "compression.gzip.level",
       note=_CODEC_DEFAULT),
    _t("compression.lz4.level", T.INT, 9, Between(1, 17), "compression_lz4_level", S,
       "lz4 level used when the broker recompresses to lz4.", "compression.lz4.level",
       note=_CODEC_DEFAULT),
    _t("compression.type", T.STRING, "producer", OneOf(COMPRESSION_TYPES), "compression_type", H,
       "Codec of the stored batches; producer keeps the codec each producer chose.",
       "compression.type", note="recompression on the produce path"),
    _t("compression.zstd.level", T.INT, 3, Between(-131072, 22), "compression_zstd_level", S,
       "zstd level used when the broker recompresses to zstd.", "compression.zstd.level",
       note=_CODEC_DEFAULT),
    _t("delete.retention.ms", T.LONG, 86_400_000, AtLeast(0), "delete_retention_ms", H,
       "How long tombstones of a compacted topic stay readable.",
       "log.cleaner.delete.retention.ms", note=_CLEANER),
    _t("file.delete.delay.ms", T.LONG, 60_000, AtLeast(0), "file_delete_delay_ms", S,
       "Wait before deleting a segment file from disk.", "log.segment.delete.delay.ms",
       note="segments are deleted at once"),
    _t("flush.messages", T.LONG, LONG_MAX, AtLeast(1), "flush_interval_messages", H,
       "fsync after this many records; 1 syncs before every acknowledgement.",
       "log.flush.interval.messages"),
    _t("flush.ms", T.LONG, LONG_MAX, AtLeast(0), "flush_interval_ms", H,
       "fsync data that has waited this long; the default leaves it to the OS.",
       "log.flush.interval.ms"),
    _t("follower.replication.throttled.replicas", T.LIST, [],
       _throttled_replicas("follower.replication.throttled.replicas"),
       "follower_replication_throttled_replicas", S,
       "Replicas whose follower fetching is throttled.", note=_ONE_NODE),
    _t("index.interval.bytes", T.INT, 4096, AtLeast(0), "index_interval_bytes", H,
       "Bytes between offset-index entries.", "log.index.interval.bytes"),
    _t("leader.replication.throttled.replicas", T.LIST, [],
       _throttled_replicas("leader.replication.throttled.replicas"),
       "leader_replication_throttled_replicas", S,
       "Replicas whose leader-side replication is throttled.", note=_ONE_NODE),
    _t("local.retention.bytes", T.LONG, -2, AtLeast(-2), "local_retention_bytes", S,
       "Local bytes kept when tiered storage is on; -2 follows retention.bytes.",
       "log.local.retention.bytes", note=_TIERED),
    _t("local.retention.ms", T.LONG, -2, AtLeast(-2), "local_retention_ms", S,
       "Local time kept when tiered storage is on; -2 follows retention.ms.",
       "log.local.retention.ms", note=_TIERED),
    _t("max.compaction.lag.ms", T.LONG, LONG_MAX, AtLeast(1), "max_compaction_lag_ms", H,
       "Longest a record may stay uncompacted.", "log.cleaner.max.compaction.lag.ms",
       note=_CLEANER),
    _t("max.message.bytes", T.INT, 1_048_588, AtLeast(0), "max_message_bytes", H,
       "Largest record batch accepted.", "message.max.bytes"),
    _t("message.downconversion.enable", T.BOOLEAN, True, None, "message_downconversion_enable",
       S, "Whether old Fetch versions may be served by down-converting batches.",
       "log.message.downconversion.enable", note="a no-op in Kafka 4.x"),
    _t("message.format.version", T.STRING, "3.0-IV1", METADATA_VERSION,
       "message_format_version", S, "Record format of the topic (ignored since Kafka 3.0).",
       "log.message.format.version", versions="3.x", note="ignored, as Kafka 3.x does"),
    _t("message.timestamp.after.max.ms", T.LONG, LONG_MAX, AtLeast(0),
       "message_timestamp_after_max_ms", S,
       "How far in the future a CreateTime timestamp may be (Kafka 4.x default: 1 hour).",
       "log.message.timestamp.after.max.ms", note="not checked on the produce path yet"),
    _t("message.timestamp.before.max.ms", T.LONG, LONG_MAX, AtLeast(0),
       "message_timestamp_before_max_ms", S, "How far in the past a CreateTime timestamp may be.",
       "log.message.timestamp.before.max.ms", note="not checked on the produce path yet"),
    _t("message.timestamp.difference.max.ms", T.LONG, LONG_MAX, AtLeast(0),
       "message_timestamp_difference_max_ms", S,
       "Deprecated bound on CreateTime skew (before and after).",
       "log.message.timestamp.difference.max.ms", versions="3.x",
       note="not checked on the produce path yet"),
    _t("message.timestamp.type", T.STRING, "CreateTime", OneOf(("CreateTime", "LogAppendTime")),
       "message_timestamp_type", H,
       "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's clock.",
       "log.message.timestamp.type"),
    _t("min.cleanable.dirty.ratio", T.DOUBLE, 0.5, Between(0, 1), "min_cleanable_dirty_ratio",
       H, "Dirty share of a log that makes it eligible for compaction.",
       "log.cleaner.min.cleanable.ratio", note=_CLEANER),
    _t("min.compaction.lag.ms", T.LONG, 0, AtLeast(0), "min_compaction_lag_ms", H,
       "Shortest a record stays uncompacted.", "log.cleaner.min.compaction.lag.ms",
       note=_CLEANER),
    _t("min.insync.replicas", T.INT, 1, AtLeast(1), "min_insync_replicas", H,
       "In-sync replicas an acks=all write needs; above 1 fails with NOT_ENOUGH_REPLICAS here.",
       "min.insync.replicas", note="checked on the produce path"),
    _t("preallocate", T.BOOLEAN, False, None, "preallocate", S,
       "Preallocate segment files on disk.", "log.preallocate", note="files grow as written"),
    _t("remote.log.copy.disable", T.BOOLEAN, False, None, "remote_log_copy_disable", S,
       "Stop copying segments to tiered storage, keep reading them.", note=_TIERED),
    _t("remote.log.delete.on.disable", T.BOOLEAN, False, None, "remote_log_delete_on_disable", S,
       "Delete tiered data when remote storage is turned off.", note=_TIERED),
    _t("remote.storage.enable", T.BOOLEAN, False, None, "remote_storage_enable", S,
       "Tier this topic's old segments to remote storage.", note=_TIERED),
    _t("retention.bytes", T.LONG, -1, None, "retention_bytes", H,
       "Delete the oldest segments above this partition size; -1: no limit.",
       "log.retention.bytes"),
    _t("retention.ms", T.LONG, 604_800_000, AtLeast(-1), "retention_ms", H,
       "Delete segments whose newest record is older than this; -1 keeps everything.",
       "log.retention.ms", ("log.retention.minutes", MINUTE_MS), ("log.retention.hours", HOUR_MS)),
    _t("segment.bytes", T.INT, 1_073_741_824, AtLeast(14), "segment_bytes", H,
       "Roll to a new segment file at this size (Kafka 4.x requires at least 1 MiB).",
       "log.segment.bytes"),
    _t("segment.index.bytes", T.INT, 10_485_760, AtLeast(4), "segment_index_bytes", H,
       "Roll when an index file reaches this size.", "log.index.size.max.bytes"),
    _t("segment.jitter.ms", T.LONG, 0, AtLeast(0), "segment_jitter_ms", S,
       "Random jitter subtracted from segment.ms.", "log.roll.jitter.ms",
       ("log.roll.jitter.hours", HOUR_MS), note="segments roll without jitter"),
    _t("segment.ms", T.LONG, 604_800_000, AtLeast(1), "segment_ms", H,
       "Roll a non-empty segment after this long.", "log.roll.ms", ("log.roll.hours", HOUR_MS)),
    _t("unclean.leader.election.enable", T.BOOLEAN, False, None,
       "unclean_leader_election_enable", S,
       "Whether an out-of-sync replica may become leader.", "unclean.leader.election.enable",
       note=_ONE_NODE),
)

#: topic config name -> definition, in name order
TOPIC_KEYS: dict[str, TopicKey] = {t.name: t for t in _TOPIC_KEYS}
