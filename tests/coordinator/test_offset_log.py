"""The commit log file on its own: format, torn tails, compaction (plain synchronous code)."""

from __future__ import annotations

import pytest

from trio_broker.broker.coordinator.offset_log import (
    FILE_NAME,
    MAGIC,
    TMP_NAME,
    OffsetAndMetadata,
    OffsetLog,
    OffsetLogError,
    encode_record,
    replay,
)


def _om(offset: int, metadata: str | None = "") -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, metadata, 1_700_000_000_000 + offset, -1)


def test_round_trip_with_tombstones_and_group_delete(tmp_path):
    log = OffsetLog(tmp_path)
    assert log.open() == {}
    log.append([encode_record("g", [(("t", 0), _om(1, "é")), (("t", 1), _om(2, None))]),
                encode_record("h", [(("u", 3), _om(3))])])
    log.append([encode_record("g", [(("t", 0), None)])])
    log.append([encode_record("h", [], kind=1)])
    log.close()
    state = OffsetLog(tmp_path).open()
    assert state == {"g": {("t", 1): _om(2, None)}}


def test_every_cut_of_the_last_record_is_recovered(tmp_path):
    first = encode_record("g", [(("t", 0), _om(5))])
    second = encode_record("g", [(("t", 0), _om(6)), (("t", 1), _om(7, "meta"))])
    whole = MAGIC + first + second
    for cut in range(len(MAGIC) + len(first), len(whole)):
        path = tmp_path / FILE_NAME
        path.write_bytes(whole[:cut])
        log = OffsetLog(tmp_path)
        assert log.open() == {"g": {("t", 0): _om(5)}}, cut
        log.close()
        assert path.stat().st_size == len(MAGIC) + len(first)
    path.write_bytes(whole)
    assert OffsetLog(tmp_path).open()["g"][("t", 1)] == _om(7, "meta")


def test_new_file_cut_anywhere_in_its_header_opens_empty(tmp_path):
    """A new file's header is written without an fsync (the broker starts without waiting on
    the disk): a crash may leave it missing or shorter than its header, which opens as new."""
    record = encode_record("g", [(("t", 0), _om(5))])
    path = tmp_path / FILE_NAME
    for cut in [None, *range(len(MAGIC))]:
        if cut is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(MAGIC[:cut])
        log = OffsetLog(tmp_path)
        assert log.open() == {}, cut
        log.append([record])
        log.close()
        assert path.read_bytes() == MAGIC + record
        assert OffsetLog(tmp_path).open() == {"g": {("t", 0): _om(5)}}


def test_flipped_bit_in_tail_record_is_dropped(tmp_path):
    first = encode_record("g", [(("t", 0), _om(5))])
    second = bytearray(encode_record("g", [(("t", 0), _om(6))]))
    second[-3] ^= 0x10
    state, valid = replay(MAGIC + first + bytes(second))
    assert state == {"g": {("t", 0): _om(5)}}
    assert valid == len(MAGIC) + len(first)


def test_foreign_file_is_refused_not_truncated(tmp_path):
    path = tmp_path / FILE_NAME
    path.write_bytes(b"something else entirely")
    with pytest.raises(OffsetLogError, match="bad magic"):
        OffsetLog(tmp_path).open()
    assert path.read_bytes() == b"something else entirely"


def test_leftover_temp_file_from_interrupted_compaction_is_ignored(tmp_path):
    log = OffsetLog(tmp_path)
    log.open()
    log.append([encode_record("g", [(("t", 0), _om(9))])])
    log.close()
    (tmp_path / TMP_NAME).write_bytes(MAGIC + b"\x00\x00")  # crash before the rename
    assert OffsetLog(tmp_path).open() == {"g": {("t", 0): _om(9)}}
    assert not (tmp_path / TMP_NAME).exists()


def test_compaction_rewrites_live_state_only(tmp_path):
    log = OffsetLog(tmp_path, compact_bytes=1000)
    log.open()
    state: dict = {"g": {}}
    while not log.should_compact():
        offset = log.size_bytes
        state["g"][("t", offset % 5)] = _om(offset)
        log.append([encode_record("g", [(("t", offset % 5), _om(offset))])])
    before = log.size_bytes
    log.compact(state)
    assert log.size_bytes < before
    assert not log.should_compact()
    log.append([encode_record("g", [(("t", 9), _om(1))])])
    log.close()
    reopened = OffsetLog(tmp_path).open()
    assert reopened == {"g": {**state["g"], ("t", 9): _om(1)}}
