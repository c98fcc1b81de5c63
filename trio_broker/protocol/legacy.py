"""Message sets of record formats v0 and v1 (Kafka's ``LegacyRecord``), sans-IO.

Why here: Produce v0-v2 may carry them and Fetch v0-v3 must answer with them; the broker stores
only magic-v2 batches (``batch``), so these bytes exist only while being converted
(``conversion``). Layout of one entry, big-endian::

    offset i64 | size i32 | crc u32 (CRC-32 of the rest) | magic i8 | attributes i8
    | timestamp i64 (v1 only) | key (i32 length, -1 = null) | value (likewise)

Attributes: bits 0-2 the codec of a *wrapper* entry, whose value is a whole inner message set,
compressed; bit 3 (v1) LogAppendTime. Inner offsets are absolute in v0 and relative (0, 1, ...)
in v1, where the wrapper carries the absolute offset of the last inner entry.

LZ4 in v0: Kafka's first LZ4 writer computed the frame header checksum over the magic number
too. Kafka reads v0 LZ4 without checking that byte and writes it the old way; so do we.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from .compression import Buffer, Compression, compress, decompress
from .errors import CorruptRecordError, UnsupportedCompressionError

LOG_OVERHEAD = 12  # offset + size
_ENTRY_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
#: crc, magic, attributes, key length, value length (+ timestamp in v1)
RECORD_OVERHEAD_V0 = 14
RECORD_OVERHEAD_V1 = 22
_CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
NO_TIMESTAMP = -1


class LegacyEntry(NamedTuple):
    """One entry of a v0/v1 message set (a plain message or a compressed wrapper)."""

    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None

    @property
    def compression(self) -> Compression:
        codec = self.attributes & _CODEC_MASK
        if codec > Compression.LZ4:  # zstd needs magic 2 (KIP-110)
            raise UnsupportedCompressionError(
                f"compression codec {codec} in a v{self.magic} message")
        return Compression(codec)

    @property
    def log_append_time(self) -> bool:
        return self.magic > 0 and bool(self.attributes & TIMESTAMP_TYPE_BIT)


def entry_magic(buf: Buffer, pos: int = 0) -> int | None:
    """The magic byte of the entry (or v2 batch) at ``pos``, None if too short to tell."""
    return buf[pos + 16] if len(buf) - pos > 16 else None


def iter_entries(buf: Buffer) -> Iterator[LegacyEntry]:
    """The whole entries of a message set, CRC-checked; a truncated tail ends it silently, as in
    Kafka's reader. Raises CorruptRecordError for a bad size, magic or CRC."""
    view = memoryview(buf)
    pos, end = 0, len(view)
    while end - pos >= LOG_OVERHEAD:
        (size,) = _I32.unpack_from(view, pos + 8)
        if size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(f"message size {size} is below the minimum record overhead")
        if end - pos - LOG_OVERHEAD < size:
            return
        yield parse_entry(view[pos:pos + LOG_OVERHEAD + size])
        pos += LOG_OVERHEAD + size


def parse_entry(entry: memoryview) -> LegacyEntry:
    offset, size, crc, magic, attributes = _ENTRY_HEAD.unpack_from(entry, 0)
    if magic not in (0, 1):
        raise CorruptRecordError(f"message magic {magic} is not 0 or 1")
    if size < (RECORD_OVERHEAD_V1 if magic else RECORD_OVERHEAD_V0):
        raise CorruptRecordError(f"message of {size} bytes is too short for magic {magic}")
    if zlib.crc32(entry[16:]) != crc:
        raise CorruptRecordError(f"message CRC mismatch: stored {crc:#010x}")
    pos = 18
    timestamp = NO_TIMESTAMP
    if magic:
        (timestamp,) = _I64.unpack_from(entry, pos)
        pos += 8
    key, pos = _read_bytes(entry, pos)
    value, pos = _read_bytes(entry, pos)
    if pos != len(entry):
        raise CorruptRecordError(f"message has {len(entry) - pos} bytes after its value")
    return LegacyEntry(offset, magic, attributes, timestamp, key, value)


def _read_bytes(entry: memoryview, pos: int) -> tuple[bytes | None, int]:
    if len(entry) - pos < 4:
        raise CorruptRecordError("message field length runs past its end")
    (length,) = _I32.unpack_from(entry, pos)
    pos += 4
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"negative field length {length}")
        return None, pos
    if length > len(entry) - pos:
        raise CorruptRecordError(f"field of {length} bytes runs past the message")
    return bytes(entry[pos:pos + length]), pos + length


