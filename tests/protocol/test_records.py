import struct

import aiokafka.record.default_records as aiokafka_records
import cramjam
import kafka.record.default_records as kafka_python_records
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_broker.protocol.batch import (
    BATCH_HEADER_SIZE,
    iter_batches,
    read_batch_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batch,
    verify_crc,
)
from trio_broker.protocol.compression import Compression, compress, decompress
from trio_broker.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)
from trio_broker.protocol.records import Record, build_batch, decode_batches, decode_records

OUR_ERRORS = (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)

# kafka-protocol.md §4.3: kafka-python's builder, pid 1000, epoch 0, base sequence 5.
REFERENCE_VECTOR = bytes.fromhex(
    "0000000000000000 00000047 00000000 02 ac9c49bc 0000 00000001"
    "0000018bcfe56800 0000018bcfe56805 00000000000003e8 0000 00000005 00000002"
    "18000000026b02760202680278 10000a0201047676 00"
)
TS = 1_700_000_000_000


def _reference_batch() -> bytes:
    return build_batch(
        [(b"k", b"v", [("h", b"x")]), (None, b"vv")],
        timestamps=[TS, TS + 5],
        producer_id=1000,
        producer_epoch=0,
        base_sequence=5,
    )


def _patch(batch: bytes, fmt: str, pos: int, value: int, *, fix_crc: bool = True) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(fmt, buf, pos, value)
    if fix_crc:
        struct.pack_into(">I", buf, 17, crc32c(buf[21:]))
    return bytes(buf)


def _with_payload(batch: bytes, codec: int, payload: bytes) -> bytes:
    """Replace the records block, set the codec bits and fix length and CRC."""
    buf = bytearray(batch[:BATCH_HEADER_SIZE]) + payload
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    (attributes,) = struct.unpack_from(">h", buf, 21)
    struct.pack_into(">h", buf, 21, (attributes & ~7) | codec)
    struct.pack_into(">I", buf, 17, crc32c(buf[21:]))
    return bytes(buf)


def test_reference_vector_byte_exact() -> None:
    ours = bytearray(_reference_batch())
    # We write partitionLeaderEpoch -1 like the Java producer; kafka-python writes 0. The field
    # is outside the CRC, so every other byte must already match.
    assert ours[12:16] == b"\xff\xff\xff\xff"
    set_partition_leader_epoch(ours, 0, 0)
    assert bytes(ours) == REFERENCE_VECTOR


def test_reference_vector_header_and_records() -> None:
    header = validate_batch(REFERENCE_VECTOR, max_message_bytes=1_000_000)
    assert header.size == len(REFERENCE_VECTOR) == 83
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (1000, 0, 5)
    assert (header.last_offset, header.next_offset, header.last_sequence) == (1, 2, 6)
    assert header.compression is Compression.NONE
    assert header.timestamp_type == 0
    assert not header.is_transactional
    assert not header.is_control
    assert decode_records(REFERENCE_VECTOR) == [
        Record(0, TS, b"k", b"v", (("h", b"x"),)),
        Record(1, TS + 5, None, b"vv", ()),
    ]


def test_last_sequence_wraps() -> None:
    batch = build_batch(
        [(None, b"a")] * 3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2
    )
    assert read_batch_header(batch).last_sequence == 0
    assert read_batch_header(build_batch([(None, b"a")])).last_sequence == -1


@pytest.mark.parametrize("codec", list(Compression))
def test_round_trip_all_codecs(codec: Compression) -> None:
    records = [
        (
            b"key-%d" % i,
            None if i % 7 == 3 else b"value-%d-" % i * (i % 50),
            [("h", b"x"), ("n", None)],
        )
        for i in range(300)
    ]
    timestamps = [TS + i * 3 - (i % 5) * 100 for i in range(300)]
    batch = build_batch(records, timestamps=timestamps, compression=codec, base_offset=1000)
    header = validate_batch(batch, max_message_bytes=10_000_000)
    assert header.compression is codec
    assert header.max_timestamp == max(timestamps)
    decoded = decode_records(batch)
    assert [r.offset for r in decoded] == list(range(1000, 1300))
    assert [r.timestamp for r in decoded] == timestamps
    assert [(r.key, r.value, list(r.headers)) for r in decoded] == records


def test_large_fields_and_default_timestamp() -> None:
    value = bytes(range(256)) * 400
    batch = build_batch([(None, value, [("k" * 300, value)])], base_timestamp_ms=42)
    [record] = decode_records(batch)
    assert record == Record(0, 42, None, value, (("k" * 300, value),))


def test_build_rejects_empty_batch() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        build_batch([])


def test_rewrites_outside_crc_keep_it_valid() -> None:
    buf = bytearray(_reference_batch())
    set_base_offset(buf, 0, 12345)
    set_partition_leader_epoch(buf, 0, 7)
    header = validate_batch(buf, max_message_bytes=1000)
    assert (header.base_offset, header.partition_leader_epoch) == (12345, 7)
    assert [r.offset for r in decode_records(buf)] == [12345, 12346]


