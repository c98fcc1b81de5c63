"""Request bodies for raw requests at any version, and readers of what the broker answers.

Why here and not in ``tests/wire.py``: these tests pin every version of the data-path APIs,
including the old and the newest ones the client core does not build; the bodies are made with
the protocol facade only, field by field, so each test says exactly what it sends.
"""

from __future__ import annotations

import uuid
from typing import Any

from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.compression import Compression
from trio_broker.protocol.messages import make_request

_P = request_class(ApiKey.Produce).TopicProduceData
_F = request_class(ApiKey.Fetch).FetchTopic
_L = request_class(ApiKey.ListOffsets).ListOffsetsTopic
_M = request_class(ApiKey.Metadata).MetadataRequestTopic
_O = request_class(ApiKey.OffsetForLeaderEpoch).OffsetForLeaderTopic
TS = 1_700_000_000_000


def produce_body(version: int, topic: str, records: bytes | None, *, partition: int = 0,
                 acks: int = -1, topic_id: uuid.UUID | None = None) -> Any:
    part = _P.PartitionProduceData(index=partition, records=records)
    return make_request(ApiKey.Produce, version, transactional_id=None, acks=acks,
                        timeout_ms=10_000, topic_data=[_P(name=topic, topic_id=topic_id,
                                                          partition_data=[part])])


def fetch_body(version: int, topic: str, offset: int, *, partition: int = 0,
               topic_id: uuid.UUID | None = None, current_leader_epoch: int = -1,
               last_fetched_epoch: int = -1, session_id: int = 0, session_epoch: int = -1,
               isolation_level: int = 0, partition_max_bytes: int = 1 << 20,
               max_bytes: int = 50 << 20) -> Any:
    part = _F.FetchPartition(partition=partition, current_leader_epoch=current_leader_epoch,
                             fetch_offset=offset, last_fetched_epoch=last_fetched_epoch,
                             log_start_offset=-1, partition_max_bytes=partition_max_bytes)
    return make_request(ApiKey.Fetch, version, replica_id=-1, max_wait_ms=0, min_bytes=1,
                        max_bytes=max_bytes, isolation_level=isolation_level,
                        session_id=session_id, session_epoch=session_epoch,
                        topics=[_F(topic=topic, topic_id=topic_id, partitions=[part])],
                        forgotten_topics_data=[], rack_id="")


def list_offsets_body(version: int, topic: str, timestamp: int, *, partition: int = 0,
                      current_leader_epoch: int = -1, isolation_level: int = 0,
                      max_num_offsets: int = 1, repeat: int = 1) -> Any:
    part = _L.ListOffsetsPartition(partition_index=partition, timestamp=timestamp,
                                   current_leader_epoch=current_leader_epoch,
                                   max_num_offsets=max_num_offsets)
    return make_request(ApiKey.ListOffsets, version, replica_id=-1,
                        isolation_level=isolation_level, timeout_ms=1000,
                        topics=[_L(name=topic, partitions=[part] * repeat)])


def metadata_body(version: int, names: list[str] | None = None, *,
                  ids: list[uuid.UUID] | None = None, auto_create: bool = False,
                  cluster_ops: bool = False, topic_ops: bool = False) -> Any:
    topics = None
    if names is not None or ids is not None:
        topics = [_M(name=n) for n in names or []] + [_M(name=None, topic_id=i) for i in ids or []]
    return make_request(ApiKey.Metadata, version, topics=topics,
                        allow_auto_topic_creation=auto_create,
                        include_cluster_authorized_operations=cluster_ops,
                        include_topic_authorized_operations=topic_ops)


def epoch_body(version: int, topic: str, leader_epoch: int, *, partition: int = 0,
               current_leader_epoch: int = -1) -> Any:
    part = _O.OffsetForLeaderPartition(partition=partition, leader_epoch=leader_epoch,
                                       current_leader_epoch=current_leader_epoch)
    return make_request(ApiKey.OffsetForLeaderEpoch, version, replica_id=-1,
                        topics=[_O(topic=topic, partitions=[part])])


def legacy_set(magic: int, codec: Compression, values: list[bytes], *,
               base_ts: int = TS) -> bytes:
    """A v0/v1 message set as kafka-python's legacy writer builds it (an independent writer)."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec),
                                       batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(i, base_ts + i, b"key-%d" % i, value)
    return bytes(builder.build())


def read_legacy(data: bytes) -> list[tuple[int, int | None, bytes | None, bytes | None, int]]:
    """(offset, timestamp, key, value, magic) of every message, read by kafka-python."""
    out = []
    reader = MemoryRecords(data)
    while (batch := reader.next_batch()) is not None:
        out += [(r.offset, r.timestamp, r.key, r.value, batch.magic) for r in batch]
    return out


def the_partition(body: Any) -> Any:
    [topic] = body.responses if hasattr(body, "responses") else body.topics
    parts = (topic.partition_responses if hasattr(topic, "partition_responses")
             else topic.partitions)
    [part] = parts
    return part
