"""Transactions in a partition log: open transactions, markers, the last stable offset, the
aborted-transaction index, read_committed reads, and all of it across clean and unclean restarts.

Every read_committed check goes through ``visible``: the records a Kafka consumer in
read_committed mode keeps from a fetch (Kafka's ``Fetcher`` rules: skip control batches, and
skip a producer's batches from the first offset of each listed aborted transaction until its
abort marker).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.log.log_helpers import SMALL, TS, open_log
from trio_broker.broker.storage import InvalidProducerEpochError, Log, LogConfig
from trio_broker.broker.storage.errors import (
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from trio_broker.broker.storage.producer_state import snapshot_file_name
from trio_broker.broker.storage.txn_index import AbortedTxn
from trio_broker.protocol.batch import iter_batches, validate_batch
from trio_broker.protocol.control import read_marker
from trio_broker.protocol.records import build_batch, decode_batches

A, B = 7001, 7002


class Producer:
    """One transactional producer's sequences, as a client keeps them per partition."""

    def __init__(self, pid: int, epoch: int = 0) -> None:
        self.pid = pid
        self.epoch = epoch
        self.seq = 0

    def send(self, log: Log, *values: bytes, transactional: bool = True) -> int:
        raw = build_batch([(None, v) for v in values], base_timestamp_ms=TS,
                          producer_id=self.pid, producer_epoch=self.epoch, base_sequence=self.seq,
                          is_transactional=transactional)
        self.seq += len(values)
        buf = bytearray(raw)
        return log.append(buf, validate_batch(buf, max_message_bytes=1 << 20),
                          now_ms=TS).first_offset

    def end(self, log: Log, *, commit: bool, epoch: int | None = None,
            coordinator_epoch: int = 0) -> int:
        return log.append_marker(self.pid, self.epoch if epoch is None else epoch,
                                 committed=commit, coordinator_epoch=coordinator_epoch,
                                 now_ms=TS).first_offset


def visible(log: Log, start: int = 0, max_bytes: int = 1 << 20) -> list[bytes]:
    """Values a read_committed consumer keeps, fetching from ``start`` until the LSO."""
    out: list[bytes] = []
    offset = start
    while True:
        data = log.read(offset, max_bytes, committed=True)
        if not data.records:
            return out
        assert data.aborted_transactions is not None
        aborted = sorted(data.aborted_transactions, key=lambda t: t.first_offset)
        skipping: set[int] = set()
        for header, records in decode_batches(data.records):
            while aborted and aborted[0].first_offset <= header.last_offset:
                skipping.add(aborted.pop(0).producer_id)
            if header.is_control:
                if header.producer_id in skipping:
                    skipping.discard(header.producer_id)
            elif not (header.is_transactional and header.producer_id in skipping):
                out.extend(r.value for r in records if r.offset >= offset)
            offset = header.next_offset
        assert offset <= data.last_stable_offset


def all_values(log: Log) -> list[bytes]:
    data = log.read(0, 1 << 20)
    return [r.value for h, rs in decode_batches(data.records) if not h.is_control for r in rs]


def test_lso_stops_at_the_oldest_open_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a, b = Producer(A), Producer(B)
    Producer(9).send(log, b"plain", transactional=False)
    first_a = a.send(log, b"a1")
    b.send(log, b"b1")
    a.send(log, b"a2")
    assert log.last_stable_offset == first_a == 1
    assert log.has_ongoing_transaction(A)
    assert log.has_ongoing_transaction(B)
    assert visible(log) == [b"plain"]
    assert all_values(log) == [b"plain", b"a1", b"b1", b"a2"]
    a.end(log, commit=True)
    assert log.last_stable_offset == 2  # B's transaction is still open
    assert visible(log) == [b"plain", b"a1"]
    b.end(log, commit=False)
    assert log.last_stable_offset == log.log_end_offset
    assert visible(log) == [b"plain", b"a1", b"a2"]
    log.close()


