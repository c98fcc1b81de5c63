"""Produce at every version, by raw requests: what Kafka answers, and what ends up in the log."""

from __future__ import annotations

import pytest

from tests.data_path.raw import TS, legacy_set, produce_body, the_partition
from tests.wire import RawClient
from trio_broker.protocol.api_keys import SUPPORTED_VERSIONS, ApiKey
from trio_broker.protocol.batch import iter_batches, read_batch_header
from trio_broker.protocol.compression import Compression
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.legacy import build_message_set
from trio_broker.protocol.records import build_batch, decode_batches

VERSIONS = range(SUPPORTED_VERSIONS[ApiKey.Produce].min, SUPPORTED_VERSIONS[ApiKey.Produce].max + 1)
VALUES = [b"v-%d" % i * 10 for i in range(5)]


def _records_for(version: int, codec: Compression = Compression.NONE) -> bytes:
    """What a client of that version sends: message format v0 (Produce v0-v1), v1 (v2), v2."""
    if version <= 2:
        return legacy_set(0 if version <= 1 else 1, codec, VALUES)
    return build_batch([(b"key-%d" % i, v) for i, v in enumerate(VALUES)],
                       timestamps=[TS + i for i in range(len(VALUES))], compression=codec)


def _stored(broker, topic: str, partition: int = 0) -> bytes:
    """Every stored batch (a read returns one segment's worth; old timestamps roll segments)."""
    log = broker.state.logs.get_log(topic, partition)
    out, offset = b"", log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        out += data
        offset = [h for _, h in iter_batches(data)][-1].next_offset
    return out


async def _produce(broker, version: int, topic: str, records: bytes | None, **kwargs):
    client = await RawClient.connect(broker.host, broker.port)
    try:
        if version >= 13 and "topic_id" not in kwargs:
            kwargs["topic_id"] = broker.state.logs.topic_id(topic)
        body = produce_body(version, topic if version < 13 else "", records, **kwargs)
        return the_partition(await client.request(ApiKey.Produce, version, body=body))
    finally:
        await client.aclose()


@pytest.mark.parametrize("version", VERSIONS)
async def test_every_version_stores_one_v2_batch_stamped_with_the_leader_epoch(trio_broker,
                                                                               version):
    topic = f"p{version}"
    trio_broker.state.logs.create_topic(topic, 1, {})
    for round_ in range(2):
        part = await _produce(trio_broker, version, topic, _records_for(version))
        assert part.error_code == 0
        assert part.base_offset == round_ * len(VALUES)
        assert part.log_append_time_ms == -1
        assert part.log_start_offset == (0 if version >= 5 else -1)  # v5+ carries it
    stored = _stored(trio_broker, topic)
    batches = list(decode_batches(stored))
    assert len(batches) == 2  # one v2 batch per request, whatever the format sent
    for header, records in batches:
        assert header.magic == 2
        assert header.partition_leader_epoch == 0  # the topic's first leadership
        assert [r.value for r in records] == VALUES
        assert [r.key for r in records] == [b"key-%d" % i for i in range(len(VALUES))]
        # message format v0 has no timestamps (Kafka stores -1); v1 and v2 keep them
        expected = [-1] * 5 if version <= 1 else [TS + i for i in range(5)]
        assert [r.timestamp for r in records] == expected


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4],
                         ids=lambda c: c.name)
@pytest.mark.parametrize("magic", [0, 1])
async def test_old_compressed_message_sets_keep_their_codec(trio_broker, magic, codec):
    topic = f"legacy-{magic}-{codec.name}"
    trio_broker.state.logs.create_topic(topic, 1, {})
    version = 0 if magic == 0 else 2
    if (magic, codec) == (0, Compression.LZ4):  # kafka-python needs xxhash for this one
        records = build_message_set(0, [(i, -1, None, v) for i, v in enumerate(VALUES)],
                                    compression=codec)
    else:
        records = legacy_set(magic, codec, VALUES)
    part = await _produce(trio_broker, version, topic, records)
    assert part.error_code == 0
    [(header, stored)] = list(decode_batches(_stored(trio_broker, topic)))
    assert header.compression == codec  # Kafka 3.x keeps the wrapper's codec
    assert [r.value for r in stored] == VALUES


async def test_old_versions_take_v2_batches_and_new_ones_refuse_old_formats(trio_broker):
    trio_broker.state.logs.create_topic("mixed", 1, {})
    v2_batch = _records_for(7)
    assert (await _produce(trio_broker, 2, "mixed", v2_batch)).error_code == 0
    old = legacy_set(1, Compression.NONE, VALUES)
    part = await _produce(trio_broker, 3, "mixed", old)
    assert part.error_code == ErrorCode.INVALID_RECORD  # v3+: "only ... magic version 2"
    # a v0-v2 request without a whole message appends nothing and is no error (as Kafka)
    part = await _produce(trio_broker, 1, "mixed", old[:20])
    assert (part.error_code, part.base_offset) == (0, -1)
    corrupt = bytearray(legacy_set(1, Compression.NONE, VALUES))
    corrupt[40] ^= 1
    assert (await _produce(trio_broker, 2, "mixed", bytes(corrupt))).error_code == \
        ErrorCode.CORRUPT_MESSAGE
    two_wrappers = legacy_set(1, Compression.GZIP, VALUES) * 2
    assert (await _produce(trio_broker, 2, "mixed", two_wrappers)).error_code == \
        ErrorCode.INVALID_RECORD
    assert (await _produce(trio_broker, 7, "mixed", None)).error_code == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("version", [3, 6, 7, 13])
