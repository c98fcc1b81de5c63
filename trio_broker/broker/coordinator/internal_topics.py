"""``__consumer_offsets`` and ``__transaction_state`` as Kafka shows them: compacted topics of
coordinator records in Kafka's formats.

Why a second copy beside the coordinators' own files (``commits.log``, ``groups.log``,
``transactions.log``): those files are what the coordinators reload from, and their formats are
made for that (one fsynced record per request, a torn tail cut off, a rewrite of the live
state). Tools that learn consumer lag or transaction states by consuming the internal topics
(Burrow, kafka-lag-exporter, ``kafka-console-consumer --formatter``) need Kafka's records, at
Kafka's partitions, served by Fetch and ListOffsets like any partition log. So every change the
coordinators make durable is also appended, after its file write, to the partition of the
internal topic its key hashes to (``partition_for_key``, Kafka's ``partitionFor``), as the
records Kafka writes:

- an offset commit: ``OffsetCommitKey`` (version 1: group, topic, partition) and
  ``OffsetCommitValue`` version 3 (offset, leader epoch, metadata, commit time), version 1 (with
  the expire time) when the commit gave a retention time, as Kafka's
  ``GroupCoordinatorRecordHelpers.newOffsetCommitRecord`` picks;
- a classic group's generation: ``GroupMetadataKey`` (version 2: group) and
  ``GroupMetadataValue`` version 3;
- deletions (DeleteGroups, OffsetDelete, offset expiry): the keys with a null value (tombstones),
  which the log cleaner keeps for ``delete.retention.ms`` and then drops;
- a transactional id's state: ``TransactionLogKey`` (version 0) and ``TransactionLogValue``
  version 0; an expired id (``Dead``) is a tombstone.

The topics are made as Kafka makes them: on the first FindCoordinator of their kind (or the
first write after a DeleteTopics), with ``offsets.topic.num.partitions`` /
``transaction.state.log.num.partitions`` partitions and the topic configs Kafka gives them
(``cleanup.policy=compact``; see ``offsets_topic_configs``).

A crash between the file write and the topic append loses that change from the topic, never
from the coordinator: the file is the one that was acknowledged.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from ...protocol.batch import read_batch_header
from ...protocol.records import build_batch
from ..config import BrokerConfig
from ..offload import run_io
from ..storage import LogManager, StorageError, TopicAlreadyExistsError

LOGGER = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
#: Kafka's ``Topic.INTERNAL_TOPICS``: produced to by coordinators only
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_TOPIC})

#: the record-type versions of the keys (Kafka's ``CoordinatorRecordType``)
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
TRANSACTION_LOG_KEY_VERSION = 0
OFFSET_COMMIT_VALUE_VERSION = 3
#: the value version Kafka writes for a commit carrying an explicit expire time
OFFSET_COMMIT_VALUE_EXPIRING_VERSION = 1
GROUP_METADATA_VALUE_VERSION = 3
TRANSACTION_LOG_VALUE_VERSION = 0

#: Kafka's ``TransactionState`` ids, by this coordinator's state names
TRANSACTION_STATUS = {"Empty": 0, "Ongoing": 1, "PrepareCommit": 2, "PrepareAbort": 3,
                      "CompleteCommit": 4, "CompleteAbort": 5, "Dead": 6,
                      "PrepareEpochFence": 7}

#: a coordinator record: key and value bytes (None: a tombstone)
CoordinatorRecord = tuple[bytes, bytes | None]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def is_internal(topic: str | None) -> bool:
    return topic in INTERNAL_TOPICS


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode) % partitions`` (``abs`` of MIN_VALUE is 0 there)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# --- Kafka's record formats (non-flexible versions: int16-length strings) ---------------------

def _string(value: str) -> bytes:
    raw = value.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def _nullable_string(value: str | None) -> bytes:
    return _I16.pack(-1) if value is None else _string(value)


def _bytes(value: bytes) -> bytes:
    return _I32.pack(len(value)) + value


def offset_commit_key(group_id: str, topic: str, partition: int) -> bytes:
    return (_I16.pack(OFFSET_COMMIT_KEY_VERSION) + _string(group_id) + _string(topic)
            + _I32.pack(partition))


def offset_commit_value(offset: int, leader_epoch: int, metadata: str | None,
                        commit_timestamp_ms: int, expire_timestamp_ms: int = -1) -> bytes:
    if expire_timestamp_ms >= 0:
        return (_I16.pack(OFFSET_COMMIT_VALUE_EXPIRING_VERSION) + _I64.pack(offset)
                + _string(metadata or "") + _I64.pack(commit_timestamp_ms)
                + _I64.pack(expire_timestamp_ms))
    return (_I16.pack(OFFSET_COMMIT_VALUE_VERSION) + _I64.pack(offset) + _I32.pack(leader_epoch)
            + _string(metadata or "") + _I64.pack(commit_timestamp_ms))


def group_metadata_key(group_id: str) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + _string(group_id)


def group_metadata_value(generation: int, protocol_type: str | None, protocol: str | None,
                         leader: str | None, state_timestamp_ms: int,
                         members: Iterable[Mapping[str, Any]]) -> bytes:
    """``members``: dicts of member_id, group_instance_id, client_id, client_host,
    rebalance_timeout_ms, session_timeout_ms, subscription, assignment."""
    members = list(members)
    parts = [_I16.pack(GROUP_METADATA_VALUE_VERSION), _string(protocol_type or ""),
             _I32.pack(generation), _nullable_string(protocol), _nullable_string(leader),
             _I64.pack(state_timestamp_ms), _I32.pack(len(members))]
    for m in members:
        parts += (_string(m["member_id"]), _nullable_string(m["group_instance_id"]),
                  _string(m["client_id"]), _string(m["client_host"]),
                  _I32.pack(m["rebalance_timeout_ms"]), _I32.pack(m["session_timeout_ms"]),
                  _bytes(m["subscription"]), _bytes(m["assignment"]))
    return b"".join(parts)


def transaction_log_key(transactional_id: str) -> bytes:
    return _I16.pack(TRANSACTION_LOG_KEY_VERSION) + _string(transactional_id)


def transaction_log_value(producer_id: int, producer_epoch: int, timeout_ms: int, state: str,
                          partitions: Iterable[tuple[str, int]], last_update_ms: int,
                          start_ms: int) -> bytes:
    """Kafka's TransactionLogValue v0: the partitions are null in state Empty."""
    parts = [_I16.pack(TRANSACTION_LOG_VALUE_VERSION), _I64.pack(producer_id),
             _I16.pack(producer_epoch), _I32.pack(timeout_ms),
             bytes([TRANSACTION_STATUS[state]])]
    if state == "Empty":
        parts.append(_I32.pack(-1))
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            by_topic.setdefault(topic, []).append(partition)
        parts.append(_I32.pack(len(by_topic)))
        for topic, ids in by_topic.items():
            parts += (_string(topic), _I32.pack(len(ids)), *(_I32.pack(p) for p in ids))
    parts += (_I64.pack(last_update_ms), _I64.pack(start_ms))
    return b"".join(parts)


