"""Records inside a magic-v2 batch: decoding for consumers, tools and tests, building for producers.

The broker never calls this on its produce or fetch path (batches stay bytes; see ``batch``).

Each record inside ``records``: length varint (bytes that follow), attributes i8 (0),
timestampDelta varlong, offsetDelta varint, key (varint length, -1 = null, bytes), value
(likewise), header count varint, then per header a key (varint length + UTF-8) and a nullable
value. Varints are zig-zag encoded base-128, least significant group first.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TypeAlias

import attrs

from .batch import (
    BATCH_HEADER_SIZE,
    LOG_APPEND_TIME,
    TRANSACTIONAL_BIT,
    BatchHeader,
    finish_batch,
    iter_batches,
    read_batch_header,
    verify_crc,
)
from .compression import Buffer, Compression, compress, decompress
from .errors import CorruptRecordError


@attrs.frozen(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def _read_varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise CorruptRecordError("varint runs past the end of the record")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift >= 70:
            raise CorruptRecordError("varint longer than 10 bytes")


def _read_bytes(data: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    byte = data[pos] if pos < end else 0x80
    if byte < 0x80:  # one-byte varint, the common case
        length = (byte >> 1) ^ -(byte & 1)
        pos += 1
    else:
        length, pos = _read_varint(data, pos, end)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"negative field length {length}")
        return None, pos
    if length > end - pos:
        raise CorruptRecordError(f"field of {length} bytes overruns the record")
    return data[pos : pos + length], pos + length


def decode_records(
    batch: Buffer, *, max_uncompressed_bytes: int | None = None, check_crc: bool = True
) -> list[Record]:
    """Decode every record of one batch (consumers, tools and tests; never the broker)."""
    header = read_batch_header(batch)
    if header.size > len(batch):
        raise CorruptRecordError(f"record batch of {header.size} bytes truncated to {len(batch)}")
    if check_crc:
        verify_crc(batch, 0, header)
    payload = memoryview(batch)[BATCH_HEADER_SIZE : header.size]
    data = decompress(header.compression, payload, max_output=max_uncompressed_bytes)
    count = header.records_count
    end = len(data)
    if count < 0 or count > end:  # every record needs at least one byte
        raise CorruptRecordError(f"records_count {count} does not fit in {end} bytes")
    log_append = header.timestamp_type == LOG_APPEND_TIME
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    max_timestamp = header.max_timestamp
    records: list[Record] = []
    pos = 0
    for _ in range(count):
        length, pos = _read_varint(data, pos, end)
        if length < 0 or length > end - pos:
            raise CorruptRecordError(f"record length {length} overruns the batch")
        record_end = pos + length
        pos += 1  # attributes, unused
        timestamp_delta, pos = _read_varint(data, pos, record_end)
        offset_delta, pos = _read_varint(data, pos, record_end)
        key, pos = _read_bytes(data, pos, record_end)
        value, pos = _read_bytes(data, pos, record_end)
        header_count, pos = _read_varint(data, pos, record_end)
        if header_count < 0 or header_count > record_end - pos:
            raise CorruptRecordError(f"header count {header_count} overruns the record")
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(header_count):
            raw_key, pos = _read_bytes(data, pos, record_end)
            if raw_key is None:
                raise CorruptRecordError("record header key is null")
            try:
                header_key = raw_key.decode()
            except UnicodeDecodeError as exc:
                raise CorruptRecordError(f"record header key is not UTF-8: {exc}") from None
            header_value, pos = _read_bytes(data, pos, record_end)
            headers.append((header_key, header_value))
        if pos != record_end:
            raise CorruptRecordError(
                f"record declares {length} bytes but its fields end at a different place"
            )
        records.append(
            Record(
                base_offset + offset_delta,
                max_timestamp if log_append else base_timestamp + timestamp_delta,
                key,
                value,
                tuple(headers),
            )
        )
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after {count} records")
    return records


def decode_batches(
    buf: Buffer, *, max_uncompressed_bytes: int | None = None
) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Decode a fetched partition payload batch by batch, ignoring a truncated tail."""
    view = memoryview(buf)
    for pos, header in iter_batches(view):
        records = decode_records(
            view[pos : pos + header.size], max_uncompressed_bytes=max_uncompressed_bytes
        )
        yield header, records


RecordInput: TypeAlias = (
    tuple[bytes | None, bytes | None]
    | tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]
)


def _put_varint(out: bytearray, value: int) -> None:
    zigzag = (value << 1) ^ (value >> 63)
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def _put_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out.append(1)  # zig-zag -1
        return
    length = len(value)
    if length < 64:
        out.append(length << 1)
    else:
        _put_varint(out, length)
    out += value


def build_batch(
    records: Sequence[RecordInput],
    *,
    timestamps: Sequence[int] | None = None,
    base_timestamp_ms: int | None = None,
    compression: Compression = Compression.NONE,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
) -> bytes:
    """Build one CreateTime batch from (key, value[, headers]) tuples.

    Records without explicit ``timestamps`` all get ``base_timestamp_ms`` (default: now).
    """
    count = len(records)
    if count == 0:
        raise ValueError("a record batch needs at least one record")
    if timestamps is None:
        if base_timestamp_ms is None:
            base_timestamp_ms = int(time.time() * 1000)
        first_ts = max_ts = base_timestamp_ms
        deltas: Sequence[int] | None = None
    else:
        if len(timestamps) != count:
            raise ValueError(f"{len(timestamps)} timestamps for {count} records")
        first_ts = timestamps[0]
        max_ts = max(timestamps)
        deltas = [ts - first_ts for ts in timestamps]

    body = bytearray(BATCH_HEADER_SIZE)  # header is packed in place at the end
    record = bytearray()
    for offset_delta, item in enumerate(records):
        record.clear()
        record.append(0)  # attributes
        if deltas is None:
            record.append(0)  # timestamp delta 0
        else:
            _put_varint(record, deltas[offset_delta])
        if offset_delta < 64:
            record.append(offset_delta << 1)
        else:
            _put_varint(record, offset_delta)
        _put_bytes(record, item[0])
        _put_bytes(record, item[1])
        headers = item[2] if len(item) > 2 else ()
        if headers:
            _put_varint(record, len(headers))
            for header_key, header_value in headers:
                _put_bytes(record, header_key.encode())
                _put_bytes(record, header_value)
        else:
            record.append(0)
        _put_varint(body, len(record))
        body += record

    if compression != Compression.NONE:
        compressed = compress(compression, memoryview(body)[BATCH_HEADER_SIZE:])
        del body[BATCH_HEADER_SIZE:]
        body += compressed
    finish_batch(
        body,
        attributes=int(compression) | (TRANSACTIONAL_BIT if is_transactional else 0),
        records_count=count,
        base_timestamp=first_ts,
        max_timestamp=max_ts,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    return bytes(body)