def test_log_append_time_sets_bit_and_max_timestamp() -> None:
    buf = bytearray(_reference_batch())
    set_log_append_time(buf, 0, 1_800_000_000_000)
    header = validate_batch(buf, max_message_bytes=1000)  # CRC recomputed
    assert header.timestamp_type == 1
    assert header.max_timestamp == 1_800_000_000_000
    assert header.base_timestamp == TS
    assert {r.timestamp for r in decode_records(buf)} == {1_800_000_000_000}


def test_iter_and_decode_batches_stop_at_truncated_tail() -> None:
    batches = [build_batch([(None, b"%d" % i)], base_offset=i) for i in range(3)]
    payload = b"".join(batches)
    for cut in (0, 1, 30, BATCH_HEADER_SIZE, len(batches[2]) - 1):
        buf = payload + batches[0][:cut]
        positions = [pos for pos, _ in iter_batches(buf)]
        assert positions == [0, len(batches[0]), len(batches[0]) * 2]
        decoded = [records[0].value for _, records in decode_batches(buf)]
        assert decoded == [b"0", b"1", b"2"]


def test_validate_length_checks() -> None:
    batch = _reference_batch()
    with pytest.raises(CorruptRecordError, match="needs 61 bytes"):
        validate_batch(batch[:60], max_message_bytes=1000)
    with pytest.raises(CorruptRecordError, match="declares 83 bytes"):
        validate_batch(batch[:-1], max_message_bytes=1000)
    with pytest.raises(InvalidRecordError, match="exactly one record batch"):
        validate_batch(batch + batch, max_message_bytes=1000)
    with pytest.raises(CorruptRecordError, match="below the header size"):
        validate_batch(_patch(batch, ">i", 8, 10, fix_crc=False), max_message_bytes=1000)
    with pytest.raises(CorruptRecordError, match="magic 1"):
        validate_batch(_patch(batch, ">b", 16, 1, fix_crc=False), max_message_bytes=1000)
    with pytest.raises(RecordTooLargeError, match=r"max\.message\.bytes=82"):
        validate_batch(batch, max_message_bytes=82)


def test_validate_crc() -> None:
    batch = bytearray(_reference_batch())
    batch[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        validate_batch(batch, max_message_bytes=1000)


@pytest.mark.parametrize(
    ("fmt", "pos", "value", "error", "match"),
    [
        (">h", 21, 5, UnsupportedCompressionError, "codec id 5"),
        (">h", 21, 7, UnsupportedCompressionError, "codec id 7"),
        (">i", 57, 3, InvalidRecordError, "disagrees with records_count 3"),
        (">i", 23, 0, InvalidRecordError, "lastOffsetDelta 0"),
        (">i", 57, 0, InvalidRecordError, "records_count=0"),
        (">h", 21, 0x20, InvalidRecordError, "control batches"),
        (">i", 53, -1, InvalidRecordError, "without a base sequence"),
    ],
)
def test_validate_semantic_checks(
    fmt: str, pos: int, value: int, error: type[Exception], match: str
) -> None:
    batch = _patch(_reference_batch(), fmt, pos, value)
    with pytest.raises(error, match=match):
        validate_batch(batch, max_message_bytes=1000)


def test_validate_never_decompresses() -> None:
    # A gzip batch whose payload is garbage passes validation (CRC is over compressed bytes).
    batch = _with_payload(_reference_batch(), Compression.GZIP, b"not gzip at all")
    assert validate_batch(batch, max_message_bytes=1000).compression is Compression.GZIP
    with pytest.raises(CorruptRecordError, match="GZIP records do not decompress"):
        decode_records(batch)


def test_snappy_raw_block_and_xerial_both_decode() -> None:
    plain = build_batch([(b"k%d" % i, b"v" * i) for i in range(100)], base_timestamp_ms=1)
    records_block = plain[BATCH_HEADER_SIZE:]
    expected = decode_records(plain)
    raw = _with_payload(
        plain, Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(records_block))
    )
    assert decode_records(raw) == expected
    xerial = compress(Compression.SNAPPY, records_block)
    assert xerial.startswith(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")
    assert decode_records(_with_payload(plain, Compression.SNAPPY, xerial)) == expected
    # Multi-block xerial stream (32 KiB blocks, like snappy-java).
    big = bytes(range(256)) * 1000
    assert decompress(Compression.SNAPPY, compress(Compression.SNAPPY, big)) == big


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_compression_bomb_is_bounded(codec: Compression) -> None:
    bomb = compress(codec, bytes(32 * 1024 * 1024))
    batch = _with_payload(_reference_batch(), codec, bomb)
    with pytest.raises(CorruptRecordError):
        decode_records(batch, max_uncompressed_bytes=1024 * 1024)
    assert len(decompress(codec, bomb, max_output=32 * 1024 * 1024)) == 32 * 1024 * 1024


def test_varint_longer_than_ten_bytes_is_corrupt() -> None:
    plain = build_batch([(None, b"v")], base_timestamp_ms=1)
    payload = b"\xff" * 11 + b"\x00"
    with pytest.raises(CorruptRecordError, match="longer than 10 bytes"):
        decode_records(_with_payload(plain, 0, payload))


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_kafka_python_builder_decodes_with_ours(codec: Compression) -> None:
    builder = kafka_python_records.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=7,
        producer_epoch=1,
        base_sequence=0,
        batch_size=1_000_000,
    )
    for i in range(50):
        builder.append(i, TS + i, b"k%d" % i if i % 2 else None, b"v" * i, [("h", b"%d" % i)])
    batch = bytes(builder.build())
    header = validate_batch(batch, max_message_bytes=1_000_000)
    assert (header.producer_id, header.records_count, header.compression) == (7, 50, codec)
    decoded = decode_records(batch)
    assert decoded[9] == Record(9, TS + 9, b"k9", b"v" * 9, (("h", b"9"),))
    assert decoded[10].key is None


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_ours_decode_with_kafka_python(codec: Compression) -> None:
    buf = bytearray(
        build_batch(
            [(b"k", b"v" * 100, [("h", None)]), (None, None, [])],
            timestamps=[TS, TS + 1],
            compression=codec,
            base_offset=77,
        )
    )
    set_log_append_time(buf, 0, TS + 99)
    batch = kafka_python_records.DefaultRecordBatch(bytes(buf))
    assert batch.validate_crc()
    records = list(batch)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == [
        (77, TS + 99, b"k", b"v" * 100),
        (78, TS + 99, None, None),
    ]
    assert records[0].headers == [("h", None)]