# --- the topics -------------------------------------------------------------------------------

def offsets_topic_configs(config: BrokerConfig) -> dict[str, str]:
    """Kafka's ``GroupCoordinator.groupMetadataTopicConfigs``."""
    return {"cleanup.policy": "compact", "compression.type": "producer",
            "segment.bytes": str(config.value_of("offsets.topic.segment.bytes"))}


def transaction_topic_configs(config: BrokerConfig) -> dict[str, str]:
    """Kafka's ``TransactionStateManager.transactionTopicConfigs``."""
    return {"cleanup.policy": "compact", "compression.type": "uncompressed",
            "min.insync.replicas": str(config.value_of("transaction.state.log.min.isr")),
            "segment.bytes": str(config.value_of("transaction.state.log.segment.bytes")),
            "unclean.leader.election.enable": "false"}


class InternalTopics:
    """Makes the internal topics and appends coordinator records to them.

    ``on_append(topic, partition, size)`` is told of every append (the broker wakes fetches
    parked on the partition)."""

    def __init__(self, config: BrokerConfig, logs: LogManager, *,
                 on_append: Callable[[str, int, int], None] = lambda t, p, n: None) -> None:
        self.config = config
        self.logs = logs
        self.on_append = on_append
        self.partitions = {
            OFFSETS_TOPIC: int(config.value_of("offsets.topic.num.partitions")),
            TRANSACTION_TOPIC: int(config.value_of("transaction.state.log.num.partitions"))}
        self.configs = {OFFSETS_TOPIC: offsets_topic_configs(config),
                        TRANSACTION_TOPIC: transaction_topic_configs(config)}

    def exists(self, topic: str) -> bool:
        return self.logs.partition_count(topic) is not None

    def ensure(self, topic: str) -> int:
        """Create ``topic`` with Kafka's partition count and configs unless it exists (blocking:
        call it in a worker thread); its partition count."""
        count = self.logs.partition_count(topic)
        if count is not None:
            return count
        try:
            self.logs.create_topic(topic, self.partitions[topic], self.configs[topic])
        except TopicAlreadyExistsError:
            pass
        LOGGER.info("created internal topic %s with %d partitions", topic,
                    self.partitions[topic])
        return self.logs.partition_count(topic) or 0

    def partition_of(self, topic: str, key: str) -> int:
        return partition_for_key(key, self.partitions[topic])

    async def prepare(self, topic: str, *,
                      run: Callable[..., Awaitable[Any]] = run_io) -> None:
        """Make ``topic`` (in a worker thread, through ``run``) unless it exists. A writer calls
        it before its file write, so that nothing is awaited between that write, its answers
        and the append (``append_if_exists``)."""
        if not self.exists(topic):
            try:
                await run(self.ensure, topic)
            except StorageError as exc:
                LOGGER.error("creating internal topic %s failed: %s", topic, exc)

    def append_if_exists(self, topic: str, by_key: Mapping[str, list[CoordinatorRecord]],
                         ) -> None:
        """``append`` without making the topic (``prepare`` made it; a topic deleted since is
        made again by the next ``prepare``)."""
        if any(by_key.values()) and self.exists(topic):
            self.append(topic, by_key)

    def append(self, topic: str, by_key: Mapping[str, list[CoordinatorRecord]],
               now_ms: int | None = None) -> None:
        """Append each key's records (one batch per partition) to the partition the key hashes
        to. A topic deleted or shrunk under the coordinator is logged, not raised: the change is
        already durable in the coordinator's file."""
        now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        by_partition: dict[int, list[CoordinatorRecord]] = {}
        for key, records in by_key.items():
            if records:
                by_partition.setdefault(self.partition_of(topic, key), []).extend(records)
        for partition, records in sorted(by_partition.items()):
            log = self.logs.get_log(topic, partition)
            if log is None:
                LOGGER.warning("%s-%d does not exist: %d coordinator records not appended",
                               topic, partition, len(records))
                continue
            batch = build_batch(records, base_timestamp_ms=now_ms)
            try:
                info = log.append(batch, read_batch_header(batch), now_ms=now_ms)
            except StorageError as exc:
                LOGGER.error("appending coordinator records to %s-%d failed: %s", topic,
                             partition, exc)
                continue
            self.on_append(topic, partition, info.size)


__all__ = ["INTERNAL_TOPICS", "OFFSETS_TOPIC", "TRANSACTION_TOPIC", "CoordinatorRecord",
           "InternalTopics", "group_metadata_key", "group_metadata_value", "is_internal",
           "java_string_hash", "offset_commit_key", "offset_commit_value",
           "offsets_topic_configs", "partition_for_key", "transaction_log_key",
           "transaction_log_value", "transaction_topic_configs"]