def inner_entries(wrapper: LegacyEntry, *, max_uncompressed_bytes: int | None = None,
                  ) -> list[LegacyEntry]:
    """The entries inside a compressed wrapper, with absolute offsets (Kafka's deep iterator);
    under a LogAppendTime v1 wrapper every entry takes the wrapper's timestamp."""
    codec = wrapper.compression
    data = wrapper.value or b""
    if codec == Compression.LZ4 and wrapper.magic == 0:
        data = lz4_fix_header_checksum(data)
    raw = decompress(codec, data, max_output=max_uncompressed_bytes)
    entries = list(iter_entries(raw))
    if not entries:
        raise CorruptRecordError("compressed message set holds no messages")
    if wrapper.magic > 0:
        base = wrapper.offset - entries[-1].offset
        entries = [e._replace(offset=base + e.offset) for e in entries]
        if wrapper.log_append_time:
            entries = [e._replace(timestamp=wrapper.timestamp) for e in entries]
    return entries


def write_entry(out: bytearray, offset: int, magic: int, attributes: int, timestamp: int,
                key: bytes | None, value: Buffer | None) -> None:
    """Append one entry to ``out``."""
    start = len(out)
    out += _ENTRY_HEAD.pack(offset, 0, 0, magic, attributes)
    if magic:
        out += _I64.pack(timestamp)
    for field in (key, value):
        if field is None:
            out += _I32.pack(-1)
        else:
            out += _I32.pack(len(field))
            out += field
    _I32.pack_into(out, start + 8, len(out) - start - LOG_OVERHEAD)
    struct.pack_into(">I", out, start + 12, zlib.crc32(memoryview(out)[start + 16:]))


def build_message_set(magic: int, records: Sequence[tuple[int, int, bytes | None, bytes | None]],
                      *, compression: Compression = Compression.NONE,
                      log_append_time: int | None = None) -> bytes:
    """A message set of ``(offset, timestamp, key, value)`` records (absolute offsets), as
    Kafka's v0/v1 writer lays it out: plain entries, or one compressed wrapper carrying the last
    offset, the largest timestamp (or ``log_append_time``) and the codec."""
    if magic not in (0, 1):
        raise ValueError(f"message format v{magic} is not a legacy format")
    if compression == Compression.ZSTD:
        raise UnsupportedCompressionError(f"zstd needs message format v2, not v{magic}")
    ts_bit = TIMESTAMP_TYPE_BIT if magic and log_append_time is not None else 0
    out = bytearray()
    if compression == Compression.NONE:
        for offset, timestamp, key, value in records:
            stamp = log_append_time if log_append_time is not None else timestamp
            write_entry(out, offset, magic, ts_bit, stamp, key, value)
        return bytes(out)
    base = records[0][0]
    inner = bytearray()
    for offset, timestamp, key, value in records:
        stamp = log_append_time if log_append_time is not None else timestamp
        write_entry(inner, offset - base if magic else offset, magic, ts_bit, stamp, key, value)
    payload = compress(compression, bytes(inner))
    if compression == Compression.LZ4 and magic == 0:
        payload = lz4_fix_header_checksum(payload, broken=True)
    wrapper_ts = (log_append_time if log_append_time is not None
                  else max(r[1] for r in records))
    write_entry(out, records[-1][0], magic, int(compression) | ts_bit, wrapper_ts, None, payload)
    return bytes(out)


# --- LZ4 frame header checksum (xxHash32), for Kafka's v0 LZ4 quirk -------------------------

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF
_LZ4_MAGIC = b"\x04\x22\x4d\x18"


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 (only ever run over a frame descriptor of a few bytes here)."""
    n, i = len(data), 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while i <= n - 16:
            for k in range(4):
                lane = int.from_bytes(data[i:i + 4], "little")
                v[k] = (_rotl((v[k] + lane * _P2) & _M32, 13) * _P1) & _M32
                i += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i <= n - 4:
        h = (_rotl((h + int.from_bytes(data[i:i + 4], "little") * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h = ((h ^ (h >> 15)) * _P2) & _M32
    h = ((h ^ (h >> 13)) * _P3) & _M32
    return h ^ (h >> 16)


def lz4_fix_header_checksum(frame: Buffer, *, broken: bool = False) -> bytes:
    """``frame`` with its header checksum recomputed: correctly, or (``broken``) over the magic
    number too, as Kafka writes v0 LZ4."""
    data = bytes(frame)
    if len(data) < 7 or data[:4] != _LZ4_MAGIC:
        return data  # not a frame: let the decompressor report it
    end = 6 + (8 if data[4] & 0x08 else 0)  # FLG, BD, optional content size
    if len(data) <= end:
        return data
    hc = (xxh32(data[0 if broken else 4:end]) >> 8) & 0xFF
    return data[:end] + bytes([hc]) + data[end + 1:]