def test_abort_is_indexed_with_the_lso_after_it(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a, b = Producer(A), Producer(B)
    first_a = a.send(log, b"a1")
    first_b = b.send(log, b"b1")
    marker_a = a.end(log, commit=False)
    marker_b = b.end(log, commit=False)
    data = log.read(0, 1 << 20, committed=True)
    assert data.aborted_transactions == [
        AbortedTxn(A, first_a, marker_a, first_b),  # B was still open when A aborted
        AbortedTxn(B, first_b, marker_b, marker_b + 1),
    ]
    assert visible(log) == []
    assert log.read(0, 1 << 20).aborted_transactions is None  # read_uncommitted: no list
    index = tmp_path / "t-0" / "00000000000000000000.txnindex"
    assert index.stat().st_size == 2 * 34
    version, pid, first, last, lso = struct.unpack(">hqqqq", index.read_bytes()[:34])
    assert (version, pid, first, last, lso) == (0, A, first_a, marker_a, first_b)
    log.close()


def test_markers_are_control_batches_with_kafkas_record(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a = Producer(A, epoch=3)
    a.send(log, b"x")
    a.end(log, commit=True, coordinator_epoch=5)
    raw = log.read(0, 1 << 20).records
    batches = list(iter_batches(raw))
    pos, header = batches[-1]
    assert header.is_control
    assert header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (A, 3, -1)
    marker = read_marker(raw, pos, header)
    assert marker is not None
    assert marker.committed
    assert marker.coordinator_epoch == 5
    # the record itself: key (version 0, type COMMIT=1), value (version 0, coordinator epoch)
    [(_, [record])] = [(h, r) for h, r in decode_batches(raw) if h.is_control]
    assert record.key == b"\x00\x00\x00\x01"
    assert record.value == b"\x00\x00\x00\x00\x00\x05"
    log.close()


def test_non_transactional_write_inside_an_open_transaction_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a = Producer(A)
    a.send(log, b"in txn")
    end = log.log_end_offset
    with pytest.raises(InvalidTxnStateError):
        a.send(log, b"outside", transactional=False)
    assert log.log_end_offset == end
    log.close()


def test_a_marker_with_a_bumped_epoch_fences_the_old_one(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    zombie = Producer(A, epoch=0)
    zombie.send(log, b"old")
    zombie.end(log, commit=False, epoch=1)  # the coordinator aborts with the fencing epoch
    assert log.last_stable_offset == log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        zombie.send(log, b"late write")
    with pytest.raises(InvalidProducerEpochError):
        zombie.end(log, commit=True)  # a marker of the old epoch
    successor = Producer(A, epoch=2)
    successor.send(log, b"new")  # a new epoch starts at sequence 0
    successor.end(log, commit=True)
    assert visible(log) == [b"new"]
    log.close()


def test_a_marker_from_an_older_coordinator_epoch_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a = Producer(A)
    a.send(log, b"x")
    a.end(log, commit=True, coordinator_epoch=4)
    a.send(log, b"y")
    with pytest.raises(TransactionCoordinatorFencedError):
        a.end(log, commit=True, coordinator_epoch=3)
    assert log.has_ongoing_transaction(A)
    log.close()


def test_sequences_continue_across_transactions_of_one_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a = Producer(A)
    for i in range(3):
        a.send(log, b"%d" % i, b"%d'" % i)
        a.end(log, commit=i != 1)
    assert visible(log) == [b"0", b"0'", b"2", b"2'"]
    log.close()


def test_a_marker_without_records_ends_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a = Producer(A)
    a.end(log, commit=False)  # the partition was added to the transaction but got no records
    assert log.read(0, 1 << 20, committed=True).aborted_transactions == []
    assert not (tmp_path / "t-0" / "00000000000000000000.txnindex").exists()
    a.send(log, b"later")
    a.end(log, commit=True)
    assert visible(log) == [b"later"]
    log.close()


def test_read_committed_never_returns_a_batch_at_or_past_the_lso(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=1 << 20, index_interval_bytes=64))
    a, b = Producer(A), Producer(B)
    for i in range(20):
        a.send(log, b"a%d" % i)
    open_at = b.send(log, b"b-open")
    for i in range(5):
        a.send(log, b"late%d" % i)
    a.end(log, commit=True)
    for max_bytes in (1, 100, 150, 1 << 20):
        for start in range(0, open_at + 1):
            data = log.read(start, max_bytes, committed=True)
            assert data.last_stable_offset == open_at
            for _, header in iter_batches(data.records):
                assert header.base_offset < open_at
    # the first batch past the LSO is never returned, even to a min_one_batch read
    assert log.read(open_at, 1 << 20, committed=True).records == b""
    assert visible(log) == [b"a%d" % i for i in range(20)]
    log.close()


def test_aborted_transactions_are_limited_to_the_fetched_range(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=1 << 20, index_interval_bytes=64))
    a = Producer(A)
    firsts = []
    for i in range(10):
        firsts.append(a.send(log, b"x%d" % i))
        a.end(log, commit=False)
    data = log.read(firsts[3], 1, committed=True)  # one batch only
    assert [t.first_offset for t in data.aborted_transactions or []] == [firsts[3]]
    data = log.read(firsts[8], 1 << 20, committed=True)
    assert [t.first_offset for t in data.aborted_transactions or []] == firsts[8:]
    log.close()


def test_aborts_spanning_segments_are_found(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", SMALL)  # 4 KiB segments
    a, b = Producer(A), Producer(B)
    first_a = a.send(log, b"a" * 100)
    for i in range(60):
        b.send(log, b"b%d" % i + b"." * 90)
        b.end(log, commit=True)
    a.end(log, commit=False)
    assert log.num_segments > 2
    data = log.read(first_a + 1, 1 << 20, committed=True)
    assert AbortedTxn(A, first_a, log.log_end_offset - 1, log.log_end_offset) in (
        data.aborted_transactions or [])
    assert b"a" * 100 not in visible(log)
    log.close()


def _three_txns(log: Log) -> list[bytes]:
    a, b = Producer(A), Producer(B)
    a.send(log, b"a-commit")
    b.send(log, b"b-abort")
    a.end(log, commit=True)
    b.end(log, commit=False)
    a.send(log, b"a-abort")
    a.end(log, commit=False)
    b.send(log, b"b-open")
    return [b"a-commit"]


@pytest.mark.parametrize("clean", [True, False])
def test_restart_keeps_open_transactions_and_the_index(tmp_path: Path, clean: bool) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    expected = _three_txns(log)
    lso, end = log.last_stable_offset, log.log_end_offset
    log.close(flush=clean)
    log = open_log(path, clean_shutdown=clean)
    assert (log.last_stable_offset, log.log_end_offset) == (lso, end)
    assert log.has_ongoing_transaction(B)
    assert not log.has_ongoing_transaction(A)
    assert visible(log) == expected
    Producer(B).end(log, commit=True)  # the open transaction can still be ended
    assert visible(log) == [*expected, b"b-open"]
    log.close()


def test_unclean_restart_rebuilds_a_lost_index_from_the_markers(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    _three_txns(log)
    before = log.read(0, 1 << 20, committed=True).aborted_transactions
    log.close(flush=False)
    (path / "00000000000000000000.txnindex").unlink()
    for snapshot in path.glob("*.snapshot"):
        snapshot.unlink()
    log = open_log(path, clean_shutdown=False)
    assert log.read(0, 1 << 20, committed=True).aborted_transactions == before
    assert len(before or []) == 2
    log.close()


def test_a_corrupt_index_after_a_clean_shutdown_is_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    _three_txns(log)
    before = log.read(0, 1 << 20, committed=True).aborted_transactions
    log.close()
    with open(path / "00000000000000000000.txnindex", "ab") as f:
        f.write(b"\x00" * 5)  # not a whole entry
    log = open_log(path, clean_shutdown=True)
    assert log.read(0, 1 << 20, committed=True).aborted_transactions == before
    assert (path / "00000000000000000000.txnindex").stat().st_size == 2 * 34
    log.close()


def test_unclean_restart_rebuilds_from_a_snapshot_before_the_recovered_segment(
        tmp_path: Path) -> None:
    """The active segment's snapshot is newer than the recovery point: the index of the
    recovered segments needs the transactions open at their start, so an older snapshot is
    used (or none)."""
    path = tmp_path / "t-0"
    log = open_log(path, SMALL)
    a, b = Producer(A), Producer(B)
    a.send(log, b"A" * 200)  # open across the rolls below
    for i in range(40):
        b.send(log, b"%d" % i + b"." * 150)
        b.end(log, commit=i % 2 == 0)
    a.end(log, commit=False)
    bases = log.segment_base_offsets()
    assert len(bases) >= 3
    before = log.read(0, 1 << 20, committed=True).aborted_transactions
    expected = visible(log)
    log.close(flush=False)
    for base in bases[1:]:
        (path / f"{base:020d}.txnindex").unlink(missing_ok=True)
    log = open_log(path, SMALL, clean_shutdown=False, recovery_point=bases[1])
    assert log.read(0, 1 << 20, committed=True).aborted_transactions == before
    assert visible(log) == expected
    log.close()


def test_version_1_snapshots_are_still_read(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    Producer(A).send(log, b"x", transactional=False)
    log.close()
    [snapshot] = sorted(path.glob("*.snapshot"))
    # rewrite it in the version-1 layout: no coordinator epoch, no open transaction
    from crc32c import crc32c
    body = struct.pack(">i", 1) + struct.pack(">qhqb", A, 0, TS, 1) + struct.pack(
        ">iiqqq", 0, 0, 0, 0, TS)
    snapshot.write_bytes(struct.pack(">4shI", b"TBPS", 1, crc32c(body)) + body)
    log = open_log(path, clean_shutdown=True)
    assert [p.producer_id for p in log.active_producers()] == [A]
    assert log.last_stable_offset == log.log_end_offset
    log.close()
    assert snapshot_file_name(log.log_end_offset) in {p.name for p in path.glob("*.snapshot")}


def test_describe_shows_the_open_transaction_and_coordinator_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a = Producer(A)
    a.send(log, b"x")
    a.end(log, commit=True, coordinator_epoch=2)
    first = a.send(log, b"y")
    [snap] = log.active_producers()
    assert (snap.coordinator_epoch, snap.current_txn_start_offset) == (2, first)
    log.close()


def test_producers_with_open_transactions_do_not_expire(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    Producer(A).send(log, b"open")
    Producer(B).send(log, b"idle", transactional=False)
    assert log.remove_expired_producers(TS + 10 * 86_400_000) == 1
    assert log.has_ongoing_transaction(A)
    log.close()
