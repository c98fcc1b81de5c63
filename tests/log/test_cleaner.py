"""The log cleaner on real segment files: latest value per key, offsets kept, tombstones, swap."""

from __future__ import annotations

import errno
from bisect import bisect_right
from pathlib import Path

import pytest

from trio_broker.broker.storage import Log, LogConfig
from trio_broker.broker.storage.cleaner_manager import CLEANER_CHECKPOINT, LogCleaner
from trio_broker.broker.storage.segment_swap import CLEANING_PREFIX, complete_swap
from trio_broker.protocol.batch import validate_batch
from trio_broker.protocol.records import build_batch, decode_batches
from trio_broker.testing.disk_faults import DiskFaults

from .log_helpers import TS, open_log

COMPACT = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=512, retention_ms=-1,
                    cleanup_policy="compact", delete_retention_ms=0,
                    min_cleanable_dirty_ratio=0.5)


def put(log: Log, items: list[tuple[bytes, bytes | None]], *, ts: int = TS) -> None:
    buf = bytearray(build_batch(items, base_timestamp_ms=ts))
    log.append(buf, validate_batch(buf, max_message_bytes=10_000_000), now_ms=ts)


def read_all(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        if not data.records:
            break
        for header, records in decode_batches(data.records):
            if not header.is_control:
                out += [(r.offset, r.key, r.value) for r in records]
            offset = header.next_offset
    return out


def cleaner_for(log: Log, tmp_path: Path) -> LogCleaner:
    return LogCleaner(lambda: [(log, tmp_path)])


def fill(log: Log, keys: int, versions: int, tombstones: int) -> dict[bytes, bytes | None]:
    latest: dict[bytes, bytes | None] = {}
    for version in range(versions):
        for start in range(0, keys, 50):
            items = [(b"k%05d" % k, b"v%d-%05d" % (version, k))
                     for k in range(start, min(keys, start + 50))]
            put(log, items)  # type: ignore[arg-type]
            latest.update(items)
    for start in range(0, tombstones, 50):
        items = [(b"k%05d" % k, None) for k in range(start, min(tombstones, start + 50))]
        put(log, items)
        latest.update(items)
    # fill more than a segment after them, so every update above is in an inactive segment
    for start in range(0, 400, 50):
        items = [(b"filler%03d" % k, b"f" * 64) for k in range(start, start + 50)]
        put(log, items)  # type: ignore[arg-type]
        latest.update(items)
    return latest


def test_compaction_keeps_latest_value_per_key_in_offset_order(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", COMPACT)
    latest = fill(log, 10_000, 3, 1000)  # the figures: 3 versions, 1,000 tombstones
    end = log.log_end_offset
    before = log.size_bytes
    cleaner = cleaner_for(log, tmp_path)
    stats = cleaner.compact([(log, tmp_path)], TS)
    assert stats.records_removed > 0
    records = read_all(log)
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets))
    assert log.log_end_offset == end
    assert log.log_start_offset == 0
    seen: dict[bytes, bytes | None] = {}
    for _o, key, value in records:
        assert key is not None
        seen[key] = value
    # inactive segments hold one record per key; the active one may still repeat
    assert all(seen[k] == v for k, v in latest.items() if k in seen)
    assert set(seen) >= {k for k, v in latest.items() if v is not None}
    after_first = log.size_bytes
    print(f"\npartition bytes: {before} before, {after_first} after the first cleaning")
    assert after_first < before / 2
    # tombstones (delete.retention.ms=0) go on the next cleaning of the now clean segments
    cleaner.compact([(log, tmp_path)], TS + 10_000_000)
    records = read_all(log)
    assert not any(v is None for _o, _k, v in records if _o < log.segment_base_offsets()[-1])
    assert {k: v for _o, k, v in records} == {k: v for k, v in latest.items() if v is not None}
    print(f"partition bytes after tombstone removal: {log.size_bytes}")
    assert (tmp_path / CLEANER_CHECKPOINT).read_text().split("\n")[2].startswith("t 0 ")
    log.close()
    # offsets, values and gaps survive a reload (unclean: full recovery)
    reopened = open_log(tmp_path / "t-0", COMPACT)
    assert read_all(reopened) == records
    reopened.close()


def test_tombstones_stay_for_delete_retention_ms(tmp_path: Path) -> None:
    config = LogConfig(**{**_fields(COMPACT), "delete_retention_ms": 3_600_000})
    log = open_log(tmp_path / "t-0", config)
    fill(log, 200, 2, 50)
    cleaner = cleaner_for(log, tmp_path)
    cleaner.compact([(log, tmp_path)], TS)
    cleaner.compact([(log, tmp_path)], TS + 1000)  # within delete.retention.ms of cleaning
    assert sum(1 for _o, _k, v in read_all(log) if v is None) == 50
    log.close()


