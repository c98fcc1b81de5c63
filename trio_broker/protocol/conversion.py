"""Record format conversion and recompression (Kafka's ``LogValidator``, ``RecordsUtil``), sans-IO.

Why it exists, and why only here: the broker stores magic-v2 batches and serves them as stored.
Three cases need the records themselves, and this module is the only place the broker decodes
them on a request path:

- **up-conversion** (Produce v0-v2): a v0/v1 message set becomes one v2 batch, as Kafka 3.x
  stores it: plain messages are gathered into one uncompressed batch, a compressed wrapper (the
  only entry allowed beside none) becomes one batch with the wrapper's codec; keys, values and
  v1 timestamps are kept, v0 messages have none (-1, Kafka's NO_TIMESTAMP);
- **recompression** (``compression.type`` other than ``producer``): a batch whose codec differs
  is rebuilt with the topic's codec, keeping producer id, epoch, sequence, transactional flag,
  timestamps and headers;
- **down-conversion** (Fetch v0-v3): stored batches become message sets of the format the
  version allows, one compressed wrapper per compressed batch (same codec), headers dropped.

And one check reads records too: a compacted topic refuses records without a key.

Errors: ``CorruptRecordError`` (bad CRC or framing, Kafka CORRUPT_MESSAGE),
``RecordValidationError`` (records refused one by one, Kafka INVALID_RECORD with KIP-467's
per-record errors), ``InvalidRecordError``, ``UnsupportedCompressionError``.
"""

from __future__ import annotations

from collections.abc import Sequence

from .batch import CONTROL_BIT, LOG_APPEND_TIME, iter_batches, read_batch_header
from .compression import Buffer, Compression
from .errors import InvalidRecordError, UnsupportedCompressionError
from .legacy import LOG_OVERHEAD, LegacyEntry, build_message_set, inner_entries, iter_entries
from .records import Record, build_batch, decode_records

#: a produced batch never inflates past this while being converted (a compression bomb stops here)
MAX_CONVERTED_BYTES = 64 * 1024 * 1024

#: ``compression.type`` value -> codec; "producer" keeps the producer's (Kafka's names)
TOPIC_CODECS: dict[str, Compression | None] = {
    "producer": None, "uncompressed": Compression.NONE, "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY, "lz4": Compression.LZ4, "zstd": Compression.ZSTD,
}


class RecordValidationError(InvalidRecordError):
    """Records refused individually (KIP-467): ``record_errors`` lists (batch index, message)."""

    def __init__(self, record_errors: Sequence[tuple[int, str | None]]) -> None:
        self.record_errors = list(record_errors)
        shown = ", ".join(
            f"RecordError(batchIndex={i}, message={'null' if m is None else repr(m)})"
            for i, m in self.record_errors[:3])
        super().__init__(f"One or more records have been rejected due to "
                         f"{len(self.record_errors)} record errors in total, and only showing "
                         f"the first three errors at most: [{shown}]")


def legacy_to_batch(message_set: Buffer, *, target: Compression | None = None,
                    max_uncompressed_bytes: int = MAX_CONVERTED_BYTES) -> bytes | None:
    """One v2 batch holding every message of a v0/v1 message set, or None if the set holds no
    whole message (Kafka appends nothing then). ``target`` is the topic's codec (None: the
    producer's, i.e. the wrapper's)."""
    entries = list(iter_entries(message_set))
    if not entries:
        return None
    compressed = [e for e in entries if e.attributes & 0x07]
    if compressed:
        if len(entries) > 1:
            raise InvalidRecordError("Compressed outer record has more than one batch")
        wrapper = entries[0]
        source = wrapper.compression
        records = inner_entries(wrapper, max_uncompressed_bytes=max_uncompressed_bytes)
        errors: list[tuple[int, str | None]] = []
        for index, inner in enumerate(records):
            if inner.attributes & 0x07:
                errors.append((index, "Compressed outer record should not have an inner record "
                                      "with a compression attribute set"))
            elif inner.magic != wrapper.magic:
                errors.append((index, f"Record {index}'s magic {inner.magic} does not match "
                                      f"outer magic {wrapper.magic}"))
        if errors:
            raise RecordValidationError(errors)
    else:
        source, records = Compression.NONE, entries
    codec = source if target is None else target
    return _build(records, codec)


