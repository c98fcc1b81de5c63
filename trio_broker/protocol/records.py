"""Records inside a magic-v2 batch: the one decoder (consumers, tools, tests, the broker's
timestamp lookups) and the builder (producers), with the one zig-zag varint reader and writer.

The broker never decodes records on its produce or fetch path (batches stay bytes; see
``batch``).

Each record inside ``records``: length varint (bytes that follow), attributes i8 (0),
timestampDelta varlong, offsetDelta varint, key (varint length, -1 = null, bytes), value
(likewise), header count varint, then per header a key (varint length + UTF-8) and a nullable
value. Varints are zig-zag encoded base-128, least significant group first.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, TypeAlias

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


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def read_varint(data: Buffer, pos: int) -> tuple[int, int]:
    """The zig-zag varint at ``pos`` -> (value, position after it)."""
    result = 0
    shift = 0
    while True:
        try:
            byte = data[pos]
        except IndexError:
            raise CorruptRecordError("varint runs past the end of the record") from None
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift >= 70:
            raise CorruptRecordError("varint longer than 10 bytes")


def decode_batch_into(out: list[Any], raw: bytes, pos: int, header: BatchHeader, *,
                      cls: type[tuple[Any, ...]] = Record, topic: str | None = None,
                      partition: int = -1, check_crc: bool = True,
                      max_uncompressed_bytes: int | None = None) -> None:
    """Append a row per record of the whole batch at ``raw[pos:]`` to ``out``.

    Rows are ``Record(offset, timestamp, key, value, headers)``, or with a ``topic``, rows of
    ``cls(topic, partition, offset, timestamp, timestamp_type, key, value, headers)`` (the
    consumer's ``ConsumerRecord``), built with ``tuple.__new__``. Keys and values are ``bytes``
    slices of ``raw`` or of the decompressed payload.

    This is the decoding loop of every reader of records, so it is written for speed: the one-
    and two-byte varint cases are inlined (at 100-byte values the record length, the value
    length and the timestamp delta all take two bytes), record lengths are skipped (the fields
    delimit themselves; the records must end exactly where the batch does, and the CRC covers
    the lengths), and for a batch whose offset deltas are 0, 1, 2, ... (any batch not compacted)
    offsets come from a counter.
    """
    if check_crc:
        verify_crc(raw, pos, header)
    end = pos + header.size
    if header.compression:
        data: Any = decompress(header.compression,
                               memoryview(raw)[pos + BATCH_HEADER_SIZE:end],
                               max_output=max_uncompressed_bytes)
        i, stop = 0, len(data)
    elif type(raw) is bytes:
        data, i, stop = raw, pos + BATCH_HEADER_SIZE, end
    else:  # slices of a bytearray or memoryview would not be bytes
        data = bytes(memoryview(raw)[pos + BATCH_HEADER_SIZE:end])
        i, stop = 0, len(data)
    count = header.records_count
    if count < 0 or count > stop - i:  # every record needs at least one byte
        raise CorruptRecordError(f"records_count {count} does not fit in {stop - i} bytes")
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append = header.timestamp_type == LOG_APPEND_TIME
    timestamp_type = int(log_append)
    full = topic is not None
    dense = header.last_offset_delta == count - 1
    new = tuple.__new__
    append = out.append
    first = len(out)
    try:
        for offset in range(base_offset, base_offset + count):
            # length (skipped), then attributes (1 byte, unused)
            if data[i] < 0x80:
                i += 2
            elif data[i + 1] < 0x80:
                i += 3
            else:
                _, i = read_varint(data, i)
                i += 1
            # timestamp delta
            b = data[i]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                i += 1
            else:
                b2 = data[i + 1]
                if b2 < 0x80:
                    b = (b & 0x7F) | (b2 << 7)
                    ts_delta = (b >> 1) ^ -(b & 1)
                    i += 2
                else:
                    ts_delta, i = read_varint(data, i)
            # offset delta
            if dense:
                if data[i] < 0x80:
                    i += 1
                elif data[i + 1] < 0x80:
                    i += 2
                else:
                    _, i = read_varint(data, i)
            else:
                offset_delta, i = read_varint(data, i)
                offset = base_offset + offset_delta
            # key
            b = data[i]
            if b == 1:  # null, the common case
                key = None
                i += 1
            else:
                if b < 0x80:
                    n = (b >> 1) ^ -(b & 1)
                    i += 1
                else:
                    n, i = read_varint(data, i)
                if n < 0:
                    if n != -1:
                        raise CorruptRecordError(f"negative field length {n}")
                    key = None
                else:
                    key = data[i:i + n]
                    i += n
            # value
            b = data[i]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                i += 1
            else:
                b2 = data[i + 1]
                if b2 < 0x80:
                    n = (b & 0x7F) | (b2 << 7)
                    n = (n >> 1) ^ -(n & 1)
                    i += 2
                else:
                    n, i = read_varint(data, i)
            if n < 0:
                if n != -1:
                    raise CorruptRecordError(f"negative field length {n}")
                value = None
            else:
                value = data[i:i + n]
                i += n
            # headers
            if data[i] == 0:
                headers: tuple[tuple[str, bytes | None], ...] = ()
                i += 1
            else:
                n, i = read_varint(data, i)
                headers, i = _read_headers(data, i, n, stop)
            if full:
                append(new(cls, (topic, partition, offset, base_ts + ts_delta, timestamp_type,
                                 key, value, headers)))
            else:
                append(new(cls, (offset, base_ts + ts_delta, key, value, headers)))
    except IndexError:
        raise CorruptRecordError(f"record runs past the end of the batch at offset "
                                 f"{base_offset}") from None
    if i != stop:
        raise CorruptRecordError(f"{stop - i} bytes left after {count} records of the batch at "
                                 f"offset {base_offset}")
    if log_append:  # every record carries the broker's time (rare: a topic setting)
        at = 3 if full else 1
        max_ts = (header.max_timestamp,)
        out[first:] = [new(cls, r[:at] + max_ts + r[at + 1:]) for r in out[first:]]


def _read_headers(data: Any, i: int, count: int,
                  stop: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    if count < 0 or count > stop - i:
        raise CorruptRecordError(f"header count {count} overruns the record")
    headers = []
    for _ in range(count):
        n, i = read_varint(data, i)
        if n < 0:
            raise CorruptRecordError("record header key is null")
        try:
            name = bytes(data[i:i + n]).decode()
        except UnicodeDecodeError:
            raise CorruptRecordError("record header key is not UTF-8") from None
        i += n
        n, i = read_varint(data, i)
        if n < 0:
            if n != -1:
                raise CorruptRecordError(f"negative field length {n}")
            value = None
        else:
            value = bytes(data[i:i + n])
            i += n
        headers.append((name, value))
    return tuple(headers), i


def decode_records(
    batch: Buffer, *, max_uncompressed_bytes: int | None = None, check_crc: bool = True
) -> list[Record]:
    """Decode every record of one batch (consumers, tools and tests; never the broker)."""
    header = read_batch_header(batch)
    if header.size > len(batch):
        raise CorruptRecordError(f"record batch of {header.size} bytes truncated to {len(batch)}")
    records: list[Record] = []
    decode_batch_into(records, batch, 0, header, check_crc=check_crc,  # type: ignore[arg-type]
                      max_uncompressed_bytes=max_uncompressed_bytes)
    return records


def decode_batches(
    buf: Buffer, *, max_uncompressed_bytes: int | None = None
) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Decode a fetched partition payload batch by batch, ignoring a truncated tail."""
    raw = buf if type(buf) is bytes else bytes(buf)
    for pos, header in iter_batches(raw):
        records: list[Record] = []
        decode_batch_into(records, raw, pos, header,
                          max_uncompressed_bytes=max_uncompressed_bytes)
        yield header, records


RecordInput: TypeAlias = (
    tuple[bytes | None, bytes | None]
    | tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]
)


def write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` as a zig-zag varint."""
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
        write_varint(out, length)
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
            write_varint(record, deltas[offset_delta])
        if offset_delta < 64:
            record.append(offset_delta << 1)
        else:
            write_varint(record, offset_delta)
        _put_bytes(record, item[0])
        _put_bytes(record, item[1])
        headers = item[2] if len(item) > 2 else ()  # type: ignore[misc]
        if headers:
            write_varint(record, len(headers))
            for header_key, header_value in headers:
                _put_bytes(record, header_key.encode())
                _put_bytes(record, header_value)
        else:
            record.append(0)
        write_varint(body, len(record))
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