async def test_zstd_needs_produce_v7(trio_broker, version):
    topic = f"zstd-{version}"
    trio_broker.state.logs.create_topic(topic, 1, {})
    part = await _produce(trio_broker, version, topic, _records_for(version, Compression.ZSTD))
    expected = 0 if version >= 7 else ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert part.error_code == expected


async def test_v13_names_topics_by_id(trio_broker):
    trio_broker.state.logs.create_topic("by-id", 1, {})
    ok = await _produce(trio_broker, 13, "by-id", _records_for(13))
    assert ok.error_code == 0
    import uuid

    unknown = await _produce(trio_broker, 13, "by-id", _records_for(13), topic_id=uuid.uuid4())
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_ID


async def test_min_insync_replicas_above_one_refuses_acks_all(trio_broker):
    trio_broker.state.logs.create_topic("isr", 1, {"min.insync.replicas": "2"})
    for version in (0, 3, 9, 13):
        part = await _produce(trio_broker, version, "isr", _records_for(version), acks=-1)
        assert part.error_code == ErrorCode.NOT_ENOUGH_REPLICAS, version
    part = await _produce(trio_broker, 9, "isr", _records_for(9), acks=1)
    assert part.error_code == 0  # acks=1 does not wait for other replicas
    assert len(_stored(trio_broker, "isr")) > 0


@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
async def test_topic_compression_type_recompresses_keeping_producer_fields(trio_broker, target):
    topic = f"codec-{target}"
    trio_broker.state.logs.create_topic(topic, 1, {"compression.type": target})
    sent = build_batch([(b"k%d" % i, b"x" * 200, [("h", b"v")]) for i in range(4)],
                       timestamps=[TS, TS + 3, TS + 1, TS + 9], compression=Compression.LZ4
                       if target != "lz4" else Compression.GZIP, producer_id=77,
                       producer_epoch=2, base_sequence=0)
    part = await _produce(trio_broker, 9, topic, sent)
    assert part.error_code == 0
    stored = _stored(trio_broker, topic)
    [(_, header)] = list(iter_batches(stored))
    wanted = {"uncompressed": Compression.NONE, "gzip": Compression.GZIP,
              "snappy": Compression.SNAPPY, "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
    assert header.compression == wanted[target]
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 2, 0)
    assert (header.base_timestamp, header.max_timestamp) == (TS, TS + 9)
    [(_, records)] = list(decode_batches(stored))
    assert [(r.timestamp, r.headers) for r in records] == [
        (TS, (("h", b"v"),)), (TS + 3, (("h", b"v"),)), (TS + 1, (("h", b"v"),)),
        (TS + 9, (("h", b"v"),))]
    # the retried batch is still recognised as a duplicate: same offsets, nothing appended
    again = await _produce(trio_broker, 9, topic, sent)
    assert (again.error_code, again.base_offset) == (0, 0)
    assert _stored(trio_broker, topic) == stored


async def test_producer_compression_keeps_the_bytes_sent(trio_broker):
    trio_broker.state.logs.create_topic("as-sent", 1, {"compression.type": "producer"})
    sent = build_batch([(None, b"y" * 100)] * 3, compression=Compression.SNAPPY)
    assert (await _produce(trio_broker, 9, "as-sent", sent)).error_code == 0
    stored = _stored(trio_broker, "as-sent")
    # the base offset and leader epoch fields (outside the CRC) are the broker's to write
    assert stored[8:12] == sent[8:12] and stored[16:] == sent[16:]  # noqa: PT018


async def test_compacted_topics_refuse_keyless_records_one_by_one(trio_broker):
    trio_broker.state.logs.create_topic("compacted", 1, {"cleanup.policy": "compact"})
    batch = build_batch([(b"a", b"1"), (None, b"2"), (b"c", b"3"), (None, b"4")])
    for version in (7, 8, 13):
        part = await _produce(trio_broker, version, "compacted", batch)
        assert part.error_code == ErrorCode.INVALID_RECORD
        if version >= 8:  # KIP-467: which records, and why
            assert [e.batch_index for e in part.record_errors] == [1, 3]
            assert "Compacted topic cannot accept message without key" in \
                part.record_errors[0].batch_index_error_message
            assert part.error_message.startswith("One or more records have been rejected")
        else:
            assert part.record_errors == []
    keyed = build_batch([(b"a", b"1"), (b"b", b"2")])
    assert (await _produce(trio_broker, 8, "compacted", keyed)).error_code == 0
    [(header, _)] = list(decode_batches(_stored(trio_broker, "compacted")))
    assert read_batch_header(_stored(trio_broker, "compacted")).records_count == 2
    assert header.records_count == 2
