"""The vectorised decoder against the reference record decoder, record for record."""

from __future__ import annotations

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_broker.client.blocking import next_fetch_offset
from trio_broker.protocol.batch import set_log_append_time
from trio_broker.protocol.compression import Compression
from trio_broker.protocol.errors import CorruptRecordError
from trio_broker.protocol.records import build_batch, decode_batches
from trio_broker.spark._decode import (
    ARROW_SCHEMA,
    ARROW_SCHEMA_WITH_HEADERS,
    decode_fetched,
)

TS = 1_700_000_000_000

payloads = st.one_of(st.none(), st.binary(max_size=20), st.binary(min_size=60, max_size=300))
headers = st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=16))),
                   max_size=3)
records = st.tuples(payloads, payloads, headers)


@st.composite
def fetched(draw: st.DrawFn) -> tuple[bytes, int]:
    """Several batches back to back, maybe with a truncated batch at the end."""
    out = b""
    offset = draw(st.integers(0, 10_000))
    for _ in range(draw(st.integers(1, 4))):
        recs = draw(st.lists(records, min_size=1, max_size=40))
        uniform = draw(st.booleans())
        if uniform:  # equal-length records: the vectorised run path
            recs = [(b"k", b"v" * 70, []) for _ in range(draw(st.integers(8, 200)))]
        stamps = [TS + draw(st.integers(-1000, 10**7)) for _ in recs]
        out += build_batch(recs, timestamps=stamps, base_offset=offset,
                           compression=draw(st.sampled_from(list(Compression))))
        offset += len(recs)
    if draw(st.booleans()):
        out += build_batch([(b"k", b"tail")], base_offset=offset)[:-3]
    return out, offset


def _expected(buf: bytes, start: int, end: int) -> list[dict]:
    rows = []
    for _, recs in decode_batches(buf):
        for r in recs:
            if start <= r.offset < end:
                rows.append({"key": r.key, "value": r.value, "offset": r.offset,
                             "timestamp_ms": r.timestamp,
                             "headers": [{"key": k, "value": v} for k, v in r.headers]})
    return rows


def _actual(buf: bytes, start: int, end: int, include_headers: bool = True) -> list[dict]:
    chunk = decode_fetched(buf, topic="orders", partition=7, start=start, end=end,
                           include_headers=include_headers)
    if chunk.batch is None:
        return []
    assert chunk.batch.schema == (ARROW_SCHEMA_WITH_HEADERS if include_headers else ARROW_SCHEMA)
    rows = chunk.batch.to_pylist()
    for row in rows:
        assert row.pop("topic") == "orders"
        assert row.pop("partition") == 7
        assert row.pop("timestampType") == 0
        ts = row.pop("timestamp")
        row["timestamp_ms"] = round(ts.timestamp() * 1000)
    return rows


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fetched(), st.data())
def test_matches_reference_decoder(case: tuple[bytes, int], data: st.DataObject) -> None:
    buf, last = case
    start = data.draw(st.integers(0, last))
    end = data.draw(st.integers(start, last + 5))
    assert _actual(buf, start, end) == _expected(buf, start, end)


def test_without_headers_and_byte_count() -> None:
    buf = build_batch([(b"key", b"value", [("h", b"x")]), (None, b"vv")], timestamps=[TS, TS + 5])
    chunk = decode_fetched(buf, topic="t", partition=0, start=0, end=10, include_headers=False)
    assert chunk.batch is not None
    assert chunk.batch.schema == ARROW_SCHEMA
    assert chunk.batch.column("key").to_pylist() == [b"key", None]
    assert chunk.payload_bytes == len(b"key") + len(b"value") + len(b"vv")
    assert chunk.next_offset == 2


def test_log_append_time_uses_the_batch_timestamp() -> None:
    buf = bytearray(build_batch([(b"a", b"1"), (b"b", b"2")], timestamps=[TS, TS + 9]))
    set_log_append_time(buf, 0, TS + 12345)
    chunk = decode_fetched(bytes(buf), topic="t", partition=0, start=0, end=2,
                           include_headers=False)
    assert chunk.batch is not None
    assert chunk.batch.column("timestampType").to_pylist() == [1, 1]
    stamps = [round(t.timestamp() * 1000) for t in chunk.batch.column("timestamp").to_pylist()]
    assert stamps == [TS + 12345, TS + 12345]


def test_control_batches_are_skipped_but_advance_the_offset() -> None:
    control = bytearray(build_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
                                    base_offset=0, is_transactional=True))
    control[22] |= 0x20  # low byte of the attributes: the control bit; then a valid CRC again
    control[17:21] = crc32c(bytes(control[21:])).to_bytes(4, "big")
    data = build_batch([(b"k", b"v")], base_offset=1)
    chunk = decode_fetched(bytes(control) + data, topic="t", partition=0, start=0, end=5,
                           include_headers=False)
    assert chunk.batch is not None
    assert chunk.batch.column("offset").to_pylist() == [1]
    assert next_fetch_offset(bytes(control), 0) == 1


def test_only_a_truncated_batch_decodes_nothing() -> None:
    buf = build_batch([(b"k", b"v" * 100)] * 3, base_offset=40)
    chunk = decode_fetched(buf[:-1], topic="t", partition=0, start=40, end=50,
                           include_headers=True)
    assert chunk == (None, 40, 0)


def test_corruption_is_reported() -> None:
    buf = bytearray(build_batch([(b"k", b"v" * 100)] * 3))
    buf[-5] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_fetched(bytes(buf), topic="t", partition=0, start=0, end=3,
                       include_headers=False)


def test_records_longer_than_two_varint_bytes() -> None:
    """Lengths of 8192 bytes and more take the general varint reader, not the fast paths."""
    recs = [(b"k", b"x" * size, [("h", b"v" * size)]) for size in (9000, 5, 70_000, 8192)]
    buf = build_batch(recs, timestamps=[TS] * len(recs), compression=Compression.ZSTD)
    assert _actual(buf, 0, 4) == _expected(buf, 0, 4)
    assert [len(row["value"]) for row in _actual(buf, 0, 4)] == [9000, 5, 70_000, 8192]
