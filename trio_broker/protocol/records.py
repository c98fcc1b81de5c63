"""Magic-v2 record batches (Kafka's ``DefaultRecordBatch``), sans-IO.

Why this module looks the way it does: the broker treats a produced batch as opaque bytes. It
checks the 61-byte header and the CRC-32C, rewrites the fields Kafka lets a broker rewrite
(baseOffset, partitionLeaderEpoch, and for LogAppendTime the timestamp type and maxTimestamp),
and stores the bytes as they came. Only consumers, tools and tests decode individual records, so
record decoding lives here too but is never on the broker's produce or fetch path.

Batch layout, all integers big-endian (``_HEADER`` below unpacks bytes 0..60 in one call)::

    offset size field
         0    8 baseOffset            i64  producers send 0; the broker writes the log offset
         8    4 batchLength           i32  bytes after this field (= total size - 12)
        12    4 partitionLeaderEpoch  i32  written by the broker; outside the CRC
        16    1 magic                 i8   always 2 here
        17    4 crc                   u32  CRC-32C (Castagnoli) of bytes 21 .. end of batch
        21    2 attributes            i16  bits 0-2 codec, 3 timestamp type, 4 transactional,
                                           5 control, 6 delete horizon (compaction)
        23    4 lastOffsetDelta       i32  records - 1 for a produced batch
        27    8 baseTimestamp         i64  timestamp of the first record
        35    8 maxTimestamp          i64  max CreateTime, or the broker's LogAppendTime
        43    8 producerId            i64  -1 unless idempotent
        51    2 producerEpoch         i16  -1 unless idempotent
        53    4 baseSequence          i32  -1 unless idempotent
        57    4 recordsCount          i32  never compressed
        61    . records               compressed as one block when the codec bits are non-zero

Because the CRC starts at byte 21, rewriting baseOffset or partitionLeaderEpoch is free, while
touching attributes or maxTimestamp means recomputing it.

Each record inside ``records``: length varint (bytes that follow), attributes i8 (0),
timestampDelta varlong, offsetDelta varint, key (varint length, -1 = null, bytes), value
(likewise), header count varint, then per header a key (varint length + UTF-8) and a nullable
value. Varints are zig-zag encoded base-128, least significant group first.
"""

from __future__ import annotations

import enum
import struct
import time
from collections.abc import Iterator, Sequence
from typing import ClassVar, TypeAlias

import attrs
import cramjam
from crc32c import crc32c

from .errors import ErrorCode

__all__ = [
    "BATCH_HEADER_SIZE",
    "BATCH_OVERHEAD",
    "BatchHeader",
    "Compression",
    "CorruptRecordError",
    "InvalidRecordError",
    "Record",
    "RecordTooLargeError",
    "UnsupportedCompressionError",
    "build_batch",
    "compress",
    "decode_batches",
    "decode_records",
    "decompress",
    "iter_batches",
    "read_batch_header",
    "set_base_offset",
    "set_log_append_time",
    "set_partition_leader_epoch",
    "validate_batch",
    "verify_crc",
]


class CorruptRecordError(Exception):
    """The bytes are not a batch: bad CRC, truncated, garbage (Kafka CORRUPT_MESSAGE, 2)."""

    error_code: ClassVar[ErrorCode] = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(Exception):
    """A well-formed batch a client may not produce (Kafka INVALID_RECORD, 87)."""

    error_code: ClassVar[ErrorCode] = ErrorCode.INVALID_RECORD


class RecordTooLargeError(Exception):
    """The batch exceeds max.message.bytes (Kafka MESSAGE_TOO_LARGE, 10)."""

    error_code: ClassVar[ErrorCode] = ErrorCode.MESSAGE_TOO_LARGE


class UnsupportedCompressionError(Exception):
    """Codec ids 5..7 are reserved (Kafka UNSUPPORTED_COMPRESSION_TYPE, 76)."""

    error_code: ClassVar[ErrorCode] = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


Buffer: TypeAlias = bytes | bytearray | memoryview

_HEADER = struct.Struct(
    ">"
    "q"  # 0  baseOffset
    "i"  # 8  batchLength
    "i"  # 12 partitionLeaderEpoch
    "b"  # 16 magic
    "I"  # 17 crc (CRC-32C of bytes 21..end)
    "h"  # 21 attributes
    "i"  # 23 lastOffsetDelta
    "q"  # 27 baseTimestamp
    "q"  # 35 maxTimestamp
    "q"  # 43 producerId
    "h"  # 51 producerEpoch
    "i"  # 53 baseSequence
    "i"  # 57 recordsCount
)
BATCH_HEADER_SIZE = _HEADER.size  # 61
BATCH_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
assert BATCH_HEADER_SIZE == 61

