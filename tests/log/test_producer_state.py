import time
from pathlib import Path

import attrs
import pytest

from tests.log.log_helpers import SMALL, TS, append, make_batch, open_log
from trio_broker.broker.storage import (
    InvalidProducerEpochError,
    LogManager,
    OutOfOrderSequenceError,
    ProducerIdManager,
)
from trio_broker.broker.storage.producer_state import NUM_BATCHES_TO_RETAIN
from trio_broker.protocol.batch import validate_batch
from trio_broker.protocol.errors import InvalidRecordError
from trio_broker.protocol.records import build_batch

PID = 4242


def _send(log, seq: int, count: int = 2, *, epoch: int = 0, pid: int = PID, now_ms: int = TS):  # type: ignore[no-untyped-def]
    return append(log, count, pid=pid, epoch=epoch, seq=seq, now_ms=now_ms)


def test_duplicate_returns_original_offsets_without_appending(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    first = _send(log, 0)
    second = _send(log, 2)
    end = log.log_end_offset
    retry = _send(log, 0)
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert retry.size == 0
    assert log.log_end_offset == end
    assert _send(log, 2).first_offset == second.first_offset
    log.close()


def test_only_the_last_five_batches_are_retained(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(NUM_BATCHES_TO_RETAIN + 1):
        _send(log, 2 * i)
    # The oldest batch fell out of the window: its retry is now out of order, not a duplicate.
    with pytest.raises(OutOfOrderSequenceError):
        _send(log, 0)
    assert _send(log, 2).duplicate
    log.close()


def test_out_of_order_sequence(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _send(log, 0)
    with pytest.raises(OutOfOrderSequenceError, match="expected sequence 2, got 3"):
        _send(log, 3)
    with pytest.raises(OutOfOrderSequenceError):
        _send(log, 1)  # overlaps but is not a retained batch
    assert log.log_end_offset == 2
    assert not _send(log, 2).duplicate
    log.close()


def test_unknown_producer_accepts_any_sequence(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert not _send(log, 77).duplicate
    assert not _send(log, 79).duplicate
    log.close()


def test_epoch_fencing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _send(log, 0, epoch=1)
    with pytest.raises(InvalidProducerEpochError, match="epoch 0, older than the current epoch 1"):
        _send(log, 2, epoch=0)
    with pytest.raises(OutOfOrderSequenceError, match="new epoch starts at 0"):
        _send(log, 5, epoch=2)
    _send(log, 0, epoch=2)  # a bumped epoch restarts at sequence 0
    with pytest.raises(InvalidProducerEpochError):
        _send(log, 2, epoch=1)
    log.close()


def test_sequence_wraps_around(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _send(log, 2**31 - 2, count=2)  # last sequence 2**31 - 1
    assert not _send(log, 0).duplicate
    log.close()


def test_producer_id_without_sequence_is_invalid(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    buf = bytearray(build_batch([(None, b"v")], producer_id=PID, producer_epoch=0))
    header = validate_batch(
        build_batch([(None, b"v")], producer_id=PID, producer_epoch=0, base_sequence=0),
        max_message_bytes=1000,
    )
    header = header._replace(base_sequence=-1)
    with pytest.raises(InvalidRecordError):
        log.append(buf, header, now_ms=TS)
    log.close()


def test_duplicate_under_log_append_time_reports_original_time(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", attrs.evolve(SMALL, message_timestamp_type="LogAppendTime"))
    first = _send(log, 0, now_ms=TS + 1)
    retry = _send(log, 0, now_ms=TS + 99)
    assert retry.duplicate
    assert retry.log_append_time_ms == first.log_append_time_ms == TS + 1
    log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_duplicate_detected_after_restart(tmp_path: Path, clean: bool) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, attrs.evolve(SMALL, segment_bytes=600))
    infos = [_send(log, 2 * i, count=2) for i in range(20)]  # several segments, several rolls
    append(log, 3)  # a non-idempotent batch in between
    if clean:
        log.close()
    else:
        for f in path.glob("*.snapshot"):  # an unclean stop may predate any snapshot
            f.unlink()
    reopened = open_log(path, attrs.evolve(SMALL, segment_bytes=600), clean_shutdown=clean)
    retry = _send(reopened, 38)
    assert retry.duplicate
    original = infos[-1]
    assert (retry.first_offset, retry.last_offset) == (original.first_offset, original.last_offset)
    with pytest.raises(OutOfOrderSequenceError):
        _send(reopened, 41)
    assert not _send(reopened, 40).duplicate
    reopened.close()
    if not clean:
        log.close(flush=False)


def test_snapshot_written_on_close_and_used_on_load(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    _send(log, 0)
    log.close()
    snapshots = sorted(p.name for p in path.glob("*.snapshot"))
    assert snapshots[-1] == f"{2:020d}.snapshot"
    reopened = open_log(path, clean_shutdown=True)
    assert reopened.producer_state.producers[PID].last_seq == 1
    reopened.close()


def test_corrupt_snapshot_falls_back_to_the_log(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    _send(log, 0)
    _send(log, 2)
    log.close()
    snapshot = sorted(path.glob("*.snapshot"))[-1]
    data = bytearray(snapshot.read_bytes())
    data[-1] ^= 0xFF
    snapshot.write_bytes(data)
    reopened = open_log(path, clean_shutdown=True)
    assert _send(reopened, 2).duplicate
    reopened.close()


def test_snapshot_beyond_truncated_log_is_discarded(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    _send(log, 0)
    log.close()
    # Simulate a snapshot from a future that recovery cut away.
    (path / f"{99:020d}.snapshot").write_bytes(sorted(path.glob("*.snapshot"))[-1].read_bytes())
    reopened = open_log(path, clean_shutdown=False)
    assert not (path / f"{99:020d}.snapshot").exists()
    assert _send(reopened, 2).first_offset == 2
    reopened.close()


def test_producers_expire(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _send(log, 0, now_ms=TS)
    assert log.remove_expired_producers(TS + 1000) == 0
    assert log.remove_expired_producers(TS + 86_400_000) == 1
    assert not _send(log, 50).duplicate  # unknown again: any sequence is accepted
    log.close()


def test_non_idempotent_batches_skip_checks(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    buf, header = make_batch(2)
    log.append(buf, header, now_ms=TS)
    buf, header = make_batch(2)
    assert not log.append(buf, header, now_ms=TS).duplicate
    assert log.producer_state.producers == {}
    log.close()


def test_producer_ids_unique_across_restarts(tmp_path: Path) -> None:
    first = ProducerIdManager(tmp_path, block_size=10)
    ids = [first.allocate() for _ in range(15)]
    # A crash: the second run must not reuse anything the first one could have handed out.
    second = ProducerIdManager(tmp_path, block_size=10)
    more = [second.allocate() for _ in range(25)]
    third = ProducerIdManager(tmp_path, block_size=10)
    last = third.allocate()
    everything = ids + more + [last]
    assert len(set(everything)) == len(everything)
    assert ids == list(range(15))
    assert more[0] == 20
    assert last == 50


def test_producer_id_file_unreadable_refuses(tmp_path: Path) -> None:
    (tmp_path / "producer-id-block").write_text("{not json")
    with pytest.raises(Exception, match="refusing"):
        ProducerIdManager(tmp_path)


def test_manager_restart_keeps_idempotence(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], SMALL)
    manager.load()
    manager.create_topic("t", 1, {})
    log = manager.get_log("t", 0)
    assert log is not None
    now = time.time_ns() // 1_000_000  # the manager loads with the wall clock
    info = _send(log, 0, now_ms=now)
    manager.close()
    again = LogManager([tmp_path], SMALL)
    again.load()
    log = again.get_log("t", 0)
    assert log is not None
    retry = _send(log, 0, now_ms=now)
    assert retry.duplicate
    assert retry.first_offset == info.first_offset
    again.close()
