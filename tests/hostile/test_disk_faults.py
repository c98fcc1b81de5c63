"""Disk faults, for real: a full tmpfs, and segments that cannot be read.

A full disk turns into KAFKA_STORAGE_ERROR for the partitions that cannot append, never into a
half-written batch that a consumer could see, and appends resume when space comes back. A
segment that cannot be read takes only its own partition offline.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from tests import wire
from tests.wire import RawClient, create_topic, produce_one
from trio_broker import open_broker
from trio_broker.client.core.fetch import FetchedPartition
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.batch import iter_batches
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.records import build_batch, decode_batches


@pytest.fixture
def small_disk(tmpfs) -> Path:
    return tmpfs("2m")


async def produce(client: RawClient, topic: str, value: bytes,
                  partition: int = 0) -> tuple[int, int]:
    """(error code, base offset) of one record, acks=all."""
    return await produce_one(client, topic, build_batch([(b"k", value)]), partition=partition)


async def fetch(client: RawClient, topic: str, offset: int, partition: int = 0,
                ) -> FetchedPartition:
    parts = await wire.fetch(client, topic, {partition: offset}, min_bytes=0, max_bytes=1 << 20)
    return parts[partition]


async def read_all(client: RawClient, topic: str) -> list[tuple[int, bytes]]:
    """(offset, value) of every record, fetching batch after batch (CRCs checked)."""
    out: list[tuple[int, bytes]] = []
    offset = 0
    while True:
        part = await fetch(client, topic, offset)
        assert part.error == 0, part
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
        await create_topic(client, "fills")
        await create_topic(client, "neighbour")
        assert (await produce(client, "neighbour", b"before"))[0] == 0
        ballast = small_disk / "ballast"
        ballast.write_bytes(bytes(512 * 1024))
        value = bytes(range(256)) * 64  # 16 KiB records
        acked = 0
        for _ in range(200):
            result = await produce(client, "fills", value)
            if result[0]:
                break
            assert result[1] == acked
            acked += 1
        assert result[0] == ErrorCode.KAFKA_STORAGE_ERROR
        assert acked > 10
        # Still full: the same error, for the neighbour too, and nothing half-written is served.
        assert (await produce(client, "fills", value))[0] == \
            ErrorCode.KAFKA_STORAGE_ERROR
        assert (await read_all(client, "fills")) == [(i, value) for i in range(acked)]
        assert whole_batches_only(small_disk / "logs" / "fills-0") == acked
        assert (await client.request(ApiKey.ApiVersions, 0)).error_code == 0
        # Space comes back: appends resume at the next offset.
        ballast.unlink()
        resumed = await produce(client, "fills", b"after")
        assert resumed == (0, acked)
        assert (await produce(client, "neighbour", b"after"))[0] == 0
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
            await create_topic(client, topic)
            for i in range(60):
                assert (await produce(client, topic, b"%03d" % i * 8))[0] == 0


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
    caplog.set_level(logging.ERROR, logger="trio_broker.broker.storage")
    async with open_broker(log_dirs=str(log_dir), log_segment_bytes=2048) as broker:
        offline = broker.state.logs.offline_partitions
        assert list(offline) == [("damaged", 0)]
        lines = [r.getMessage() for r in caplog.records]
        assert any("Partition damaged-0 is offline" in line and victim.name in line
                   for line in lines), lines
        client = await RawClient.connect(broker.host, broker.port)
        assert (await produce(client, "damaged", b"x"))[0] == \
            ErrorCode.KAFKA_STORAGE_ERROR
        assert (await fetch(client, "damaged", 0)).error == ErrorCode.KAFKA_STORAGE_ERROR
        # The other partition serves normally, reads and writes.
        assert len(await read_all(client, "healthy")) == 60
        assert (await produce(client, "healthy", b"more"))[1] == 60
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
        assert part.error == 0
        assert [r.offset for _, rs in decode_batches(part.records) for r in rs] == [0]
        # ... and reading where the data is gone is an error for this partition only.
        assert (await fetch(client, "damaged", 1)).error == ErrorCode.KAFKA_STORAGE_ERROR
        assert len(await read_all(client, "healthy")) == 60
        assert (await client.request(ApiKey.ApiVersions, 0)).error_code == 0