@pytest.mark.parametrize("codec", list(Compression))
def test_aiokafka_compatibility_all_codecs(codec: Compression) -> None:
    builder = aiokafka_records.DefaultRecordBatchBuilder(2, int(codec), False, -1, -1, -1, 10**6)
    for i in range(40):
        builder.append(i, TS + i, b"k%d" % i, b"value" * i, [("h", b"x")])
    theirs = bytes(builder.build())
    assert [r.value for r in decode_records(theirs)] == [b"value" * i for i in range(40)]

    ours = build_batch(
        [(b"k%d" % i, b"value" * i, [("h", b"x")]) for i in range(40)],
        timestamps=[TS + i for i in range(40)],
        compression=codec,
    )
    batch = aiokafka_records.DefaultRecordBatch(ours)
    assert batch.validate_crc()
    assert [(r.offset, r.timestamp, r.value) for r in batch] == [
        (i, TS + i, b"value" * i) for i in range(40)
    ]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes_raise_only_our_errors(data: bytes) -> None:
    for call in (
        lambda: validate_batch(data, max_message_bytes=10_000),
        lambda: decode_records(data, max_uncompressed_bytes=100_000),
        lambda: list(decode_batches(data)),
    ):
        try:
            call()
        except OUR_ERRORS:
            pass


_SEED_BATCHES = [
    build_batch(
        [(b"key", b"value" * 3, [("h", b"x")]), (None, b"")] * 3,
        compression=c,
        base_timestamp_ms=TS,
    )
    for c in Compression
]


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.sampled_from(_SEED_BATCHES),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6),
    st.booleans(),
)
def test_mutated_batches_raise_only_our_errors(
    batch: bytes, mutations: list[tuple[int, int]], fix_crc: bool
) -> None:
    buf = bytearray(batch)
    for pos, byte in mutations:
        buf[pos % len(buf)] = byte
    if fix_crc:  # reach the record parser and the decompressors, not just the CRC check
        struct.pack_into(">I", buf, 17, crc32c(buf[21:]))
    for call in (
        lambda: validate_batch(buf, max_message_bytes=10_000),
        lambda: decode_records(buf, max_uncompressed_bytes=100_000),
    ):
        try:
            call()
        except OUR_ERRORS:
            pass


def test_verify_crc_reports_truncation() -> None:
    batch = _reference_batch()
    header = read_batch_header(batch)
    verify_crc(batch, 0, header)
    with pytest.raises(CorruptRecordError, match="truncated"):
        verify_crc(batch[:-1], 0, header)


def test_uncompressed_batch_claiming_more_records_than_fit_is_invalid():
    import struct as _struct

    from trio_broker.protocol.batch import BATCH_HEADER_SIZE as _HDR
    from trio_broker.protocol.batch import validate_batch as _validate
    from trio_broker.protocol.errors import InvalidRecordError as _Invalid
    from trio_broker.protocol.records import build_batch as _build

    batch = bytearray(_build([(None, None, ())]))  # exactly one 7-byte record
    assert len(batch) - _HDR == 7
    _validate(batch, max_message_bytes=1 << 20)
    # Claim 2**31 - 1 records consistently (lastOffsetDelta too) and fix up the CRC.
    _struct.pack_into(">i", batch, 23, 2**31 - 2)
    _struct.pack_into(">i", batch, 57, 2**31 - 1)
    from crc32c import crc32c

    _struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    with pytest.raises(_Invalid, match="cannot fit"):
        _validate(batch, max_message_bytes=1 << 20)
