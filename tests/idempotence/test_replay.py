"""Idempotence at the byte level: a batch replayed by hand, sequence gaps, zombie epochs and
missing sequences, before and after clean and kill -9 restarts; producer ids never repeat."""

from __future__ import annotations

import signal
from pathlib import Path

import trio

from tests.broker_process import BrokerProcess
from tests.wire import (
    RawClient,
    create_topic,
    high_watermark,
    idempotent_batch,
    init_producer_id,
    produce_one,
)
from trio_broker import open_broker
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.records import build_batch

TOPIC = "replayed"


async def _new_producer(client: RawClient, version: int = 1) -> int:
    error, producer_id, epoch = await init_producer_id(client, version)
    assert (error, epoch) == (0, 0)
    assert producer_id >= 0
    return producer_id


async def test_replayed_batch_gets_its_original_offset_and_bad_sequences_are_refused(
        tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    with trio.fail_after(30):
        async with open_broker(log_dirs=data) as broker:
            broker.state.logs.create_topic(TOPIC, 1, {})
            client = await RawClient.connect(broker.host, broker.port)
            # a plain batch first, so the original offset is not simply 0
            assert await produce_one(client, TOPIC, build_batch([(None, b"plain")])) == (0, 0)
            pid = await _new_producer(client)
            first = idempotent_batch(pid, 0)
            assert await produce_one(client, TOPIC, first) == (0, 1)
            assert await high_watermark(client, TOPIC) == 4

            assert await produce_one(client, TOPIC, first) == (0, 1), "the replay is a duplicate"
            assert await high_watermark(client, TOPIC) == 4, "a duplicate must not be appended"

            # still recognised behind later batches: the last five are remembered
            offsets = {0: 1}
            for seq in range(3, 15, 3):
                error, offsets[seq] = await produce_one(client, TOPIC, idempotent_batch(pid, seq))
                assert error == 0
            assert await produce_one(client, TOPIC, first) == (0, 1)
            assert await produce_one(client, TOPIC, idempotent_batch(pid, 6)) == (0, offsets[6])
            end = await high_watermark(client, TOPIC)
            assert end == 16

            # the next sequence is 15: anything else is a gap
            assert await produce_one(client, TOPIC, idempotent_batch(pid, 16)) == (
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
            # a producer id without a sequence
            assert await produce_one(client, TOPIC, idempotent_batch(pid, -1)) == (
                ErrorCode.INVALID_RECORD, -1)
            assert await high_watermark(client, TOPIC) == end

            # a zombie: the same producer id with an older epoch
            zombie = await _new_producer(client, version=0)
            assert zombie > pid
            assert (await produce_one(client, TOPIC, idempotent_batch(zombie, 0, epoch=1)))[0] == 0
            end += 3
            assert await produce_one(client, TOPIC, idempotent_batch(zombie, 3, epoch=0)) == (
                ErrorCode.INVALID_PRODUCER_EPOCH, -1)
            # and a newer epoch must start again at sequence 0
            assert await produce_one(client, TOPIC, idempotent_batch(zombie, 3, epoch=2)) == (
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
            assert await high_watermark(client, TOPIC) == end
            await client.aclose()
            last_pid = zombie

        async with open_broker(log_dirs=data) as broker:  # a clean restart
            client = await RawClient.connect(broker.host, broker.port)
            assert await produce_one(client, TOPIC, first) == (0, 1)
            assert await produce_one(client, TOPIC, idempotent_batch(pid, 12)) == (0, offsets[12])
            assert await produce_one(client, TOPIC, idempotent_batch(zombie, 3, epoch=0)) == (
                ErrorCode.INVALID_PRODUCER_EPOCH, -1)
            assert await high_watermark(client, TOPIC) == end
            assert await produce_one(client, TOPIC, idempotent_batch(pid, 15)) == (0, end)
            assert await _new_producer(client) > last_pid
            await client.aclose()


async def test_duplicates_are_detected_after_kill_9_and_producer_ids_never_repeat(
        tmp_path: Path) -> None:
    # Tiny segments: producer state comes back from a snapshot taken at a roll plus a scan of
    # the batches after it, not just from the snapshot written at a clean shutdown.
    broker = BrokerProcess(tmp_path / "data", "log.flush.interval.messages=1",
                           "log.segment.bytes=600")
    producer_ids: list[int] = []
    try:
        with trio.fail_after(60):
            await trio.to_thread.run_sync(broker.start)
            client = await RawClient.connect("127.0.0.1", broker.port)
            await create_topic(client, TOPIC)
            pid = await _new_producer(client)
            producer_ids.append(pid)
            offsets = {}
            for seq in range(0, 30, 3):
                error, offsets[seq] = await produce_one(client, TOPIC, idempotent_batch(pid, seq))
                assert error == 0
            end = await high_watermark(client, TOPIC)
            assert end == 30
            await client.aclose()

            broker.kill()  # SIGKILL: no shutdown, no snapshot, no clean-shutdown marker
            partition_dir = tmp_path / "data" / f"{TOPIC}-0"
            assert len(list(partition_dir.glob("*.log"))) > 1
            assert list(partition_dir.glob("*.snapshot")), "rolls should have left snapshots"
            await trio.to_thread.run_sync(broker.start)
            assert "Truncated" not in broker.log_text()
            client = await RawClient.connect("127.0.0.1", broker.port)
            for seq in (27, 15, 21):  # the last five batches, in any order
                assert await produce_one(client, TOPIC, idempotent_batch(pid, seq)) == (
                    0, offsets[seq])
            # older than the last five: no longer recognised, and not appended either
            assert await produce_one(client, TOPIC, idempotent_batch(pid, 0)) == (
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
            assert await high_watermark(client, TOPIC) == end
            assert await produce_one(client, TOPIC, idempotent_batch(pid, 30)) == (0, end)
            producer_ids.append(await _new_producer(client))
            await client.aclose()

            assert broker.stop(signal.SIGTERM) == 0
            await trio.to_thread.run_sync(broker.start)
            client = await RawClient.connect("127.0.0.1", broker.port)
            assert await produce_one(client, TOPIC, idempotent_batch(pid, 30)) == (0, end)
            assert await high_watermark(client, TOPIC) == end + 3
            producer_ids.append(await _new_producer(client))
            await client.aclose()
    finally:
        broker.kill()
    assert producer_ids == sorted(set(producer_ids)), f"ids repeated: {producer_ids}"
