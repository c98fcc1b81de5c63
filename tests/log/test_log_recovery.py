import logging
import random
from pathlib import Path

import pytest

from tests.log.log_helpers import SMALL, append, make_batch, open_log, read_offsets, spy_recovery
from trio_broker.broker.storage import LogManager
from trio_broker.broker.storage.segment import LogSegment
from trio_broker.protocol.batch import read_batch_header
from trio_broker.protocol.errors import CorruptRecordError


def _fill(path: Path, batches: int = 60) -> list[int]:
    log = open_log(path)
    ends = [append(log, 2, value=b"x" * 40).last_offset for _ in range(batches)]
    log.close()
    return ends


def _active_segment(path: Path) -> Path:
    return sorted(path.glob("*.log"))[-1]


def test_clean_restart_trusts_indexes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t-0"
    _fill(path)

    def no_recovery(self: LogSegment, *, verify: bool = True) -> tuple[int, str | None]:
        raise AssertionError(f"{self} was recovered after a clean shutdown")

    monkeypatch.setattr(LogSegment, "recover", no_recovery)
    log = open_log(path, clean_shutdown=True)
    assert log.log_end_offset == 120
    assert log.recovery_point == 120
    assert read_offsets(log) == list(range(120))
    log.close()


@pytest.mark.parametrize("damage", ["torn", "garbage", "zeros"])
def test_unclean_restart_truncates_to_last_whole_batch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    path = tmp_path / "t-0"
    _fill(path)
    active = _active_segment(path)
    size_before = active.stat().st_size
    extra, _ = make_batch(3, value=b"y" * 100)
    tail = {
        "torn": bytes(extra[: len(extra) // 2]),
        "garbage": random.Random(62).randbytes(333),  # fixed seed: replayable
        "zeros": bytes(4096),
    }[damage]
    with open(active, "ab") as f:
        f.write(tail)
    caplog.set_level(logging.WARNING, logger="trio_broker.broker.storage")
    log = open_log(path, clean_shutdown=False)
    assert log.log_end_offset == 120
    assert active.stat().st_size == size_before
    [warning] = [r for r in caplog.records if "Truncated" in r.getMessage()]
    message = warning.getMessage()
    assert f"Truncated {len(tail)} bytes" in message
    assert active.name in message
    assert "kept offsets" in message
    # The log carries on from the last whole batch.
    assert append(log, 1).first_offset == 120
    assert read_offsets(log) == list(range(121))
    log.close()


def test_garbage_after_a_clean_shutdown_is_still_truncated(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "t-0"
    _fill(path)
    with open(_active_segment(path), "ab") as f:
        f.write(b"\xff" * 100)
    caplog.set_level(logging.WARNING, logger="trio_broker.broker.storage")
    log = open_log(path, clean_shutdown=True)
    assert log.log_end_offset == 120
    assert any("Truncated 100 bytes" in r.getMessage() for r in caplog.records)
    assert append(log).first_offset == 120
    log.close()


def test_torn_old_segment_below_the_recovery_point_is_refused_not_truncated(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t-0"
    _fill(path)
    first_log, first_index = sorted(path.glob("*.log"))[0], sorted(path.glob("*.index"))[0]
    first_index.write_bytes(b"\x00" * 7)  # odd size: rebuilt, which re-reads the segment
    data = first_log.read_bytes()
    first_log.write_bytes(data[:-10])  # and the segment's last batch is torn
    before = {p.name: p.stat().st_size for p in path.glob("*.log")}
    # Flushed, acknowledged data follows in later segments: the log refuses to open (its
    # partition goes offline) rather than delete them.
    with pytest.raises(CorruptRecordError, match="below the recovery point"):
        open_log(path, clean_shutdown=True)
    assert {p.name: p.stat().st_size for p in path.glob("*.log")} == before


def test_corrupt_batch_mid_log_truncates_there_and_drops_later_segments(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "t-0"
    _fill(path)
    segments = sorted(path.glob("*.log"))
    assert len(segments) >= 3
    victim = segments[1]
    data = bytearray(victim.read_bytes())
    first = read_batch_header(data)
    second_pos = first.size
    data[second_pos + 70] ^= 0xFF  # inside the second batch's records: CRC mismatch
    victim.write_bytes(data)
    caplog.set_level(logging.WARNING, logger="trio_broker.broker.storage")
    log = open_log(path, clean_shutdown=False)
    assert log.log_end_offset == first.next_offset
    assert log.segment_base_offsets() == [0, first.base_offset]
    messages = "\n".join(r.getMessage() for r in caplog.records)
    assert "CRC mismatch" in messages
    assert "follows corrupt data" in messages
    assert read_offsets(log) == list(range(first.next_offset))
    log.close()


def test_unclean_restart_only_rechecks_after_recovery_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t-0"
    _fill(path)
    probe = open_log(path, clean_shutdown=True)
    bases = probe.segment_base_offsets()
    probe.close()
    recovered = spy_recovery(monkeypatch)
    log = open_log(path, clean_shutdown=False, recovery_point=bases[-2] + 1)
    assert recovered == bases[-2:]
    assert log.log_end_offset == 120
    log.close()


@pytest.mark.parametrize("damage", ["odd-size", "beyond-log", "not-increasing"])
def test_corrupt_index_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    path = tmp_path / "t-0"
    _fill(path)
    index = sorted(path.glob("*.index"))[0]
    good = index.read_bytes()
    assert good
    assert len(good) % 8 == 0
    if damage == "odd-size":
        index.write_bytes(good + b"\x01\x02\x03")
    elif damage == "beyond-log":
        index.write_bytes(good + (10_000).to_bytes(4, "big") + (99_999_999).to_bytes(4, "big"))
    else:
        index.write_bytes(good[8:16] + good[:8] + good[16:])
    caplog.set_level(logging.WARNING, logger="trio_broker.broker.storage")
    log = open_log(path, clean_shutdown=True)
    assert any("Rebuilding the indexes" in r.getMessage() for r in caplog.records)
    assert index.read_bytes() == good
    assert read_offsets(log) == list(range(120))
    log.close()


def test_missing_index_files_are_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    _fill(path)
    for index in path.glob("*index"):
        index.unlink()
    log = open_log(path, clean_shutdown=False)
    assert read_offsets(log) == list(range(120))
    assert log.offset_for_timestamp(0) == (0, 1_700_000_000_000)
    log.close()


def test_manager_marker_lifecycle_and_unclean_restart(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], SMALL)
    manager.load()
    manager.create_topic("t", 1, {})
    log = manager.get_log("t", 0)
    assert log is not None
    for _ in range(10):
        append(log, 2)
    manager.close()
    assert (tmp_path / ".clean_shutdown").exists()

    again = LogManager([tmp_path], SMALL)
    again.load()
    assert not (tmp_path / ".clean_shutdown").exists()  # a crash from now on is unclean
    log = again.get_log("t", 0)
    assert log is not None
    assert log.log_end_offset == 20
    append(log, 1)
    # "kill -9": no close. The data is in the page cache, so nothing is lost.
    third = LogManager([tmp_path], SMALL)
    third.load()
    log3 = third.get_log("t", 0)
    assert log3 is not None
    assert log3.log_end_offset == 21
    third.close()