def test_interrupted_cleaning_is_dropped_and_a_committed_swap_completed(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", COMPACT)
    fill(log, 500, 3, 0)
    before = read_all(log)
    segments = log.segment_base_offsets()
    log.close()
    (tmp_path / "t-0" / f"{CLEANING_PREFIX}{0:020d}").mkdir()
    (tmp_path / "t-0" / f"{CLEANING_PREFIX}{0:020d}" / f"{0:020d}.log").write_bytes(b"junk")
    log = open_log(tmp_path / "t-0", COMPACT)
    assert read_all(log) == before
    assert log.segment_base_offsets() == segments
    log.close()


def test_swap_completion_is_idempotent(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", COMPACT)
    latest = fill(log, 500, 3, 0)
    cleaner = cleaner_for(log, tmp_path)
    with DiskFaults() as faults:  # the swap stops after the segments, before the time index
        faults.add("replace", path=r"/t-0/\d+\.timeindex$", error=errno.EIO)
        with pytest.raises(OSError, match="Input/output error"):
            cleaner.compact([(log, tmp_path)], TS)
    log.close()
    swaps = [p for p in (tmp_path / "t-0").iterdir() if p.name.startswith(".swap-")]
    assert len(swaps) == 1
    log = open_log(tmp_path / "t-0", COMPACT)
    assert not [p for p in (tmp_path / "t-0").iterdir() if p.name.startswith(".swap-")]
    seen = {k: v for _o, k, v in read_all(log)}
    assert {k: seen[k] for k in latest} == latest
    log.close()
    assert complete_swap  # imported for recovery's use


def _fields(config: LogConfig) -> dict[str, object]:
    import attrs
    return {f.name: getattr(config, f.name) for f in attrs.fields(LogConfig)}


def _txn_put(log: Log, pid: int, seq: int, items: list[tuple[bytes, bytes | None]]) -> None:
    buf = bytearray(build_batch(items, base_timestamp_ms=TS, producer_id=pid, producer_epoch=0,
                                base_sequence=seq, is_transactional=True))
    log.append(buf, validate_batch(buf, max_message_bytes=10_000_000), now_ms=TS)


def _batches_of(log: Log) -> list[tuple[int, bool, int]]:
    """(base offset, is control, records) of every batch, reading the whole log."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        if not data.records:
            break
        for header, records in decode_batches(data.records):
            out.append((header.base_offset, header.is_control, len(records)))
            offset = header.next_offset
    return out


def test_aborted_records_go_and_markers_follow_their_data(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", COMPACT)
    put(log, [(b"a", b"committed-1"), (b"b", b"plain")])
    _txn_put(log, 7, 0, [(b"a", b"aborted"), (b"c", b"aborted")])
    log.append_marker(7, 0, committed=False, coordinator_epoch=0, now_ms=TS)
    _txn_put(log, 8, 0, [(b"b", b"committed-2")])
    log.append_marker(8, 0, committed=True, coordinator_epoch=0, now_ms=TS)
    _txn_put(log, 8, 1, [(b"d", b"txn-d")])  # kept: its transaction's marker follows
    log.append_marker(8, 0, committed=True, coordinator_epoch=0, now_ms=TS)
    put(log, [(b"x", b"y")])
    for start in range(0, 400, 50):
        put(log, [(b"filler%03d" % k, b"f" * 64) for k in range(start, start + 50)])
    cleaner = cleaner_for(log, tmp_path)
    cleaner.compact([(log, tmp_path)], TS)
    state = {k: v for _o, k, v in read_all(log) if not k.startswith(b"filler")}
    # the aborted value of "a" did not replace the committed one; "c" never existed
    assert state == {b"a": b"committed-1", b"b": b"committed-2", b"d": b"txn-d", b"x": b"y"}
    # a second cleaning past delete.retention.ms (0 here): the abort marker (offset 4) has no
    # data left, so it goes; pid 7's aborted batch stays empty (its producer's newest batch);
    # the commit markers stay, their transactions kept data
    cleaner.compact([(log, tmp_path)], TS + 10_000)
    head = [b for b in _batches_of(log) if b[0] < 10]
    assert head == [(0, False, 1), (2, False, 0), (5, False, 1), (6, True, 1), (7, False, 1),
                    (8, True, 1), (9, False, 1)]
    log.close()
    reopened = open_log(tmp_path / "t-0", COMPACT)
    assert {k: v for _o, k, v in read_all(reopened) if not k.startswith(b"filler")} == state
    reopened.close()


def test_the_offset_map_holds_digests_of_long_keys(tmp_path: Path) -> None:
    """200-byte keys: compaction is exact, and the map's memory does not grow with the keys
    (each entry holds a 16-byte digest, as Kafka's SkimpyOffsetMap does)."""
    import tracemalloc

    from trio_broker.broker.storage.cleaner import (
        CleanerStats,
        Throttler,
        build_offset_map,
        map_key,
    )

    config = LogConfig(**{**_fields(COMPACT), "segment_bytes": 256 * 1024})
    log = open_log(tmp_path / "t-0", config)
    keys = [b"%05d" % k + b"x" * 195 for k in range(5000)] + [b"short%d" % k for k in range(50)]
    latest: dict[bytes, bytes | None] = {}
    for version in range(2):
        for start in range(0, len(keys), 50):
            items = [(k, b"v%d" % version) for k in keys[start:start + 50]]
            put(log, items)  # type: ignore[arg-type]
            latest.update(items)
    for start in range(0, 400, 50):  # roll: every update above is in an inactive segment
        items = [(b"filler%03d" % k, b"f" * 1024) for k in range(start, start + 50)]
        put(log, items)  # type: ignore[arg-type]
        latest.update(items)
    segments, *_ = log.cleaner_view()
    end = log.segment_base_offsets()[-1]
    tracemalloc.start()
    offsets, covered = build_offset_map(segments, 0, end, 10**6, Throttler(float("inf")),
                                        CleanerStats())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert covered == end
    assert set(offsets) >= {map_key(k) for k in keys}
    assert max(map(len, offsets)) == 16
    per_entry = peak / len(offsets)
    print(f"\noffset map: {len(offsets)} entries of 200-byte keys, peak {peak} bytes "
          f"({per_entry:.0f} per entry)")
    assert per_entry < 200  # whole keys would take more than 200 bytes each
    cleaner_for(log, tmp_path).compact([(log, tmp_path)], TS)
    assert {k: v for _o, k, v in read_all(log)} == latest
    log.close()


def test_the_io_limit_holds_the_cleaners_rate(tmp_path: Path) -> None:
    """log.cleaner.io.max.bytes.per.second: bytes read and written over the cleaning's time
    stay at the limit (a slower machine only lowers the rate)."""
    import time

    log = open_log(tmp_path / "t-0", COMPACT)
    fill(log, 2000, 3, 0)
    limit = 250_000
    cleaner = LogCleaner(lambda: [(log, tmp_path)], io_max_bytes_per_second=limit)
    started = time.monotonic()
    stats = cleaner.compact([(log, tmp_path)], TS)
    elapsed = time.monotonic() - started
    moved = stats.bytes_read + stats.bytes_written
    print(f"\ncleaner I/O: {moved} bytes in {elapsed:.2f} s = {moved / elapsed:.0f} B/s "
          f"(limit {limit})")
    assert moved > limit  # long enough to be throttled for a second or more
    assert moved / elapsed <= limit * 1.02
    log.close()


def test_the_io_limit_changes_during_a_cleaning(tmp_path: Path) -> None:
    """A rate raised while a cleaning is throttled (a dynamic config) applies at once."""
    import threading
    import time

    log = open_log(tmp_path / "t-0", COMPACT)
    fill(log, 2000, 3, 0)
    cleaner = LogCleaner(lambda: [(log, tmp_path)], io_max_bytes_per_second=20_000)
    worker = threading.Thread(target=cleaner.compact, args=([(log, tmp_path)], TS))
    started = time.monotonic()
    worker.start()  # about 20 s at this rate
    time.sleep(0.5)
    assert worker.is_alive()
    cleaner.reconfigure(dedupe_buffer_size=1 << 20, threads=1,
                        io_max_bytes_per_second=float("inf"), backoff_ms=100)
    worker.join(15)
    assert not worker.is_alive()
    print(f"\ncleaning done {time.monotonic() - started:.2f} s after its start")
    assert time.monotonic() - started < 10
    assert cleaner.capacity == int((1 << 20) / 24 * 0.9)
    log.close()


def _tombstone_batches(log: Log) -> list[tuple[int, int, list[int]]]:
    """(attributes, base timestamp, record timestamps) of each batch holding a tombstone."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        if not data.records:
            break
        for header, records in decode_batches(data.records):
            if any(r.value is None for r in records):
                out.append((header.attributes, header.base_timestamp,
                            [r.timestamp for r in records]))
            offset = header.next_offset
    return out


def test_each_tombstone_batch_carries_its_own_delete_horizon(tmp_path: Path) -> None:
    """KIP-534: the first cleaning sets the batch's delete horizon (attribute bit 6, base
    timestamp = cleaning time + delete.retention.ms, record timestamps unchanged); tombstones
    cleaned later keep theirs longer, even once merged into one segment with earlier ones."""
    from trio_broker.broker.storage.cleaner import DELETE_HORIZON_BIT

    retention = 3_600_000
    config = LogConfig(**{**_fields(COMPACT), "delete_retention_ms": retention})
    log = open_log(tmp_path / "t-0", config)
    cleaner = cleaner_for(log, tmp_path)

    def roll() -> None:
        for start in range(0, 400, 50):
            put(log, [(b"filler%03d" % k, b"f" * 64) for k in range(start, start + 50)])

    put(log, [(b"a%d" % k, b"v") for k in range(10)])
    put(log, [(b"a%d" % k, None) for k in range(10)], ts=TS + 5)
    roll()
    first = TS + 1000
    cleaner.compact([(log, tmp_path)], first)
    [(attributes, base, stamps)] = _tombstone_batches(log)
    assert attributes & DELETE_HORIZON_BIT
    assert base == first + retention
    assert stamps == [TS + 5] * 10  # the records' own timestamps stay
    put(log, [(b"b%d" % k, None) for k in range(10)], ts=TS + 7)
    roll()
    second = first + retention // 2
    cleaner.compact([(log, tmp_path)], second)
    assert [(a & DELETE_HORIZON_BIT, b) for a, b, _ in _tombstone_batches(log)] == [
        (DELETE_HORIZON_BIT, first + retention), (DELETE_HORIZON_BIT, second + retention)]
    cleaner.compact([(log, tmp_path)], second)  # merges the segments the last one shrank
    bases = log.segment_base_offsets()
    assert bisect_right(bases, 10) == bisect_right(bases, 420)  # both batches in one segment
    assert [b for _a, b, _ in _tombstone_batches(log)] == [first + retention, second + retention]
    cleaner.compact([(log, tmp_path)], first + retention)  # the first horizon has passed
    keys = {k for _o, k, v in read_all(log) if v is None}
    assert keys == {b"b%d" % k for k in range(10)}
    cleaner.compact([(log, tmp_path)], second + retention)
    assert not any(v is None for _o, _k, v in read_all(log))
    log.close()


def test_a_marker_without_data_gets_a_delete_horizon(tmp_path: Path) -> None:
    from trio_broker.broker.storage.cleaner import DELETE_HORIZON_BIT

    config = LogConfig(**{**_fields(COMPACT), "delete_retention_ms": 60_000})
    log = open_log(tmp_path / "t-0", config)
    _txn_put(log, 7, 0, [(b"a", b"aborted")])
    log.append_marker(7, 0, committed=False, coordinator_epoch=0, now_ms=TS)
    put(log, [(b"x", b"y")])
    for start in range(0, 400, 50):
        put(log, [(b"filler%03d" % k, b"f" * 64) for k in range(start, start + 50)])
    cleaner = cleaner_for(log, tmp_path)
    cleaner.compact([(log, tmp_path)], TS)

    def marker() -> tuple[int, int] | None:
        data = log.read(0, 1 << 20)
        for header, _records in decode_batches(data.records):
            if header.is_control:
                return header.attributes & DELETE_HORIZON_BIT, header.base_timestamp
        return None

    assert marker() == (DELETE_HORIZON_BIT, TS + 60_000)
    cleaner.compact([(log, tmp_path)], TS + 59_999)
    assert marker() == (DELETE_HORIZON_BIT, TS + 60_000)
    log.close()


def test_the_cleaner_comes_back_for_tombstones_past_their_horizon(tmp_path: Path) -> None:
    """Nothing dirty, no dirty ratio to pass: the background cleaner (``clean_once``) still
    cleans a log once the earliest delete horizon its last cleaning kept has passed."""
    config = LogConfig(**{**_fields(COMPACT), "delete_retention_ms": 60_000})
    log = open_log(tmp_path / "t-0", config)
    fill(log, 200, 2, 50)
    put(log, [(b"mixed-value", b"v"), (b"mixed-tombstone", None)])  # keeps its flag after
    for start in range(0, 400, 50):
        put(log, [(b"filler%03d" % k, b"f" * 64) for k in range(start, start + 50)])
    cleaner = cleaner_for(log, tmp_path)
    stats = cleaner.clean_once(TS)
    assert stats is not None
    assert stats.earliest_horizon == TS + 60_000
    assert sum(1 for _o, _k, v in read_all(log) if v is None) == 51
    assert cleaner.clean_once(TS + 59_999) is None  # nothing dirty, no horizon passed
    stats = cleaner.clean_once(TS + 60_000)
    assert stats is not None
    assert stats.earliest_horizon is None
    assert not any(v is None for _o, _k, v in read_all(log))
    assert (b"mixed-value", b"v") in [(k, v) for _o, k, v in read_all(log)]
    assert cleaner.clean_once(TS + 120_000) is None  # the flagged batch left calls no cleaning
    log.close()
