"""Old record formats (message format v0/v1) and their conversion to and from v2 batches.

kafka-python's own legacy writer and reader (``kafka.record``) are the independent oracle: what
it writes must up-convert to the same records, and what down-conversion writes it must read back
with the right offsets, timestamps, keys and values, for every codec a v0/v1 message may use.
"""

from __future__ import annotations

import zlib

import cramjam
import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from trio_broker.protocol.batch import (
    CONTROL_BIT,
    finish_batch,
    read_batch_header,
    set_base_offset,
    set_log_append_time,
    validate_batch,
)
from trio_broker.protocol.compression import Compression, compress
from trio_broker.protocol.conversion import (
    TOPIC_CODECS,
    RecordValidationError,
    batches_to_legacy,
    legacy_to_batch,
    recompress_batch,
)
from trio_broker.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    UnsupportedCompressionError,
)
from trio_broker.protocol.legacy import (
    build_message_set,
    iter_entries,
    lz4_fix_header_checksum,
    write_entry,
    xxh32,
)
from trio_broker.protocol.records import build_batch, decode_batches, decode_records

TS = 1_700_000_000_000
LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]
#: (magic, codec) pairs kafka-python can write and read itself: its v0 LZ4 needs the optional
#: xxhash module, so that pair is checked against the lz4 package below instead
ORACLE_PAIRS = [(m, c) for m in (0, 1) for c in LEGACY_CODECS
                if (m, c) != (0, Compression.LZ4)]
RECORDS = [(b"k0", b"v0"), (None, b"value-1" * 20), (b"k2", None), (b"k3", b"")]


def kafka_python_set(magic: int, codec: Compression, records=RECORDS, *, base_ts: int = TS,
                     offsets: list[int] | None = None) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec),
                                       batch_size=1 << 20)
    for i, (key, value) in enumerate(records):
        builder.append(i if offsets is None else offsets[i], base_ts + i, key, value)
    return bytes(builder.build())


def kafka_python_read(message_set: bytes) -> list[tuple[int, int | None, bytes | None,
                                                        bytes | None]]:
    out = []
    reader = MemoryRecords(message_set)
    while (batch := reader.next_batch()) is not None:
        out += [(r.offset, r.timestamp, r.key, r.value) for r in batch]
    return out


def test_xxh32_known_vectors_and_lz4_header_checksum() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F
    frame = compress(Compression.LZ4, b"x" * 1000)
    assert lz4_fix_header_checksum(frame) == frame  # our writer's checksum is the right one
    broken = lz4_fix_header_checksum(frame, broken=True)
    assert broken != frame
    assert lz4_fix_header_checksum(broken) == frame


@pytest.mark.parametrize(("magic", "codec"), ORACLE_PAIRS, ids=lambda x: str(x))
def test_kafka_python_message_sets_up_convert_to_one_v2_batch(magic: int,
                                                              codec: Compression) -> None:
    batch = legacy_to_batch(kafka_python_set(magic, codec))
    assert batch is not None
    header = validate_batch(batch, max_message_bytes=1 << 20)
    assert header.compression == codec  # the producer's codec is kept
    assert header.records_count == len(RECORDS)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)
    records = decode_records(batch)
    assert [(r.key, r.value) for r in records] == RECORDS
    assert [r.offset for r in records] == [0, 1, 2, 3]
    expected_ts = [TS + i for i in range(4)] if magic else [-1] * 4  # v0 has no timestamps
    assert [r.timestamp for r in records] == expected_ts


def test_up_conversion_to_the_topic_codec_and_v1_offsets_from_any_producer() -> None:
    # a wrapper whose inner offsets are not 0..n-1 (older clients): renumbered, not refused
    message_set = kafka_python_set(1, Compression.GZIP, offsets=[5, 6, 9, 10])
    batch = legacy_to_batch(message_set, target=Compression.ZSTD)
    assert batch is not None
    assert read_batch_header(batch).compression == Compression.ZSTD
    assert [r.offset for r in decode_records(batch)] == [0, 1, 2, 3]
    plain = legacy_to_batch(kafka_python_set(0, Compression.NONE), target=Compression.SNAPPY)
    assert plain is not None
    assert read_batch_header(plain).compression == Compression.SNAPPY
    assert TOPIC_CODECS["producer"] is None
    assert TOPIC_CODECS["uncompressed"] == Compression.NONE


