"""Disk faults, for real: a full tmpfs, and segments that cannot be read.

A full disk turns into KAFKA_STORAGE_ERROR for the partitions that cannot append, never into a
half-written batch that a consumer could see, and appends resume when space comes back. A
segment that cannot be read takes only its own partition offline.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from tests.raw_client import RawClient
from trio_broker import open_broker
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.batch import iter_batches
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.records import build_batch, decode_batches

PRODUCE = request_class(ApiKey.Produce)
FETCH = request_class(ApiKey.Fetch)
CREATE = request_class(ApiKey.CreateTopics)


@pytest.fixture
def small_disk(tmpfs) -> Path:
    return tmpfs("2m")


async def create(client: RawClient, topic: str, partitions: int = 1) -> None:
    resp = await client.request(ApiKey.CreateTopics, 4, timeout_ms=1000, validate_only=False,
                                topics=[CREATE.CreatableTopic(name=topic, num_partitions=partitions,
                                                              replication_factor=1,
                                                              assignments=[], configs=[])])
    assert resp.topics[0].error_code == 0, resp


async def produce(client: RawClient, topic: str, value: bytes, partition: int = 0) -> Any:
    data = PRODUCE.TopicProduceData(name=topic, partition_data=[
        PRODUCE.TopicProduceData.PartitionProduceData(
            index=partition, records=build_batch([(b"k", value)]))])
    resp = await client.request(ApiKey.Produce, 7, transactional_id=None, acks=-1,
                                timeout_ms=5000, topic_data=[data])
    return resp.responses[0].partition_responses[0]


async def fetch(client: RawClient, topic: str, offset: int, partition: int = 0) -> Any:
    part = FETCH.FetchTopic.FetchPartition(partition=partition, current_leader_epoch=-1,
                                           fetch_offset=offset, log_start_offset=-1,
                                           partition_max_bytes=1 << 20)
    resp = await client.request(ApiKey.Fetch, 11, replica_id=-1, max_wait_ms=0, min_bytes=0,
                                max_bytes=1 << 20, isolation_level=0, session_id=0,
                                session_epoch=-1, forgotten_topics_data=[], rack_id="",
                                topics=[FETCH.FetchTopic(topic=topic, partitions=[part])])
    return resp.responses[0].partitions[0]


async def read_all(client: RawClient, topic: str) -> list[tuple[int, bytes]]:
    """(offset, value) of every record, fetching batch after batch (CRCs checked)."""
    out: list[tuple[int, bytes]] = []
    offset = 0
    while True:
        part = await fetch(client, topic, offset)
        assert part.error_code == 0, part
        if not part.records:
            return out
        for header, records in decode_batches(part.records):
            out += [(r.offset, r.value) for r in records]
            offset = header.next_offset


def whole_batches_only(partition_dir: Path) -> int:
    """Bytes of every segment file are whole batches; returns the batch count."""
    count = 0
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        end = 0
        for pos, header in iter_batches(data):
            end = pos + header.size
            count += 1
        assert end == len(data), f"{segment}: {len(data) - end} bytes of a partial batch"
    return count


async def test_full_disk_is_a_storage_error_and_appends_resume(small_disk):
    async with open_broker(log_dirs=str(small_disk / "logs"),
                           log_flush_interval_messages=1) as broker:
        client = await RawClient.connect(broker.host, broker.port)
        await create(client, "fills")
        await create(client, "neighbour")
        assert (await produce(client, "neighbour", b"before")).error_code == 0
        ballast = small_disk / "ballast"
        ballast.write_bytes(bytes(512 * 1024))
        value = bytes(range(256)) * 64  # 16 KiB records
        acked = 0
        for _ in range(200):
            result = await produce(client, "fills", value)
            if result.error_code:
                break
            assert result.base_offset == acked
            acked += 1
        assert result.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert acked > 10
        # Still full: the same error, for the neighbour too, and nothing half-written is served.
        assert (await produce(client, "fills", value)).error_code == \
            ErrorCode.KAFKA_STORAGE_ERROR
        assert (await read_all(client, "fills")) == [(i, value) for i in range(acked)]
        assert whole_batches_only(small_disk / "logs" / "fills-0") == acked
        assert (await client.request(ApiKey.ApiVersions, 0)).error_code == 0
        # Space comes back: appends resume at the next offset.
        ballast.unlink()
        resumed = await produce(client, "fills", b"after")
        assert (resumed.error_code, resumed.base_offset) == (0, acked)
        assert (await produce(client, "neighbour", b"after")).error_code == 0
        records = await read_all(client, "fills")
        assert [o for o, _ in records] == list(range(acked + 1))
        assert records[-1] == (acked, b"after")
        assert [v for _, v in await read_all(client, "neighbour")] == [b"before", b"after"]
    assert whole_batches_only(small_disk / "logs" / "fills-0") == acked + 1


def _damage(victim: Path, damage: str) -> None:
    if damage == "segment-is-a-directory":
        victim.unlink()
        victim.mkdir()
    elif damage == "segment-truncated-mid-batch":
        os.truncate(victim, victim.stat().st_size - 25)
    else:
        with open(victim, "r+b") as f:
            f.seek(80)
            f.write(b"\xff" * 40)


async def _fill_two_topics(log_dir: Path) -> None:
    async with open_broker(log_dirs=str(log_dir), log_segment_bytes=2048) as broker:
        client = await RawClient.connect(broker.host, broker.port)
        for topic in ("damaged", "healthy"):
            await create(client, topic)
            for i in range(60):
                assert (await produce(client, topic, b"%03d" % i * 8)).error_code == 0


@pytest.mark.parametrize("damage", ["segment-is-a-directory", "segment-truncated-mid-batch",
                                    "garbage-over-a-batch"])
async def test_an_unreadable_segment_takes_only_its_partition_offline(tmp_path, caplog, damage):
    log_dir = tmp_path / "logs"
    await _fill_two_topics(log_dir)
    segments = sorted((log_dir / "damaged-0").glob("*.log"))
    assert len(segments) >= 3
    victim = segments[1]  # neither the first nor the active segment
    _damage(victim, damage)
    sizes = {p.name: p.stat().st_size for p in segments[2:]}
    caplog.set_level(logging.ERROR, logger="trio_broker.log")
    async with open_broker(log_dirs=str(log_dir), log_segment_bytes=2048) as broker:
        offline = broker.state.logs.offline_partitions
        assert list(offline) == [("damaged", 0)]
        lines = [r.getMessage() for r in caplog.records]
        assert any("Partition damaged-0 is offline" in line and victim.name in line
                   for line in lines), lines
        client = await RawClient.connect(broker.host, broker.port)
        assert (await produce(client, "damaged", b"x")).error_code == \
            ErrorCode.KAFKA_STORAGE_ERROR
        assert (await fetch(client, "damaged", 0)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        # The other partition serves normally, reads and writes.
        assert len(await read_all(client, "healthy")) == 60
        assert (await produce(client, "healthy", b"more")).base_offset == 60
    # Nothing after the damage was deleted or truncated.
    assert {p.name: p.stat().st_size for p in segments[2:]} == sizes


async def test_a_segment_damaged_while_serving_fails_only_that_partition(tmp_path):
    log_dir = tmp_path / "logs"
    await _fill_two_topics(log_dir)
    async with open_broker(log_dirs=str(log_dir), log_segment_bytes=2048) as broker:
        client = await RawClient.connect(broker.host, broker.port)
        first = sorted((log_dir / "damaged-0").glob("*.log"))[0]
        os.truncate(first, 100)  # cut under the broker's open file descriptor
        # What is still on disk is served whole (a cut-off tail is what clients skip) ...
        part = await fetch(client, "damaged", 0)
        assert part.error_code == 0
        assert [r.offset for _, rs in decode_batches(part.records) for r in rs] == [0]
        # ... and reading where the data is gone is an error for this partition only.
        assert (await fetch(client, "damaged", 1)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert len(await read_all(client, "healthy")) == 60
        assert (await client.request(ApiKey.ApiVersions, 0)).error_code == 0
