"""Bad produce input, sent raw: each gets Kafka's error code and nothing is appended."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from tests.wire import LATEST, RawClient, list_offsets, produce
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.compression import Compression
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.records import build_batch

TOPIC = "target"


def _good(n: int = 3, **kwargs) -> bytes:
    return build_batch([(b"k%d" % i, b"v%d" % i) for i in range(n)], **kwargs)


def _recrc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def corrupt_crc() -> bytes:
    batch = bytearray(_good())
    batch[-1] ^= 0xFF  # a flipped bit in the last record, CRC left as it was
    return bytes(batch)


def wrong_record_count() -> bytes:
    batch = bytearray(_good(3))
    struct.pack_into(">i", batch, 57, 5)  # recordsCount says 5, lastOffsetDelta says 3 records
    return _recrc(batch)


def control_batch() -> bytes:
    batch = bytearray(_good())
    (attributes,) = struct.unpack_from(">h", batch, 21)
    struct.pack_into(">h", batch, 21, attributes | 0x20)
    return _recrc(batch)


def two_batches() -> bytes:
    return _good() + _good()


def truncated() -> bytes:
    return _good()[:-4]


CASES = {
    "corrupt crc": (corrupt_crc, ErrorCode.CORRUPT_MESSAGE),
    "wrong record count": (wrong_record_count, ErrorCode.INVALID_RECORD),
    "control batch": (control_batch, ErrorCode.INVALID_RECORD),
    "two batches in one partition": (two_batches, ErrorCode.INVALID_RECORD),
    "truncated batch": (truncated, ErrorCode.CORRUPT_MESSAGE),
}


async def _setup(broker, **configs: str) -> RawClient:
    broker.state.logs.create_topic(TOPIC, 2, dict(configs))
    client = await RawClient.connect(broker.host, broker.port)
    # something already in the log, so "nothing appended" is a real high watermark
    assert await produce(client, TOPIC, {0: _good(), 1: _good()}) == {0: (0, 0), 1: (0, 0)}
    return client


async def _watermarks(client: RawClient) -> dict[int, int]:
    got = await list_offsets(client, TOPIC, [0, 1], LATEST)
    return {p: offset for p, (_, offset, _) in got.items()}


@pytest.mark.parametrize("case", list(CASES))
async def test_bad_batch_is_refused_and_not_appended(trio_broker, case):
    make, expected = CASES[case]
    client = await _setup(trio_broker)
    # partition 0 gets the bad batch, partition 1 a good one in the same request
    result = await produce(client, TOPIC, {0: make(), 1: _good()})
    assert result == {0: (expected, -1), 1: (0, 3)}
    assert await _watermarks(client) == {0: 3, 1: 6}
    # the connection is still usable and the partition still takes good batches
    assert await produce(client, TOPIC, {0: _good()}) == {0: (0, 3)}


async def test_too_large_batch(trio_broker):
    client = await _setup(trio_broker, **{"max.message.bytes": "1000"})
    big = build_batch([(None, b"x" * 2000)])
    assert await produce(client, TOPIC, {0: big}) == {0: (ErrorCode.MESSAGE_TOO_LARGE, -1)}
    assert await _watermarks(client) == {0: 3, 1: 3}


async def test_acks_2(trio_broker):
    client = await _setup(trio_broker)
    result = await produce(client, TOPIC, {0: _good(), 1: _good()}, acks=2)
    assert result == {0: (ErrorCode.INVALID_REQUIRED_ACKS, -1),
                      1: (ErrorCode.INVALID_REQUIRED_ACKS, -1)}
    assert await _watermarks(client) == {0: 3, 1: 3}


async def test_zstd_needs_produce_v7(trio_broker):
    client = await _setup(trio_broker)
    batch = _good(compression=Compression.ZSTD)
    assert await produce(client, TOPIC, {0: batch}, version=6) == {
        0: (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, -1)}
    assert await _watermarks(client) == {0: 3, 1: 3}
    assert await produce(client, TOPIC, {0: batch}, version=7) == {0: (0, 3)}


async def test_reserved_codec(trio_broker):
    client = await _setup(trio_broker)
    batch = bytearray(_good())
    struct.pack_into(">h", batch, 21, 5)  # codec id 5 does not exist
    assert await produce(client, TOPIC, {0: _recrc(batch)}) == {
        0: (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, -1)}
    assert await _watermarks(client) == {0: 3, 1: 3}


async def test_partition_that_does_not_exist(trio_broker):
    client = await _setup(trio_broker)
    assert await produce(client, TOPIC, {7: _good()}) == {
        7: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)}


@pytest.mark.broker_config(auto_create_topics_enable=False)
async def test_unknown_topic_without_auto_create(trio_broker):
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    assert await produce(client, "nowhere", {0: _good()}) == {
        0: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)}
    assert "nowhere" not in trio_broker.state.logs.topics()
    metadata = request_class(ApiKey.Metadata)
    body = await client.request(ApiKey.Metadata, 5,
                                topics=[metadata.MetadataRequestTopic(name="nowhere")],
                                allow_auto_topic_creation=True)
    assert [(t.name, t.error_code) for t in body.topics] == [
        ("nowhere", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert "nowhere" not in trio_broker.state.logs.topics()
    assert (await list_offsets(client, "nowhere", [0], LATEST))[0][0] == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
