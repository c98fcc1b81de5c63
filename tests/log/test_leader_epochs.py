"""Leader epochs: the per-partition cache (Kafka's LeaderEpochFileCache), its checkpoint file,
the epoch each start of the broker begins, and the lookups ListOffsets makes on a log."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.log.log_helpers import SMALL, TS, append, open_log
from trio_broker.broker.storage import Log, LogManager
from trio_broker.broker.storage.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    LeaderEpochCache,
)
from trio_broker.broker.storage.lookups import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    TimestampAndOffset,
)
from trio_broker.protocol.batch import iter_batches, validate_batch
from trio_broker.protocol.records import build_batch


def _cache(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path)
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


def test_assign_keeps_epochs_and_offsets_increasing(tmp_path: Path) -> None:
    cache = _cache(tmp_path, (0, 0), (1, 10), (1, 15), (3, 20))
    assert cache.entries == [(0, 0), (1, 10), (3, 20)]  # (1, 15): epoch 1 already started
    assert cache.assign(3, 20) is False
    # an epoch at an offset already taken replaces what is there, as Kafka's cache does
    cache.assign(4, 20)
    assert cache.entries == [(0, 0), (1, 10), (4, 20)]
    # a lower epoch than the latest one cuts everything from it on
    cache.assign(2, 12)
    assert cache.entries == [(0, 0), (1, 10), (2, 12)]
    with pytest.raises(ValueError, match="invalid"):
        cache.assign(-1, 0)


def test_checkpoint_file_is_kafkas_format_and_survives(tmp_path: Path) -> None:
    _cache(tmp_path, (0, 0), (2, 7))
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n0 0\n2 7\n"
    assert LeaderEpochCache(tmp_path).entries == [EpochEntry(0, 0), EpochEntry(2, 7)]
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text("7\nnonsense")
    assert LeaderEpochCache(tmp_path).entries == []  # unreadable: ignored, logged


def test_end_offset_for_follows_kafka(tmp_path: Path) -> None:
    cache = _cache(tmp_path, (1, 5), (3, 20), (6, 40))
    log_end = 55
    assert cache.end_offset_for(6, log_end) == (6, 55)  # the current epoch ends at the log end
    assert cache.end_offset_for(3, log_end) == (3, 40)
    assert cache.end_offset_for(4, log_end) == (3, 40)  # unknown epoch: the one before it
    assert cache.end_offset_for(0, log_end) == (0, 5)  # older than all: first start offset
    assert cache.end_offset_for(7, log_end) == (-1, -1)  # newer than all
    assert cache.end_offset_for(-1, log_end) == (-1, -1)
    assert LeaderEpochCache(tmp_path / "nothing").end_offset_for(0, 3) == (-1, -1)


def test_epoch_for_offset_and_truncations(tmp_path: Path) -> None:
    cache = _cache(tmp_path, (1, 5), (3, 20), (6, 40))
    assert [cache.epoch_for_offset(o) for o in (0, 5, 19, 20, 39, 40, 99)] == [
        None, 1, 1, 3, 3, 6, 6]
    cache.truncate_from_start(25)
    assert cache.entries == [(3, 25), (6, 40)]
    cache.truncate_from_end(40)
    assert cache.entries == [(3, 25)]
    assert LeaderEpochCache(tmp_path).entries == [(3, 25)]


def test_each_start_is_a_new_epoch_stamped_on_every_batch(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], SMALL)
    manager.load()
    manager.create_topic("t", 1, {})
    log = manager.get_log("t", 0)
    assert log is not None
    assert log.leader_epoch == 0
    append(log, 3)
    manager.close()

    for expected in (1, 2):  # a start without appends still moves the epoch on
        manager = LogManager([tmp_path], SMALL)
        manager.load()
        log = manager.get_log("t", 0)
        assert log is not None
        assert log.leader_epoch == expected
        manager.close()
    manager = LogManager([tmp_path], SMALL)
    manager.load()
    log = manager.get_log("t", 0)
    assert log is not None
    assert log.leader_epoch == 3
    append(log, 2)
    # epochs 1 and 2 started at offset 3 and never wrote: 3 replaced them
    assert log.epochs.entries == [(0, 0), (3, 3)]
    data = log.read(0, 1 << 20).records
    assert [h.partition_leader_epoch for _, h in iter_batches(data)] == [0, 3]
    assert log.end_offset_for_epoch(0) == (0, 3)
    assert log.end_offset_for_epoch(2) == (0, 3)
    assert log.end_offset_for_epoch(3) == (3, 5)
    manager.close()


def test_recovery_truncation_forgets_epochs_but_never_reuses_one(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], SMALL)
    manager.load()
    manager.create_topic("t", 1, {})
    log = manager.get_log("t", 0)
    assert log is not None
    append(log, 2)
    manager.close()
    manager = LogManager([tmp_path], SMALL)
    manager.load()
    log = manager.get_log("t", 0)
    assert log is not None
    append(log, 2)  # written under epoch 1, from offset 2
    assert log.epochs.entries == [(0, 0), (1, 2)]
    log.flush()
    # a crash that loses the epoch-1 batch: the tail is torn and no clean-shutdown marker
    segment = tmp_path / "t-0" / "00000000000000000000.log"
    os.truncate(segment, segment.stat().st_size - 10)
    for log in manager.all_logs():
        log.close(flush=False)
    manager = LogManager([tmp_path], SMALL)
    manager.load()
    log = manager.get_log("t", 0)
    assert log is not None
    assert log.log_end_offset == 2
    # epoch 1 is gone from the cache with its data, and the next epoch is 2, not 1 again:
    # a consumer that read epoch 1 finds where it ended, and truncates
    assert log.leader_epoch == 2
    assert log.epochs.entries == [(0, 0), (2, 2)]
    assert log.end_offset_for_epoch(1) == (0, 2)
    manager.close()


def _append_at(log: Log, timestamps: list[int], *, epoch: int | None = None) -> None:
    buf = bytearray(build_batch([(None, b"v")] * len(timestamps), timestamps=timestamps))
    log.append(buf, validate_batch(buf, max_message_bytes=10_000), now_ms=TS, leader_epoch=epoch)


def test_list_offsets_lookups(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) is None  # empty log
    log.become_leader(0)
    _append_at(log, [TS, TS + 50, TS + 7])
    log.become_leader(4)
    _append_at(log, [TS + 1, TS + 50, TS + 50])  # the same max again: the first one wins
    _append_at(log, [TS + 2])
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == TimestampAndOffset(TS + 50, 1, 0)
    # the first record in offset order whose timestamp is >= the target, as Kafka answers
    assert log.fetch_offset_by_timestamp(TS + 3) == TimestampAndOffset(TS + 50, 1, 0)
    assert log.fetch_offset_by_timestamp(TS + 1) == TimestampAndOffset(TS + 50, 1, 0)
    assert log.fetch_offset_by_timestamp(TS + 51) is None
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == TimestampAndOffset(-1, 0, 0)
    assert log.fetch_offset_by_timestamp(EARLIEST_LOCAL_TIMESTAMP) == TimestampAndOffset(-1, 0, 0)
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == TimestampAndOffset(-1, 7, 4)
    assert log.fetch_offset_by_timestamp(LATEST_TIERED_TIMESTAMP) == TimestampAndOffset(-1, -1, -1)
    log.close()


def test_max_timestamp_across_segments_and_log_append_time(tmp_path: Path) -> None:
    from trio_broker.broker.storage import LogConfig

    config = LogConfig(segment_bytes=200, index_interval_bytes=1, retention_ms=-1)
    log = open_log(tmp_path / "t-0", config)
    for i in range(10):
        _append_at(log, [TS + i, TS + 100 - i])  # the largest timestamp is in the first batch
    assert log.num_segments > 1
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == TimestampAndOffset(TS + 100, 1, -1)
    log.close()
    stamped = open_log(tmp_path / "u-0", SMALL.with_overrides(
        {"message.timestamp.type": "LogAppendTime"}))
    _append_at(stamped, [TS, TS + 5])
    found = stamped.fetch_offset_by_timestamp(MAX_TIMESTAMP)
    assert found == TimestampAndOffset(TS, 0, -1)  # every record carries the append time
    stamped.close()


def test_legacy_offsets_before(tmp_path: Path) -> None:
    from trio_broker.broker.storage import LogConfig

    config = LogConfig(segment_bytes=150, index_interval_bytes=1, retention_ms=-1)
    log = open_log(tmp_path / "t-0", config)
    for _ in range(6):
        append(log, 1)
    bases = log.segment_base_offsets()
    assert len(bases) > 2
    now = TS + 10**9
    assert log.legacy_offsets_before(LATEST_TIMESTAMP, 100, now) == [6, *reversed(bases)]
    assert log.legacy_offsets_before(LATEST_TIMESTAMP, 1, now) == [6]
    assert log.legacy_offsets_before(EARLIEST_TIMESTAMP, 5, now) == [0]
    for i, base in enumerate(bases):  # file times decide, as in Kafka
        stamp = 1_000_000 + i  # seconds
        os.utime(tmp_path / "t-0" / f"{base:020d}.log", (stamp, stamp))
    assert log.legacy_offsets_before(1_000_000_500, 100, now) == [0]
    assert log.legacy_offsets_before(1_000_001_000, 100, now) == [bases[1], 0]
    assert log.legacy_offsets_before(999_999_999, 100, now) == []
    log.close()
