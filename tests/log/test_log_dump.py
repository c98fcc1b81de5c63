from pathlib import Path

from tests.log.log_helpers import SMALL, append, open_log
from trio_broker.broker.storage import dump_segment
from trio_broker.protocol.compression import Compression


def test_dump_log_segment_and_indexes(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    for _ in range(10):
        append(log, 2, value=b"payload" * 10)
    append(log, 1, pid=7, epoch=0, seq=0, compression=Compression.GZIP)
    log.close()
    segment = path / "00000000000000000000.log"
    lines = list(dump_segment(segment, print_records=True))
    assert lines[0] == f"Dumping {segment}"
    assert lines[1] == "Log starting offset: 0"
    batch_lines = [line for line in lines if line.startswith("baseOffset")]
    assert batch_lines[0].startswith("baseOffset: 0 lastOffset: 1 count: 2 ")
    assert "position: 0 CreateTime: 1700000000000" in batch_lines[0]
    assert "magic: 2 compresscodec: none" in batch_lines[0]
    assert batch_lines[0].endswith("isvalid: true")
    assert "producerId: 7" in batch_lines[-1]
    assert "compresscodec: gzip" in batch_lines[-1]
    record_lines = [line for line in lines if line.startswith("| offset: 3 ")]
    assert record_lines == [
        "| offset: 3 CreateTime: 1700000000000 keySize: 5 valueSize: 70 sequence: -1 "
        f"headerKeys: [] key: key-1 payload: {'payload' * 10} headers: []"
    ]
    index_lines = list(dump_segment(path / "00000000000000000000.index", print_records=False))
    assert index_lines[1].startswith("offset: ")
    assert all("position: " in line for line in index_lines[1:])
    time_lines = list(dump_segment(path / "00000000000000000000.timeindex", print_records=False))
    assert time_lines[-1].startswith("timestamp: 1700000000000 offset: ")


def test_dump_reports_invalid_data(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, SMALL)
    append(log, 1)
    append(log, 1)
    log.close()
    segment = path / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF
    segment.write_bytes(bytes(data) + b"\x00" * 30)
    lines = list(dump_segment(segment, print_records=False))
    assert lines[-2].endswith("isvalid: false")
    assert lines[-1].startswith("Found 30 invalid bytes at position")
