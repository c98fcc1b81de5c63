"""A duplicate is acknowledged no earlier than its original: with ``flush.messages=1`` the
answer to a retried batch waits for the fsync of the original, as the original's answer does.

The one injected fault: a disk whose fsync stalls until the test lets it go (the only way to
hold the original's flush open while its retry arrives on another connection).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import trio

from tests.wire import RawClient, idempotent_batch, init_producer_id, produce_one
from trio_broker import open_broker

TOPIC = "durable-duplicates"


async def test_duplicate_is_answered_only_once_its_original_is_fsynced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_fsync = os.fsync
    released = threading.Event()
    stalled = trio.Event()
    armed = False
    token = trio.lowlevel.current_trio_token()

    def stalling_fsync(fd: int) -> None:
        if armed and not released.is_set():
            trio.from_thread.run_sync(stalled.set, trio_token=token)
            released.wait(10)
        real_fsync(fd)

    with trio.fail_after(30):
        async with open_broker(log_dirs=str(tmp_path / "data"), log_flush_interval_messages=1,
                               log_flush_scheduler_interval_ms=3_600_000) as broker:
            broker.state.logs.create_topic(TOPIC, 1, {})
            log = broker.state.logs.get_log(TOPIC, 0)
            first = await RawClient.connect(broker.host, broker.port)
            retry = await RawClient.connect(broker.host, broker.port)
            error, pid, _ = await init_producer_id(first)
            assert error == 0
            batch = idempotent_batch(pid, 0)
            monkeypatch.setattr(os, "fsync", stalling_fsync)
            armed = True

            original_answer: list[tuple[int, int]] = []
            duplicate_answer: list[tuple[int, int, int]] = []

            async def send_original() -> None:
                original_answer.append(await produce_one(first, TOPIC, batch))

            async def send_duplicate() -> None:
                error, offset = await produce_one(retry, TOPIC, batch)
                duplicate_answer.append((error, offset, log.recovery_point))
                stalled_or_answered.set()

            stalled_or_answered = trio.Event()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(send_original)
                await stalled.wait()  # the original is appended, its fsync is stuck
                stalled = trio.Event()
                nursery.start_soon(send_duplicate)
                # either the duplicate is answered at once, or its own flush stalls too
                async with trio.open_nursery() as race:
                    race.start_soon(_set_when, stalled, stalled_or_answered)
                    await stalled_or_answered.wait()
                    race.cancel_scope.cancel()
                released.set()
            assert original_answer == [(0, 0)]
            error, offset, recovery_point = duplicate_answer[0]
            assert (error, offset) == (0, 0)
            assert recovery_point >= 3, \
                "the duplicate was acknowledged before its original reached the disk"
            assert log.high_watermark == 3
            await first.aclose()
            await retry.aclose()


async def _set_when(event: trio.Event, then: trio.Event) -> None:
    await event.wait()
    then.set()
