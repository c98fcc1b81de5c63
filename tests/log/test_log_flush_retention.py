import threading
import time
from pathlib import Path

import attrs
import pytest

from tests.log.log_helpers import SMALL, TS, append, open_log
from trio_broker.broker.storage import LogConfig
from trio_broker.protocol.records import decode_batches

DAY_MS = 24 * 3600 * 1000


def test_needs_flush_by_messages(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(flush_interval_messages=10))
    append(log, 4)
    assert not log.needs_flush()
    append(log, 6)
    assert log.needs_flush()
    log.flush()
    assert log.recovery_point == 10
    assert not log.needs_flush()
    log.close()


def test_needs_flush_by_time(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(flush_interval_ms=0))
    assert not log.needs_flush()  # nothing unflushed
    append(log)
    assert log.needs_flush()
    log.close()


def test_default_policy_flushes_only_rolled_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", attrs.evolve(SMALL, segment_bytes=500))
    append(log, value=b"x" * 300)
    assert not log.needs_flush()  # Kafka's default: leave it to the OS
    append(log, value=b"x" * 300)  # rolls
    assert log.needs_flush()
    log.flush(up_to_offset=1)
    assert log.recovery_point == 1
    assert not log.needs_flush()
    log.close()


def test_flush_from_a_thread_while_appending_and_rolling(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", attrs.evolve(SMALL, segment_bytes=2000))
    stop = threading.Event()
    errors: list[BaseException] = []
    flushes = 0

    def flusher() -> None:
        nonlocal flushes
        try:
            while not stop.is_set():
                log.flush()
                flushes += 1
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for i in range(1500):
            append(log, 1, value=b"v" * (i % 100))
            if i % 300 == 299:
                log.delete_old_segments(TS)  # no-op under retention -1, takes the lock
    finally:
        stop.set()
        thread.join()
    assert not errors
    assert flushes > 0
    log.flush()
    assert log.recovery_point == log.log_end_offset == 1500
    log.close()
    log.flush()  # a closed log ignores late flushes


def test_flush_races_retention_deleting_segments(tmp_path: Path) -> None:
    config = attrs.evolve(SMALL, segment_bytes=1000, retention_bytes=3000)
    log = open_log(tmp_path / "t-0", config)
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            while not stop.is_set():
                log.flush()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for _ in range(800):
            append(log, 1, value=b"r" * 200)
            log.delete_old_segments(TS)
    finally:
        stop.set()
        thread.join()
    assert not errors
    assert log.size_bytes <= 4000
    log.close()


def test_retention_by_time_moves_log_start_forward(tmp_path: Path) -> None:
    config = attrs.evolve(SMALL, segment_bytes=600, retention_ms=DAY_MS)
    log = open_log(tmp_path / "t-0", config)
    for i in range(30):
        append(log, 1, value=b"x" * 100, ts=TS + i * 1000)
    bases = log.segment_base_offsets()
    assert len(bases) > 4
    # Everything in the first two segments is older than a day at this time:
    now = TS + DAY_MS + (bases[2] - 1) * 1000 + 1
    assert log.delete_old_segments(now) == 2
    assert log.log_start_offset == bases[2]
    assert log.segment_base_offsets() == bases[2:]
    assert not (tmp_path / "t-0" / f"{bases[0]:020d}.log").exists()
    assert log.read(bases[2], 100).first_offset == bases[2]
    with pytest.raises(Exception, match="outside"):
        log.read(0, 100)
    # Only moves forward, and survives a restart.
    assert log.delete_old_segments(now - DAY_MS) == 0
    log.close()
    reopened = open_log(tmp_path / "t-0", config, clean_shutdown=True)
    assert reopened.log_start_offset == bases[2]
    reopened.close()


def test_retention_by_time_rolls_an_expired_active_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", attrs.evolve(SMALL, retention_ms=1000))
    for _ in range(5):
        append(log, 2, ts=TS)
    assert log.num_segments == 1
    assert log.delete_old_segments(TS + 5000) == 1
    assert log.log_start_offset == log.log_end_offset == 10
    assert log.segment_base_offsets() == [10]
    assert log.read(10, 100).records == b""
    assert append(log, 1).first_offset == 10
    log.close()


def test_retention_by_bytes(tmp_path: Path) -> None:
    config = attrs.evolve(SMALL, segment_bytes=1000, retention_bytes=2500)
    log = open_log(tmp_path / "t-0", config)
    for _ in range(40):
        append(log, 1, value=b"b" * 150)
    total = log.size_bytes
    deleted = log.delete_old_segments(TS)
    assert deleted > 0
    assert 2500 <= log.size_bytes < 2500 + 1000
    assert log.size_bytes < total
    data = log.read(log.log_start_offset, 1 << 20).records
    first = next(iter(decode_batches(data)))[1][0]
    assert first.offset == log.log_start_offset
    log.close()


def test_retention_minus_one_keeps_everything(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", attrs.evolve(SMALL, segment_bytes=300))
    for _ in range(10):
        append(log, value=b"x" * 200, ts=0)
    assert log.delete_old_segments(TS * 2) == 0
    assert log.log_start_offset == 0
    log.close()


def test_compact_only_topics_skip_retention(tmp_path: Path) -> None:
    config = attrs.evolve(SMALL, segment_bytes=300, retention_ms=1, cleanup_policy="compact")
    log = open_log(tmp_path / "t-0", config)
    for _ in range(10):
        append(log, value=b"x" * 200, ts=0)
    assert log.delete_old_segments(TS) == 0
    log.close()


def test_batches_without_timestamps_fall_back_to_file_time(tmp_path: Path) -> None:
    config = attrs.evolve(SMALL, segment_ms=1000, retention_ms=DAY_MS)
    log = open_log(tmp_path / "t-0", config)
    for i in range(5):
        append(log, ts=-1, now_ms=TS + i * 100)
    assert log.num_segments == 1  # -1 timestamps do not force a roll on every append
    wall_now = time.time_ns() // 1_000_000
    assert log.delete_old_segments(wall_now) == 0  # the file was written just now
    assert log.delete_old_segments(wall_now + DAY_MS + 60_000) == 1
    log.close()