def _build(records: Sequence[LegacyEntry], codec: Compression) -> bytes:
    return build_batch([(r.key, r.value) for r in records],
                       timestamps=[r.timestamp for r in records], compression=codec)


def recompress_batch(batch: Buffer, codec: Compression, *,
                     max_uncompressed_bytes: int = MAX_CONVERTED_BYTES) -> bytes:
    """The one batch in ``batch`` rebuilt with ``codec`` (the topic's), everything else kept:
    producer id, epoch and base sequence, the transactional flag, timestamps, headers."""
    header = read_batch_header(batch)
    records = decode_records(batch, max_uncompressed_bytes=max_uncompressed_bytes)
    return build_batch(
        [(r.key, r.value, r.headers) for r in records],
        timestamps=[r.timestamp for r in records], compression=codec,
        producer_id=header.producer_id, producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence, is_transactional=header.is_transactional)


def check_keys_for_compaction(batch: Buffer, topic_partition: str, *,
                              max_uncompressed_bytes: int = MAX_CONVERTED_BYTES) -> None:
    """Raise RecordValidationError naming every record without a key: a compacted topic keeps
    the last record per key, so Kafka refuses keyless records there (KIP-467 errors)."""
    message = f"Compacted topic cannot accept message without key in topic partition " \
              f"{topic_partition}."
    records = decode_records(batch, max_uncompressed_bytes=max_uncompressed_bytes)
    errors = [(i, message) for i, record in enumerate(records) if record.key is None]
    if errors:
        raise RecordValidationError(errors)


def batches_to_legacy(data: Buffer, magic: int, fetch_offset: int, max_bytes: int, *,
                      max_uncompressed_bytes: int = MAX_CONVERTED_BYTES) -> bytes:
    """Stored v2 batches as a v0/v1 message set (Kafka's ``RecordsUtil.downConvert``).

    Records below ``fetch_offset`` are dropped from uncompressed batches (a compressed wrapper is
    kept whole; clients skip them). Control batches are left out. Whole entries are returned
    while they fit ``max_bytes``, and always the first one, so the consumer makes progress.
    Raises UnsupportedCompressionError for a zstd batch (v0/v1 cannot carry zstd), and
    CorruptRecordError for a batch that does not decode (or inflates past the bound).
    """
    raw = data if isinstance(data, bytes) else bytes(data)
    out = bytearray()
    for pos, header in iter_batches(raw):
        if header.attributes & CONTROL_BIT:
            continue
        codec = header.compression
        if codec == Compression.ZSTD:
            raise UnsupportedCompressionError(f"zstd batches cannot be down-converted to v{magic}")
        records: list[Record] = decode_records(
            memoryview(raw)[pos:pos + header.size], max_uncompressed_bytes=max_uncompressed_bytes)
        if codec == Compression.NONE:
            records = [r for r in records if r.offset >= fetch_offset]
        if not records:
            continue
        append_time = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None
        converted = build_message_set(
            magic, [(r.offset, r.timestamp, r.key, r.value) for r in records],
            compression=codec, log_append_time=append_time)
        for entry in _entry_slices(converted):
            if out and len(out) + len(entry) > max_bytes:
                return bytes(out)
            out += entry
    return bytes(out)


def _entry_slices(message_set: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(message_set):
        size = int.from_bytes(message_set[pos + 8:pos + 12], "big")
        out.append(message_set[pos:pos + LOG_OVERHEAD + size])
        pos += LOG_OVERHEAD + size
    return out


__all__ = ["MAX_CONVERTED_BYTES", "TOPIC_CODECS", "RecordValidationError", "batches_to_legacy",
           "check_keys_for_compaction", "legacy_to_batch", "recompress_batch"]