def test_up_conversion_refusals() -> None:
    good = kafka_python_set(1, Compression.NONE)
    corrupt = bytearray(good)
    corrupt[30] ^= 0xFF  # inside the first message, covered by its CRC-32
    with pytest.raises(CorruptRecordError, match="CRC"):
        legacy_to_batch(bytes(corrupt))
    two_wrappers = kafka_python_set(1, Compression.GZIP) * 2
    with pytest.raises(InvalidRecordError, match="more than one batch"):
        legacy_to_batch(two_wrappers)
    assert legacy_to_batch(good[:10]) is None  # no whole message: nothing to append
    assert legacy_to_batch(good + good[:20]) is not None  # a torn tail is dropped, as Kafka does
    bad_magic = bytearray(good)
    bad_magic[16] = 5
    with pytest.raises(CorruptRecordError, match="magic"):
        legacy_to_batch(bytes(bad_magic))
    zstd_wrapper = bytearray()
    write_entry(zstd_wrapper, 0, 1, int(Compression.ZSTD), TS, None, b"whatever")
    with pytest.raises(UnsupportedCompressionError):
        legacy_to_batch(bytes(zstd_wrapper))


def test_nested_compression_is_refused_record_by_record() -> None:
    inner = bytearray()
    write_entry(inner, 0, 1, 0, TS, b"a", b"plain")
    write_entry(inner, 1, 1, int(Compression.GZIP), TS, None, b"nested")
    write_entry(inner, 2, 0, 0, TS, b"c", b"wrong magic")
    wrapper = bytearray()
    write_entry(wrapper, 2, 1, int(Compression.GZIP), TS, None,
                bytes(cramjam.gzip.compress(bytes(inner))))
    with pytest.raises(RecordValidationError) as caught:
        legacy_to_batch(bytes(wrapper))
    errors = caught.value.record_errors
    assert [index for index, _ in errors] == [1, 2]
    assert "compression attribute" in str(errors[0][1])
    assert "2 record errors" in str(caught.value)


@pytest.mark.parametrize(("magic", "codec"), ORACLE_PAIRS, ids=lambda x: str(x))
def test_our_message_sets_read_back_by_kafka_python(magic: int, codec: Compression) -> None:
    records = [(100 + i, TS + i, k, v) for i, (k, v) in enumerate(RECORDS)]
    message_set = build_message_set(magic, records, compression=codec)
    read = kafka_python_read(message_set)
    assert [r[0] for r in read] == [100, 101, 102, 103]
    assert [(r[2], r[3]) for r in read] == RECORDS
    if magic:
        assert [r[1] for r in read] == [TS + i for i in range(4)]
    entries = list(iter_entries(message_set))  # our reader agrees, CRC-32 and all
    assert len(entries) == (4 if codec == Compression.NONE else 1)
    if codec != Compression.NONE:
        assert entries[0].offset == 103  # the wrapper carries the last offset
        assert entries[0].timestamp == (TS + 3 if magic else -1)


def _stored(records, *, base_offset: int, codec: Compression = Compression.NONE,
            epoch: int = 7) -> bytes:
    raw = bytearray(build_batch(records, timestamps=[TS + i for i in range(len(records))],
                                compression=codec))
    set_base_offset(raw, 0, base_offset)
    return bytes(raw)


@pytest.mark.parametrize(("magic", "codec"), ORACLE_PAIRS, ids=lambda x: str(x))
def test_down_conversion_read_by_kafka_python(magic: int, codec: Compression) -> None:
    stored = _stored(RECORDS[:2], base_offset=10, codec=codec) + \
        _stored(RECORDS[2:], base_offset=12, codec=codec)
    converted = batches_to_legacy(stored, magic, fetch_offset=11, max_bytes=1 << 20)
    read = kafka_python_read(converted)
    if codec == Compression.NONE:  # records before the fetch offset are left out
        assert [r[0] for r in read] == [11, 12, 13]
        assert [(r[2], r[3]) for r in read] == RECORDS[1:]
    else:  # a compressed batch stays whole: the client skips what it did not ask for
        assert [r[0] for r in read] == [10, 11, 12, 13]
        assert [(r[2], r[3]) for r in read] == RECORDS
    if magic:
        assert read[-1][1] == TS + 1  # the second batch's second record


def test_down_conversion_round_trips_through_up_conversion() -> None:
    for magic, codec in ORACLE_PAIRS:
        legacy = kafka_python_set(magic, codec)
        batch = legacy_to_batch(legacy)
        assert batch is not None
        again = batches_to_legacy(batch, magic, 0, 1 << 20)
        assert [r[2:] for r in kafka_python_read(again)] == \
            [r[2:] for r in kafka_python_read(legacy)]


