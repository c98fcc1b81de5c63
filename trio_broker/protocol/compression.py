"""Record batch compression: the five codecs of the batch attributes, as Kafka's clients write them.

Why a module of its own: the broker never compresses or decompresses on its produce or fetch
path (batches are bytes), but consumers, tools, the log cleaner and old-format conversion do, and
they must all accept what every client writes: snappy both raw (librdkafka) and in xerial framing
(Java, kafka-python), LZ4 frames without block linking (KIP-57). Decompression is bounded, so a
compression bomb costs at most about twice the limit in memory.
"""

from __future__ import annotations

import enum
import struct
from typing import TypeAlias

from .errors import CorruptRecordError, UnsupportedCompressionError

Buffer: TypeAlias = bytes | bytearray | memoryview
_I32 = struct.Struct(">i")


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_SIZE = 32 * 1024  # what the Java client (xerial snappy-java) uses
_STREAM_CODEC_NAMES = {Compression.GZIP: "gzip", Compression.LZ4: "lz4", Compression.ZSTD: "zstd"}

# cramjam is imported by the first batch compressed or decompressed, not with this module: a
# broker passes batches on as bytes, and most of its starts never need a codec.


def compress(codec: Compression, data: Buffer) -> bytes:
    """Compress a records block the way the Java client does, so every consumer can read it."""
    if codec == Compression.NONE:
        return bytes(data)
    import cramjam

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
    import cramjam

    try:
        if codec == Compression.SNAPPY:
            return _snappy_decompress(data, max_output)
        name = _STREAM_CODEC_NAMES.get(codec)  # type: ignore[call-overload]
        if name is None:
            raise UnsupportedCompressionError(f"unknown compression codec id {int(codec)}")
        module = getattr(cramjam, name)
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
    import cramjam

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
    import cramjam

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
