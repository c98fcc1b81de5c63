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
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from .compression import Buffer, Compression
from .crc import crc32c
from .errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)

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
#: codec id -> Compression: an index, not an enum call (every produced batch asks)
_CODECS = tuple(Compression)
_TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

_MAX_SEQUENCE = 2**31 - 1
CREATE_TIME = 0
LOG_APPEND_TIME = 1


class BatchHeader(NamedTuple):
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
        if codec >= len(_CODECS):
            raise UnsupportedCompressionError(f"unknown compression codec id {codec}")
        return _CODECS[codec]

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return LOG_APPEND_TIME if self.attributes & _TIMESTAMP_TYPE_BIT else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

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
#: read from the enum once (on Python 3.11 reading a member through its class costs several
#: times the comparison made with it for every batch)
_NONE = Compression.NONE


def validate_batch(buf: Buffer, *, max_message_bytes: int) -> BatchHeader:
    """Check one produced batch the way Kafka's LogValidator does, without decompressing.

    ``buf`` must hold exactly one batch (Produce v3+ carries one batch per partition).
    """
    header = read_batch_header(buf)
    size = header.batch_length + BATCH_OVERHEAD
    if size != len(buf):
        if size > len(buf):
            raise CorruptRecordError(
                f"record batch declares {size} bytes but {len(buf)} were sent"
            )
        raise InvalidRecordError(
            f"expected exactly one record batch, found {len(buf) - size} trailing bytes"
        )
    if size > max_message_bytes:
        raise RecordTooLargeError(
            f"record batch of {size} bytes exceeds max.message.bytes={max_message_bytes}"
        )
    verify_crc(buf, 0, header)
    compression = header.compression  # raises UnsupportedCompressionError for ids 5..7
    if header.records_count <= 0:
        raise InvalidRecordError(f"record batch has records_count={header.records_count}")
    if header.last_offset_delta + 1 != header.records_count:
        raise InvalidRecordError(
            f"lastOffsetDelta {header.last_offset_delta} disagrees with "
            f"records_count {header.records_count}"
        )
    if header.attributes & CONTROL_BIT:
        raise InvalidRecordError("clients may not produce control batches")
    payload = size - BATCH_HEADER_SIZE
    if compression is _NONE and header.records_count * _MIN_RECORD_SIZE > payload:
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


def finish_batch(body: bytearray, *, attributes: int, records_count: int, base_timestamp: int,
                 max_timestamp: int, base_offset: int = 0, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1,
                 partition_leader_epoch: int = -1, last_offset_delta: int | None = None) -> None:
    """Pack the header into the first 61 bytes of ``body`` (the records follow) and its CRC.

    ``last_offset_delta`` defaults to ``records_count - 1``; the log cleaner keeps a rewritten
    batch's original one (its offsets have gaps).
    """
    _HEADER.pack_into(
        body,
        0,
        base_offset,
        len(body) - BATCH_OVERHEAD,
        partition_leader_epoch,
        2,
        0,  # crc, filled below
        attributes,
        records_count - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    _U32.pack_into(body, _CRC_POS, crc32c(memoryview(body)[_ATTRIBUTES_POS:]))
