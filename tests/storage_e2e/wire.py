"""Raw Produce / Fetch / ListOffsets requests over ``tests.raw_client.RawClient``."""

from __future__ import annotations

from typing import Any

from tests.raw_client import RawClient
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.batch import iter_batches
from trio_broker.protocol.records import Record, decode_batches

PRODUCE = request_class(ApiKey.Produce)
FETCH = request_class(ApiKey.Fetch)
LIST_OFFSETS = request_class(ApiKey.ListOffsets)
LATEST = -1
EARLIEST = -2


def produce_fields(topic: str, batches: dict[int, bytes], *, acks: int = 1) -> dict[str, Any]:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 10_000, "topic_data": [
        PRODUCE.TopicProduceData(name=topic, partition_data=[
            PRODUCE.TopicProduceData.PartitionProduceData(index=p, records=b)
            for p, b in batches.items()])]}


async def produce(client: RawClient, topic: str, batches: dict[int, bytes], *, acks: int = 1,
                  version: int = 7) -> dict[int, tuple[int, int]]:
    """{partition: (error code, base offset)}"""
    body = await client.request(ApiKey.Produce, version, **produce_fields(topic, batches,
                                                                         acks=acks))
    return {p.index: (p.error_code, p.base_offset)
            for t in body.responses for p in t.partition_responses}


def fetch_fields(topic: str, offsets: dict[int, int], *, max_wait_ms: int = 0,
                 min_bytes: int = 1, max_bytes: int = 50 << 20,
                 partition_max_bytes: int = 1 << 20) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
            "max_bytes": max_bytes, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [FETCH.FetchTopic(topic=topic, partitions=[
                FETCH.FetchTopic.FetchPartition(
                    partition=p, current_leader_epoch=-1, fetch_offset=o, log_start_offset=-1,
                    partition_max_bytes=partition_max_bytes) for p, o in offsets.items()])],
            "forgotten_topics_data": [], "rack_id": ""}


async def fetch(client: RawClient, topic: str, offsets: dict[int, int],
                **kwargs: Any) -> dict[int, Any]:
    """{partition: PartitionData} of one Fetch v11."""
    body = await client.request(ApiKey.Fetch, 11, **fetch_fields(topic, offsets, **kwargs))
    assert body.error_code == 0
    return {p.partition_index: p for t in body.responses for p in t.partitions}


async def list_offsets(client: RawClient, topic: str, partitions: list[int],
                       timestamp: int) -> dict[int, tuple[int, int, int]]:
    """{partition: (error code, offset, timestamp)}"""
    body = await client.request(
        ApiKey.ListOffsets, 3, replica_id=-1, isolation_level=0, topics=[
            LIST_OFFSETS.ListOffsetsTopic(name=topic, partitions=[
                LIST_OFFSETS.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=p, timestamp=timestamp) for p in partitions])])
    return {p.partition_index: (p.error_code, p.offset, p.timestamp)
            for t in body.topics for p in t.partitions}


def records_of(data: bytes) -> list[Record]:
    return [r for _, records in decode_batches(data) for r in records]


def batch_sizes(data: bytes) -> list[int]:
    """Sizes of the whole batches in a fetched payload; asserts there is no partial tail."""
    sizes = [h.size for _, h in iter_batches(data)]
    assert sum(sizes) == len(data), "fetch returned a partial batch"
    return sizes