def test_v0_lz4_uses_kafkas_old_header_checksum_both_ways() -> None:
    import lz4.frame

    inner = bytearray()
    for i, (key, value) in enumerate(RECORDS):
        write_entry(inner, i, 0, 0, -1, key, value)
    frame = lz4.frame.compress(bytes(inner), block_linked=False, content_checksum=False)
    old_style = lz4_fix_header_checksum(frame, broken=True)  # as Kafka 0.8/0.9 wrote it
    wrapper = bytearray()
    write_entry(wrapper, 3, 0, int(Compression.LZ4), -1, None, old_style)
    batch = legacy_to_batch(bytes(wrapper))
    assert batch is not None
    assert [(r.key, r.value) for r in decode_records(batch)] == RECORDS
    # and down-conversion to v0 writes the old checksum, which the lz4 package refuses until
    # it is put right (Kafka's v0 readers skip that byte)
    converted = batches_to_legacy(batch, 0, 0, 1 << 20)
    [entry] = list(iter_entries(converted))
    assert entry.value is not None
    assert lz4_fix_header_checksum(entry.value, broken=True) == entry.value
    assert lz4.frame.decompress(lz4_fix_header_checksum(entry.value)) == bytes(inner)


def test_down_conversion_keeps_log_append_time_skips_control_and_refuses_zstd() -> None:
    stored = bytearray(_stored(RECORDS, base_offset=0))
    set_log_append_time(stored, 0, TS + 999)
    read = kafka_python_read(batches_to_legacy(bytes(stored), 1, 0, 1 << 20))
    assert [r[1] for r in read] == [TS + 999] * 4
    assert next(iter_entries(batches_to_legacy(bytes(stored), 1, 0, 1 << 20))).log_append_time
    control = bytearray(61)
    control += b"\x00" * 20
    finish_batch(control, attributes=CONTROL_BIT, records_count=1, base_timestamp=TS,
                 max_timestamp=TS)
    assert batches_to_legacy(bytes(control), 1, 0, 1 << 20) == b""
    with pytest.raises(UnsupportedCompressionError):
        batches_to_legacy(_stored(RECORDS, base_offset=0, codec=Compression.ZSTD), 1, 0, 1 << 20)


def test_down_conversion_honours_the_byte_limit_but_returns_one_entry() -> None:
    stored = b"".join(_stored([(b"k", b"v" * 100)], base_offset=i) for i in range(5))
    one = batches_to_legacy(stored, 1, 0, max_bytes=10)
    assert [r[0] for r in kafka_python_read(one)] == [0]
    entry = len(one)
    some = batches_to_legacy(stored, 1, 0, max_bytes=3 * entry + entry // 2)
    assert [r[0] for r in kafka_python_read(some)] == [0, 1, 2]


def test_recompression_keeps_producer_state_timestamps_and_headers() -> None:
    batch = build_batch([(b"k", b"v" * 50, [("h", b"x")]), (None, b"w", [])],
                        timestamps=[TS, TS + 9], compression=Compression.GZIP, producer_id=42,
                        producer_epoch=3, base_sequence=17, is_transactional=True)
    for codec in (Compression.NONE, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        again = recompress_batch(batch, codec)
        header = validate_batch(again, max_message_bytes=1 << 20)
        assert header.compression == codec
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 17)
        assert header.is_transactional
        assert (header.base_timestamp, header.max_timestamp) == (TS, TS + 9)
        [(_, records)] = list(decode_batches(again))
        assert [(r.key, r.value, r.headers, r.timestamp) for r in records] == [
            (b"k", b"v" * 50, (("h", b"x"),), TS), (None, b"w", (), TS + 9)]


def test_crc32_is_plain_crc32_not_crc32c() -> None:
    message_set = build_message_set(1, [(0, TS, b"k", b"v")])
    stored_crc = int.from_bytes(message_set[12:16], "big")
    assert stored_crc == zlib.crc32(message_set[16:])


def test_compacted_topics_need_keys_on_every_record() -> None:
    from trio_broker.protocol.conversion import check_keys_for_compaction

    check_keys_for_compaction(build_batch([(b"a", b"1"), (b"b", None)]), "t-0")  # tombstones ok
    with pytest.raises(RecordValidationError) as caught:
        check_keys_for_compaction(build_batch([(b"a", b"1"), (None, b"2"), (None, b"3")],
                                              compression=Compression.GZIP), "t-0")
    assert [i for i, _ in caught.value.record_errors] == [1, 2]
    assert caught.value.record_errors[0][1] == (
        "Compacted topic cannot accept message without key in topic partition t-0.")
