"""Descriptors per partition: the log file of each segment, nothing else.

Why it matters: the process's ``nofile`` limit caps partitions. Indexes live in memory and are
written at flush, roll and close, the leader-epoch checkpoint by atomic replace, so none of them
holds a descriptor; these tests also check that what is no longer held open still reaches the
disk where recovery relies on it.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest

from tests.hostile.process_stats import fd_targets
from tests.log.log_helpers import SMALL, TS, append, open_log, read_offsets, spy_recovery
from trio_broker.broker.storage import LogManager
from trio_broker.broker.storage.index import OffsetIndex, TimeIndex


def _open_files(under: Path) -> list[str]:
    """Files under ``under`` this process holds open."""
    return [target for target in fd_targets() if target.startswith(str(under))]


def test_a_partition_holds_one_descriptor_per_segment(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], SMALL)
    manager.load()
    manager.create_topic("many", 200, {})
    logs = [manager.get_log("many", p) for p in range(200)]
    for i, log in enumerate(logs):
        assert log is not None
        for _ in range(1 + (i % 3) * 20):  # every third partition rolls a few segments
            append(log, 2, value=b"v" * 40)
        log.become_leader(1)
        log.flush()
    segments = sum(log.num_segments for log in logs if log is not None)
    assert segments > 200
    held = _open_files(tmp_path)
    assert all(name.endswith(".log") for name in held), held
    assert len(held) == segments
    manager.close()
    assert _open_files(tmp_path) == []

    again = LogManager([tmp_path], SMALL)
    again.load()
    held = _open_files(tmp_path)
    assert all(name.endswith(".log") for name in held), held
    assert len(held) == segments
    log = again.get_log("many", 2)
    assert log is not None
    assert read_offsets(log) == list(range(log.log_end_offset))
    again.close()


def test_what_a_flush_made_durable_needs_no_recovery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    for _ in range(60):
        append(log, 2, value=b"x" * 40)
    log.flush()
    flushed = log.recovery_point
    for _ in range(3):  # appended after the flush: only in the page cache
        append(log, 1)
    crashed = tmp_path / "crashed" / "t-0"
    shutil.copytree(path, crashed)  # the files as a kill -9 leaves them
    log.close()
    # every segment below the recovery point has its whole index in the file
    for index_path in sorted(crashed.glob("*.index"))[:-1]:
        rebuilt = OffsetIndex(index_path, int(index_path.stem), SMALL.segment_index_bytes,
                              create=False)
        rebuilt.load(index_path.with_suffix(".log").stat().st_size)
        assert len(rebuilt) > 0
    recovered = spy_recovery(monkeypatch)
    again = open_log(crashed, clean_shutdown=False, recovery_point=flushed)
    assert recovered == [again.segment_base_offsets()[-1]]
    assert again.log_end_offset == 123
    assert read_offsets(again) == list(range(123))
    assert again.offset_for_timestamp(TS) == (0, TS)
    again.close()


def test_index_file_written_lazily_truncates_and_reloads(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100, 1024)
    assert path.exists()
    assert path.stat().st_size == 0
    for i in range(5):
        index.append(100 + 10 * i, 64 * i)
    assert index.pending == 5
    index.write_pending()
    assert path.stat().st_size == 40
    index.truncate_entries(3)  # a failed append rolled back after the entries were written
    assert path.stat().st_size == 24
    index.append(130, 200)
    index.truncate_entries(4)  # one in memory only: the file is already right
    index.append(140, 300)
    index.close()
    again = OffsetIndex(path, 100, 1024, create=False)
    again.load(1000)
    assert list(again.relative_offsets) == [0, 10, 20, 30, 40]
    assert list(again.positions) == [0, 64, 128, 200, 300]

    times = TimeIndex(tmp_path / "00000000000000000100.timeindex", 100, 1024)
    assert times.maybe_append(TS, 100)
    assert not times.maybe_append(TS, 110)
    times.maybe_append(TS + 5, 120)
    fd = times.open_written()  # what a flush fsyncs
    os.close(fd)
    loaded = TimeIndex(times.path, 100, 1024, create=False)
    loaded.load()
    assert list(loaded.timestamps) == [TS, TS + 5]


def test_a_retained_or_cleaned_segment_is_closed_without_writing(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    for _ in range(60):
        append(log, 2, value=b"x" * 40)
    bases = log.segment_base_offsets()
    assert len(bases) > 2
    old = sorted(path.glob("*.timeindex"))[0]
    content = old.read_bytes()
    assert content  # rolled: its entries are in the file
    log.advance_log_start_offset(bases[2])
    assert log.delete_old_segments(TS) == 2
    assert not old.exists()
    assert _open_files(tmp_path) == [str(path / f"{b:020d}.log") for b in bases[2:]]
    log.close()


def test_index_files_hold_the_big_endian_entries_kafka_writes(tmp_path: Path) -> None:
    """The entries written in one go (at flush, roll or close) are byte for byte Kafka's
    formats: 4-byte relative offset and position; 8-byte timestamp and 4-byte offset."""
    offsets = OffsetIndex(tmp_path / "00000000000000001000.index", 1000, 1 << 20)
    times = TimeIndex(tmp_path / "00000000000000001000.timeindex", 1000, 1 << 20)
    entries = [(1000 + 3 * i, 4096 * i + 7, 1_700_000_000_000 + 2**33 + 5 * i) for i in range(999)]
    for offset, position, timestamp in entries:
        offsets.append(offset, position)
        assert times.maybe_append(timestamp, offset)
    offsets.write_pending()
    times.write_pending()
    assert offsets.path.read_bytes() == b"".join(
        struct.pack(">ii", o - 1000, p) for o, p, _ in entries)
    assert times.path.read_bytes() == b"".join(
        struct.pack(">qi", t, o - 1000) for o, _, t in entries)
    offsets.append(1000 + 3 * 999, 4096 * 999 + 7)  # only what is new is written next time
    offsets.write_pending()
    assert offsets.path.read_bytes()[-8:] == struct.pack(">ii", 3 * 999, 4096 * 999 + 7)
    assert len(offsets.path.read_bytes()) == 8 * 1000