_OFFSET_LENGTH = struct.Struct(">qi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_LEADER_EPOCH_POS = 12
_MAGIC_POS = 16
_CRC_POS = 17
_ATTRIBUTES_POS = 21  # first byte covered by the CRC
_MAX_TIMESTAMP_POS = 35
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - BATCH_OVERHEAD

_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20

_MAX_SEQUENCE = 2**31 - 1
CREATE_TIME = 0
LOG_APPEND_TIME = 1


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


@attrs.frozen(slots=True)
class BatchHeader:
    """The 61 fixed bytes of a batch, so the broker can work without touching the records."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return self.batch_length + BATCH_OVERHEAD

    @property
    def compression(self) -> Compression:
        codec = self.attributes & _CODEC_MASK
        if codec > Compression.ZSTD:
            raise UnsupportedCompressionError(f"unknown compression codec id {codec}")
        return Compression(codec)

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return LOG_APPEND_TIME if self.attributes & _TIMESTAMP_TYPE_BIT else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap from 2**31-1 to 0 (-1 if none)."""
        return _increment_sequence(self.base_sequence, self.last_offset_delta)


def _increment_sequence(sequence: int, increment: int) -> int:
    if sequence < 0:
        return -1
    if sequence > _MAX_SEQUENCE - increment:
        return increment - (_MAX_SEQUENCE - sequence) - 1
    return sequence + increment


def read_batch_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the fixed header at ``pos``; the records need not be present yet."""
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError(
            f"record batch header needs {BATCH_HEADER_SIZE} bytes, {len(buf) - pos} available"
        )
    header = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if header.magic != 2:
        raise CorruptRecordError(f"record batch magic {header.magic} is not 2")
    if header.batch_length < _MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"record batch length {header.batch_length} is below the header size"
        )
    return header


def verify_crc(buf: Buffer, pos: int, header: BatchHeader) -> None:
    """Raise CorruptRecordError unless the CRC-32C over bytes 21..end matches the header."""
    end = pos + header.size
    if end > len(buf):
        raise CorruptRecordError(
            f"record batch of {header.size} bytes truncated to {len(buf) - pos}"
        )
    actual = crc32c(memoryview(buf)[pos + _ATTRIBUTES_POS : end])
    if actual != header.crc:
        raise CorruptRecordError(
            f"record batch CRC mismatch: stored {header.crc:#010x}, computed {actual:#010x}"
        )


#: the smallest record: length, attributes, timestamp delta, offset delta, key length (-1),
#: value length (-1) and header count, one byte each
_MIN_RECORD_SIZE = 7


def validate_batch(buf: Buffer, *, max_message_bytes: int) -> BatchHeader:
    """Check one produced batch the way Kafka's LogValidator does, without decompressing.

    ``buf`` must hold exactly one batch (Produce v3+ carries one batch per partition).
    """
    header = read_batch_header(buf)
    if header.size > len(buf):
        raise CorruptRecordError(
            f"record batch declares {header.size} bytes but {len(buf)} were sent"
        )
    if header.size < len(buf):
        raise InvalidRecordError(
            f"expected exactly one record batch, found {len(buf) - header.size} trailing bytes"
        )
    if header.size > max_message_bytes:
        raise RecordTooLargeError(
            f"record batch of {header.size} bytes exceeds max.message.bytes={max_message_bytes}"
        )
    verify_crc(buf, 0, header)
    header.compression  # noqa: B018 -- raises UnsupportedCompressionError for ids 5..7
    if header.records_count <= 0:
        raise InvalidRecordError(f"record batch has records_count={header.records_count}")
    if header.last_offset_delta + 1 != header.records_count:
        raise InvalidRecordError(
            f"lastOffsetDelta {header.last_offset_delta} disagrees with "
            f"records_count {header.records_count}"
        )
    if header.is_control:
        raise InvalidRecordError("clients may not produce control batches")
    payload = header.size - BATCH_HEADER_SIZE
    if header.compression == Compression.NONE and header.records_count * _MIN_RECORD_SIZE > payload:
        # Records are never decoded here, but an uncompressed batch cannot hold more records
        # than its payload has room for: this catches a header that claims, say, 2**31 - 1
        # records (which would move the log end offset that far) at no per-record cost.
        raise InvalidRecordError(
            f"records_count {header.records_count} cannot fit in {payload} uncompressed bytes"
        )
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(
            f"producer id {header.producer_id} sent a batch without a base sequence"
        )
    return header


def iter_batches(buf: Buffer, pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each whole batch; a truncated tail ends iteration silently."""
    end = len(buf)
    while end - pos >= BATCH_HEADER_SIZE:
        header = read_batch_header(buf, pos)
        if pos + header.size > end:
            return
        yield pos, header
        pos += header.size


def set_base_offset(buf: bytearray, pos: int, offset: int) -> None:
    """Outside the CRC, so no recomputation."""
    _I64.pack_into(buf, pos, offset)


def set_partition_leader_epoch(buf: bytearray, pos: int, epoch: int) -> None:
    """Outside the CRC, so no recomputation."""
    _I32.pack_into(buf, pos + _LEADER_EPOCH_POS, epoch)


def set_log_append_time(buf: bytearray, pos: int, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with the broker's time and recompute the CRC.

    Per-record deltas stay as produced: readers give every record maxTimestamp.
    """
    (batch_length,) = _I32.unpack_from(buf, pos + 8)
    end = pos + batch_length + BATCH_OVERHEAD
    (attributes,) = _I16.unpack_from(buf, pos + _ATTRIBUTES_POS)
    _I16.pack_into(buf, pos + _ATTRIBUTES_POS, attributes | _TIMESTAMP_TYPE_BIT)
    _I64.pack_into(buf, pos + _MAX_TIMESTAMP_POS, timestamp_ms)
    _U32.pack_into(buf, pos + _CRC_POS, crc32c(memoryview(buf)[pos + _ATTRIBUTES_POS : end]))


# --- compression ---------------------------------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_SIZE = 32 * 1024  # what the Java client (xerial snappy-java) uses
_CRAMJAM_STREAM_CODECS = {
    Compression.GZIP: cramjam.gzip,
    Compression.LZ4: cramjam.lz4,
    Compression.ZSTD: cramjam.zstd,
}


def compress(codec: Compression, data: Buffer) -> bytes:
    """Compress a records block the way the Java client does, so every consumer can read it."""
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data, level=6))
    if codec == Compression.SNAPPY:
        out = bytearray(_XERIAL_HEADER)
        view = memoryview(data)
        for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
            block = cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE])
            out += _I32.pack(len(block))
            out += block
        return bytes(out)
    if codec == Compression.LZ4:
        # Kafka's LZ4 reader (KIP-57) wants independent blocks and no content checksum.
        compressor = cramjam.lz4.Compressor(level=9, content_checksum=False, block_linked=False)
        compressor.compress(data if isinstance(data, bytes | bytearray) else bytes(data))
        return bytes(compressor.finish())
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3))
    raise UnsupportedCompressionError(f"unknown compression codec id {int(codec)}")


def decompress(codec: Compression | int, data: Buffer, *, max_output: int | None = None) -> bytes:
    """Inverse of ``compress``; snappy accepts raw blocks (librdkafka) and xerial framing.

    ``max_output`` bounds the decompressed size: a batch that would inflate beyond it raises
    CorruptRecordError before more than about twice that much memory is used.
    """
    if codec == Compression.NONE:
        return bytes(data)
    try:
        if codec == Compression.SNAPPY:
            return _snappy_decompress(data, max_output)
        module = _CRAMJAM_STREAM_CODECS.get(codec)  # type: ignore[call-overload]
        if module is None:
            raise UnsupportedCompressionError(f"unknown compression codec id {int(codec)}")
        if max_output is None:
            return bytes(module.decompress(data))
        return _bounded_decompress(module, data, max_output)
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(
            f"{Compression(codec).name} records do not decompress: {exc}"
        ) from None


def _bounded_decompress(module: object, data: Buffer, max_output: int) -> bytes:
    # The output size of a gzip/lz4/zstd frame is not reliably known up front, so decompress
    # into a bounded buffer and grow it geometrically; cramjam fails fast when it overflows.
    size = min(max_output, max(4 * len(data), 64 * 1024))
    while True:
        out = bytearray(size)
        try:
            written = module.decompress_into(data, out)  # type: ignore[attr-defined]
        except cramjam.DecompressionError:
            if size >= max_output:
                raise CorruptRecordError(
                    f"records do not decompress within {max_output} bytes"
                ) from None
            size = min(max_output, size * 4)
            continue
        del out[written:]
        return bytes(out)


def _snappy_block(block: Buffer, budget: int | None) -> bytes:
    length = cramjam.snappy.decompress_raw_len(block)
    if budget is not None and length > budget:
        raise CorruptRecordError("snappy records exceed the decompression limit")
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data: Buffer, max_output: int | None) -> bytes:
    view = memoryview(data)
    if len(view) <= 16 or bytes(view[:8]) != _XERIAL_MAGIC:
        return _snappy_block(view, max_output)
    out = bytearray()
    pos = 16  # magic, then version and compat words (ignored: some writers get them wrong)
    while pos < len(view):
        if len(view) - pos < 4:
            raise CorruptRecordError("xerial snappy block length truncated")
        (block_len,) = _I32.unpack_from(view, pos)
        pos += 4
        if block_len < 0 or block_len > len(view) - pos:
            raise CorruptRecordError(f"xerial snappy block of {block_len} bytes overruns data")
        budget = None if max_output is None else max_output - len(out)
        out += _snappy_block(view[pos : pos + block_len], budget)
        pos += block_len
    return bytes(out)


# --- records -------------------------------------------------------------------------------


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
        headers = item[2] if len(item) > 2 else ()  # type: ignore[misc]
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
    attributes = int(compression) | (_TRANSACTIONAL_BIT if is_transactional else 0)
    _HEADER.pack_into(
        body,
        0,
        base_offset,
        len(body) - BATCH_OVERHEAD,
        -1,  # partitionLeaderEpoch: the broker assigns it
        2,
        0,  # crc, filled below
        attributes,
        count - 1,
        first_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    _U32.pack_into(body, _CRC_POS, crc32c(memoryview(body)[_ATTRIBUTES_POS:]))
    return bytes(body)
