from pathlib import Path

import attrs
import pytest

from tests.log.log_helpers import SMALL, TS, append, make_batch, open_log
from trio_broker.broker.storage import LogConfig, OffsetOutOfRangeError
from trio_broker.protocol.batch import iter_batches, read_batch_header, validate_batch
from trio_broker.protocol.compression import Compression
from trio_broker.protocol.records import decode_batches


def test_append_assigns_offsets_and_read_round_trips(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    infos = [append(log, 3, value=b"v%d" % i) for i in range(4)]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 2), (3, 5), (6, 8), (9, 11)]
    assert all(i.log_append_time_ms == -1 and not i.duplicate for i in infos)
    assert log.log_end_offset == log.high_watermark == 12
    data = log.read(0, 1 << 20)
    assert data.first_offset == 0
    assert data.high_watermark == 12
    assert data.log_start_offset == 0
    decoded = [(r.offset, r.value) for _, records in decode_batches(data.records) for r in records]
    assert decoded == [(o, b"v%d" % (o // 3)) for o in range(12)]
    # Stored batches keep a valid CRC and carry leader epoch -1.
    for pos, header in iter_batches(data.records):
        validate_batch(data.records[pos : pos + header.size], max_message_bytes=1 << 20)
        assert header.partition_leader_epoch == -1
    log.close()


def test_read_starts_at_batch_containing_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for _ in range(5):
        append(log, 10)
    data = log.read(27, 1 << 20)
    assert data.first_offset == 20
    assert read_batch_header(data.records).base_offset == 20
    assert log.read(50, 100).records == b""
    with pytest.raises(OffsetOutOfRangeError, match="outside"):
        log.read(51, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    log.close()


def test_read_returns_only_whole_batches_and_min_one_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(index_interval_bytes=100))
    sizes = []
    for i in range(20):
        buf, header = make_batch(1, value=b"x" * (50 + i * 10))
        sizes.append(header.size)
        log.append(buf, header, now_ms=TS)
    # A window that ends mid-batch returns the whole batches before it.
    data = log.read(0, sizes[0] + sizes[1] + 5)
    assert len(data.records) == sizes[0] + sizes[1]
    # KIP-74: the first batch comes back even when larger than max_bytes...
    data = log.read(3, 10)
    assert len(data.records) == sizes[3]
    # ...unless the caller asks otherwise.
    assert log.read(3, 10, min_one_batch=False).records == b""
    # Large windows take everything in one segment.
    assert len(log.read(0, 1 << 20).records) == sum(sizes)
    log.close()


def test_index_lookups_across_many_batches_and_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(400):
        append(log, 1 + i % 3, value=b"v" * (i % 40))
    assert log.num_segments > 10
    end = log.log_end_offset
    for offset in range(0, end, 7):
        data = log.read(offset, 1)
        header = read_batch_header(data.records)
        assert header.base_offset <= offset <= header.last_offset
        assert len(data.records) == header.size
    log.close()


def test_roll_by_size_keeps_segments_under_segment_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", attrs.evolve(SMALL, segment_bytes=1000))
    for _ in range(30):
        append(log, 1, value=b"x" * 150)
    files = sorted((tmp_path / "t-0").glob("*.log"))
    assert len(files) == log.num_segments > 5
    assert all(f.stat().st_size <= 1000 for f in files)
    assert files[1].name == f"{read_batch_header(files[1].read_bytes()).base_offset:020d}.log"
    log.close()


def test_batch_larger_than_segment_gets_its_own_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", attrs.evolve(SMALL, segment_bytes=200))
    append(log, value=b"a")
    append(log, value=b"b" * 1000)
    append(log, value=b"c")
    assert log.segment_base_offsets() == [0, 1, 2]
    assert len(log.read(1, 1).records) > 1000
    log.close()


def test_roll_by_time(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", attrs.evolve(SMALL, segment_ms=1000))
    append(log, ts=TS, now_ms=TS)
    append(log, ts=TS + 500, now_ms=TS + 1000)
    assert log.num_segments == 1
    append(log, ts=TS + 1001, now_ms=TS + 1001)
    assert log.segment_base_offsets() == [0, 2]
    log.close()


def test_log_append_time_rewrites_max_timestamp_with_valid_crc(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", attrs.evolve(SMALL, message_timestamp_type="LogAppendTime"))
    info = append(log, 3, ts=TS, now_ms=TS + 12345)
    assert info.log_append_time_ms == TS + 12345
    data = log.read(0, 1 << 20).records
    header = validate_batch(data, max_message_bytes=1 << 20)  # CRC recomputed
    assert header.timestamp_type == 1
    assert header.max_timestamp == TS + 12345
    [(_, records)] = list(decode_batches(data))
    assert {r.timestamp for r in records} == {TS + 12345}
    log.close()


def test_compressed_batches_are_stored_as_is(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    buf, header = make_batch(50, value=b"z" * 100, compression=Compression.ZSTD)
    original = bytes(buf)
    log.append(buf, header, now_ms=TS)
    stored = log.read(0, 1 << 20).records
    assert stored == original  # base offset 0 and leader epoch -1 were already there
    assert [r.offset for _, rs in decode_batches(stored) for r in rs] == list(range(50))
    log.close()


def test_offset_for_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(200):
        append(log, 2, ts=TS + i * 10)
    assert log.offset_for_timestamp(TS) == (0, TS)
    assert log.offset_for_timestamp(TS + 505) == (102, TS + 510)
    assert log.offset_for_timestamp(TS + 1990) == (398, TS + 1990)
    assert log.offset_for_timestamp(TS + 1991) is None
    log.close()
    reopened = open_log(tmp_path / "t-0", clean_shutdown=True)
    assert reopened.offset_for_timestamp(TS + 505) == (102, TS + 510)
    reopened.close()


def test_offset_for_timestamp_inside_a_batch(tmp_path: Path) -> None:
    from trio_broker.protocol.records import build_batch

    log = open_log(tmp_path / "t-0")
    buf = bytearray(
        build_batch([(None, b"a"), (None, b"b"), (None, b"c")], timestamps=[TS, TS + 5, TS + 9])
    )
    log.append(buf, validate_batch(buf, max_message_bytes=1000), now_ms=TS)
    assert log.offset_for_timestamp(TS + 3) == (1, TS + 5)
    log.close()


def test_size_bytes_and_closed_log(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    info = append(log, 2)
    assert log.size_bytes == info.size
    log.close()
    with pytest.raises(Exception, match="closed"):
        append(log)
