"""Raw InitProducerId / Produce / ListOffsets / CreateTopics for the byte-level tests."""

from __future__ import annotations

from typing import Any

from tests.raw_client import RawClient
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.records import build_batch

PRODUCE: Any = request_class(ApiKey.Produce)
LIST_OFFSETS: Any = request_class(ApiKey.ListOffsets)
CREATE_TOPICS: Any = request_class(ApiKey.CreateTopics)


async def create_topic(client: RawClient, name: str, partitions: int = 1) -> None:
    body = await client.request(
        ApiKey.CreateTopics, 2, timeout_ms=10_000, validate_only=False,
        topics=[CREATE_TOPICS.CreatableTopic(name=name, num_partitions=partitions,
                                             replication_factor=1, assignments=[], configs=[])])
    assert [t.error_code for t in body.topics] == [0]


async def init_producer_id(client: RawClient, version: int = 1) -> tuple[int, int, int]:
    """(error code, producer id, epoch)"""
    body = await client.request(ApiKey.InitProducerId, version, transactional_id=None,
                                transaction_timeout_ms=60_000)
    return body.error_code, body.producer_id, body.producer_epoch


async def produce(client: RawClient, topic: str, batch: bytes, *, partition: int = 0,
                  acks: int = -1) -> tuple[int, int]:
    """(error code, base offset) of one batch."""
    body = await client.request(
        ApiKey.Produce, 7, transactional_id=None, acks=acks, timeout_ms=10_000,
        topic_data=[PRODUCE.TopicProduceData(name=topic, partition_data=[
            PRODUCE.TopicProduceData.PartitionProduceData(index=partition, records=batch)])])
    [part] = [p for t in body.responses for p in t.partition_responses]
    return part.error_code, part.base_offset


async def high_watermark(client: RawClient, topic: str, partition: int = 0) -> int:
    body = await client.request(
        ApiKey.ListOffsets, 2, replica_id=-1, isolation_level=0, topics=[
            LIST_OFFSETS.ListOffsetsTopic(name=topic, partitions=[
                LIST_OFFSETS.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=partition, timestamp=-1)])])
    [part] = [p for t in body.topics for p in t.partitions]
    assert part.error_code == 0
    return part.offset


def idempotent_batch(producer_id: int, base_sequence: int, count: int = 3, *,
                     epoch: int = 0) -> bytes:
    return build_batch(
        [(b"k", b"seq-%d" % (base_sequence + i)) for i in range(count)],
        producer_id=producer_id, producer_epoch=epoch, base_sequence=base_sequence)
