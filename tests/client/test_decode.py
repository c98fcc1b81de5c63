"""The consumer's record decoding (the one decoder in ``protocol.records``, as the consumer
drives it) checked against a plain transcription of the record layout written here, on batches
from the project's builder and on hand-made batches the builder never writes (compacted, with
gaps in the offset deltas; LogAppendTime)."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_broker.client.core.fetch import decode_fetched
from trio_broker.client.core.structs import ConsumerRecord, TopicPartition
from trio_broker.protocol.batch import BATCH_HEADER_SIZE, iter_batches, set_log_append_time
from trio_broker.protocol.compression import Compression, decompress
from trio_broker.protocol.errors import CorruptRecordError
from trio_broker.protocol.records import build_batch

TP = TopicPartition("t", 3)

records_strategy = st.lists(
    st.tuples(st.none() | st.binary(max_size=200), st.none() | st.binary(max_size=300),
              st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)),
                       max_size=3)),
    min_size=1, max_size=120)


def decode_chunk(tp: TopicPartition, raw: bytes, start: int, check_crcs: bool,
                 ) -> list[ConsumerRecord]:
    return decode_fetched(tp, raw, start, check_crcs=check_crcs)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def _read_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = _read_varint(data, pos)
    return (None, pos) if n < 0 else (data[pos:pos + n], pos + n)


def reference(raw: bytes, start: int) -> list[ConsumerRecord]:
    """The record layout read field by field, as the protocol spec writes it out."""
    out = []
    for pos, header in iter_batches(raw):
        if header.is_control:
            continue
        data = decompress(header.compression, raw[pos + BATCH_HEADER_SIZE:pos + header.size])
        i = 0
        for _ in range(header.records_count):
            length, i = _read_varint(data, i)
            end = i + length
            i += 1  # attributes
            ts_delta, i = _read_varint(data, i)
            offset_delta, i = _read_varint(data, i)
            key, i = _read_bytes(data, i)
            value, i = _read_bytes(data, i)
            count, i = _read_varint(data, i)
            headers = []
            for _ in range(count):
                name, i = _read_bytes(data, i)
                assert name is not None
                header_value, i = _read_bytes(data, i)
                headers.append((name.decode(), header_value))
            assert i == end
            offset = header.base_offset + offset_delta
            timestamp = (header.max_timestamp if header.timestamp_type
                         else header.base_timestamp + ts_delta)
            if offset >= start:
                out.append(ConsumerRecord(TP.topic, TP.partition, offset, timestamp,
                                          header.timestamp_type, key, value, tuple(headers)))
    return out


@settings(max_examples=60, deadline=None)
@given(records=records_strategy, codec=st.sampled_from(list(Compression)),
       base=st.integers(0, 2**40), start_delta=st.integers(0, 130),
       ts_step=st.integers(0, 100_000))
def test_matches_the_reference_decoder(records: list, codec: Compression, base: int,
                                       start_delta: int, ts_step: int) -> None:
    timestamps = [1_700_000_000_000 + i * ts_step for i in range(len(records))]
    raw = build_batch(records, timestamps=timestamps, compression=codec, base_offset=base)
    raw += build_batch(records[:2], compression=codec, base_offset=base + len(records))
    start = base + start_delta
    got = decode_chunk(TP, raw, start, True)
    assert got == reference(raw, start)
    assert all(type(r) is ConsumerRecord for r in got)
    assert all(type(v) is bytes for r in got for v in (r.key, r.value) if v is not None)


def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def sparse_batch(base_offset: int, deltas: list[int], values: list[bytes]) -> bytes:
    """A batch as compaction leaves it: offset deltas with gaps, lastOffsetDelta the largest."""
    body = bytearray()
    for delta, value in zip(deltas, values, strict=True):
        record = b"\x00" + _varint(delta * 3) + _varint(delta) + _varint(-1)
        record += _varint(len(value)) + value + _varint(0)
        body += _varint(len(record)) + record
    header_tail = struct.pack(">hiqqqhii", 0, deltas[-1], 1000, 1000 + 3 * deltas[-1], -1, -1,
                              -1, len(deltas))
    crc = crc32c(header_tail + body)
    batch_length = 4 + 1 + 4 + len(header_tail) + len(body)
    return (struct.pack(">qiibI", base_offset, batch_length, -1, 2, crc) + header_tail
            + bytes(body))


def test_compacted_batches_keep_their_gaps() -> None:
    deltas = [0, 5, 70, 200, 9000]
    values = [b"a", b"b" * 100, b"c", b"d" * 70, b"e"]
    raw = sparse_batch(100, deltas, values)
    got = decode_chunk(TP, raw, 0, True)
    assert [r.offset for r in got] == [100 + d for d in deltas]
    assert [r.timestamp for r in got] == [1000 + 3 * d for d in deltas]
    assert got == reference(raw, 0)
    assert [r.offset for r in decode_chunk(TP, raw, 171, True)] == [300, 9100]


def test_log_append_time_gives_every_record_the_broker_time() -> None:
    raw = bytearray(build_batch([(None, b"x"), (b"k", b"y")], timestamps=[5, 9]))
    set_log_append_time(raw, 0, 777)
    got = decode_chunk(TP, bytes(raw), 0, True)
    assert [(r.timestamp, r.timestamp_type) for r in got] == [(777, 1), (777, 1)]
    assert got == reference(bytes(raw), 0)


def test_a_damaged_batch_is_reported_not_misread() -> None:
    raw = bytearray(build_batch([(None, b"value")] * 3))
    raw[-3] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        decode_chunk(TP, bytes(raw), 0, True)
    # without the CRC check the structure check still refuses a value running past the batch
    bad = bytearray(build_batch([(None, b"value")] * 3))
    assert bad[66] == 10  # record: length, attributes, ts delta, offset delta, key, value length
    bad[66] = 0x7E  # the first value claims 63 bytes
    with pytest.raises(CorruptRecordError):
        decode_chunk(TP, bytes(bad), 0, False)


def test_a_truncated_tail_is_ignored() -> None:
    whole = build_batch([(None, b"a")], base_offset=0)
    raw = whole + build_batch([(None, b"b")], base_offset=1)[:-5]
    assert [r.value for r in decode_chunk(TP, raw, 0, True)] == [b"a"]
