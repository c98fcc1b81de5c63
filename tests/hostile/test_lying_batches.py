"""Record batches that lie: wrong lengths and counts, CRCs over garbage, compression bombs.

The broker checks a batch's header and CRC and stores the bytes; it never decodes records on
produce or fetch. So a lie in the header is refused with Kafka's error code, a lie inside the
records (with a CRC that matches) is stored and served back byte for byte without harm to the
broker, and a small batch that would inflate to gigabytes is never inflated in full: the broker
process's peak RSS (``VmHWM``) proves it.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

import cramjam
import pytest
from crc32c import crc32c

from tests.hostile.fuzz import well_behaved_client_ok
from tests.hostile.harness import BrokerProcess
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.batch import read_batch_header
from trio_broker.protocol.compression import Compression
from trio_broker.protocol.errors import CorruptRecordError, ErrorCode
from trio_broker.protocol.messages import decode_response, encode_request, make_request
from trio_broker.protocol.records import build_batch, decode_batches

PRODUCE = request_class(ApiKey.Produce)
FETCH = request_class(ApiKey.Fetch)
LIST_OFFSETS = request_class(ApiKey.ListOffsets)
#: the broker's peak RSS must stay below this while bombs are produced, fetched and searched
PEAK_RSS_BOUND_KB = 320 * 1024


def rewrite(batch: bytes, *, records: bytes | None = None, codec: int | None = None,
            count: int | None = None, last_delta: int | None = None, magic: int | None = None,
            attributes: int | None = None, length_delta: int = 0, fix_crc: bool = True) -> bytes:
    """Change fields of a batch; lengths and the CRC are recomputed unless told otherwise."""
    buf = bytearray(batch)
    if records is not None:
        del buf[61:]
        buf += records
    struct.pack_into(">i", buf, 8, len(buf) - 12 + length_delta)
    if magic is not None:
        buf[16] = magic
    attrs_ = struct.unpack_from(">h", buf, 21)[0]
    if codec is not None:
        attrs_ = (attrs_ & ~0x07) | codec
    if attributes is not None:
        attrs_ |= attributes
    struct.pack_into(">h", buf, 21, attrs_)
    if last_delta is not None:
        struct.pack_into(">i", buf, 23, last_delta)
    if count is not None:
        struct.pack_into(">i", buf, 57, count)
    if fix_crc:
        struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def call(address: tuple[str, int], api_key: int, version: int, **fields: Any) -> Any:
    with socket.create_connection(address, timeout=60) as sock:
        sock.sendall(encode_request(api_key, version, 1, "liar",
                                    make_request(api_key, version, **fields)))
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
            chunk = sock.recv(1 << 20)
            assert chunk, "connection closed"
            buf += chunk
    return decode_response(api_key, version, buf[4:])[1]


_created: set[tuple[int, str]] = set()


def produce(broker: BrokerProcess, topic: str, batch: bytes, version: int = 7) -> Any:
    if (broker.port, topic) not in _created:
        ct = request_class(ApiKey.CreateTopics)
        call(broker.address, ApiKey.CreateTopics, 4, timeout_ms=1000, validate_only=False,
             topics=[ct.CreatableTopic(name=topic, num_partitions=1, replication_factor=1,
                                       assignments=[], configs=[])])
        _created.add((broker.port, topic))
    data = PRODUCE.TopicProduceData(name=topic, partition_data=[
        PRODUCE.TopicProduceData.PartitionProduceData(index=0, records=batch)])
    resp = call(broker.address, ApiKey.Produce, version, transactional_id=None, acks=-1,
                timeout_ms=5000, topic_data=[data])
    return resp.responses[0].partition_responses[0]


def fetch(broker: BrokerProcess, topic: str, offset: int, max_bytes: int = 4 << 20) -> Any:
    part = FETCH.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1,
                                           fetch_offset=offset, log_start_offset=-1,
                                           partition_max_bytes=max_bytes)
    resp = call(broker.address, ApiKey.Fetch, 11, replica_id=-1, max_wait_ms=0, min_bytes=0,
                max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
                topics=[FETCH.FetchTopic(topic=topic, partitions=[part])],
                forgotten_topics_data=[], rack_id="")
    return resp.responses[0].partitions[0]


def fetch_all(broker: BrokerProcess, topic: str) -> tuple[bytes, int]:
    """Every stored batch of ``topic`` (fetching on from each batch's end) and the HW."""
    data, offset = b"", 0
    while True:
        part = fetch(broker, topic, offset)
        if not part.records:
            return data, part.high_watermark
        data += part.records
        *_, last = (h for h, _ in _headers(part.records))
        offset = last.next_offset


def _headers(buf: bytes) -> Any:
    from trio_broker.protocol.batch import iter_batches

    for pos, header in iter_batches(buf):
        yield header, pos


def offset_for_time(broker: BrokerProcess, topic: str, timestamp: int) -> Any:
    part = LIST_OFFSETS.ListOffsetsTopic.ListOffsetsPartition(partition_index=0,
                                                              timestamp=timestamp)
    resp = call(broker.address, ApiKey.ListOffsets, 3, replica_id=-1, isolation_level=0,
                topics=[LIST_OFFSETS.ListOffsetsTopic(name=topic, partitions=[part])])
    return resp.topics[0].partitions[0]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("liars")
    with BrokerProcess(data / "logs", **{"num.partitions": 1,
                                         "log.flush.interval.messages": 1}) as b:
        yield b


def good(value: bytes = b"v", ts: int = 1_000) -> bytes:
    return build_batch([(b"k", value)], base_timestamp_ms=ts)


LIES = {
    "length-longer-than-sent": (lambda: rewrite(good(), length_delta=10),
                                ErrorCode.CORRUPT_MESSAGE),
    # the bytes after the declared end would be a second batch: Produce v3+ allows one
    "length-shorter-than-sent": (lambda: rewrite(good(), length_delta=-3),
                                 ErrorCode.INVALID_RECORD),
    "length-below-header": (lambda: rewrite(good(), length_delta=-1000),
                            ErrorCode.CORRUPT_MESSAGE),
    "count-disagrees-with-delta": (lambda: rewrite(good(), count=5), ErrorCode.INVALID_RECORD),
    "count-zero": (lambda: rewrite(good(), count=0, last_delta=-1), ErrorCode.INVALID_RECORD),
    "count-negative": (lambda: rewrite(good(), count=-7, last_delta=-8),
                       ErrorCode.INVALID_RECORD),
    # header-consistent, but an uncompressed payload cannot hold that many records
    "count-huge": (lambda: rewrite(good(), count=2**31 - 1, last_delta=2**31 - 2),
                   ErrorCode.INVALID_RECORD),
    "crc-wrong": (lambda: rewrite(good(), records=b"\x00" * 8, fix_crc=False),
                  ErrorCode.CORRUPT_MESSAGE),
    # Produce v3+ takes magic 2 only (Kafka: "only allowed to contain record batches with
    # magic version 2"); older formats come with Produce v0-v2
    "magic-1": (lambda: rewrite(good(), magic=1), ErrorCode.INVALID_RECORD),
    "magic-0-wrapper": (lambda: rewrite(good(), magic=0, codec=1), ErrorCode.INVALID_RECORD),
    "codec-7": (lambda: rewrite(good(), codec=7), ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    "control-batch": (lambda: rewrite(good(), attributes=0x20), ErrorCode.INVALID_RECORD),
    "two-batches": (lambda: good() + good(), ErrorCode.INVALID_RECORD),
    "truncated-header": (lambda: good()[:40], ErrorCode.CORRUPT_MESSAGE),
    "empty": (lambda: b"", ErrorCode.INVALID_RECORD),
    "too-large": (lambda: good(bytes(1_100_000)), ErrorCode.MESSAGE_TOO_LARGE),
}


@pytest.mark.parametrize("lie", list(LIES))
def test_header_lies_are_refused_and_nothing_is_stored(broker, lie):
    make, expected = LIES[lie]
    topic = f"lie-{lie}"
    before = produce(broker, topic, good(b"before"))
    assert before.error_code == 0
    result = produce(broker, topic, make())
    after = produce(broker, topic, good(b"after"))
    assert after.error_code == 0
    data, high_watermark = fetch_all(broker, topic)
    if expected is None:
        assert result.error_code == 0
        assert high_watermark == after.base_offset + 1
        return
    assert result.error_code == expected
    values = [r.value for _, rs in decode_batches(data) for r in rs]
    assert values == [b"before", b"after"]
    assert (before.base_offset, after.base_offset, high_watermark) == (0, 1, 2)


GARBAGE = {
    # varint lengths that claim 2**63 bytes, with a CRC computed over them
    "overflowing-varints": b"\xff" * 10 + b"\x01" + b"\xff" * 20,
    "record-length-past-end": b"\xfe\xff\xff\xff\x0f" + b"\x00" * 10,
    "random-bytes": bytes(range(256)) * 2,
    # gzip codec bits over bytes that are not gzip
    "not-really-gzip": None,
}


@pytest.mark.parametrize("kind", list(GARBAGE))
def test_garbage_with_a_matching_crc_is_stored_and_served_untouched(broker, kind):
    topic = f"garbage-{kind}"
    payload = GARBAGE[kind]
    batch = (rewrite(good(), records=b"\x1f\x8bnot gzip at all", codec=1) if payload is None
             else rewrite(good(), records=payload))
    assert produce(broker, topic, batch).error_code == 0
    assert produce(broker, topic, good(b"later", ts=5_000)).error_code == 0
    part = fetch(broker, topic, 0)
    stored = part.records[:len(batch)]
    # Served byte for byte (only the base offset and leader epoch are the broker's: a new
    # topic's first leader epoch is 0).
    assert stored[12:16] == b"\x00\x00\x00\x00"
    assert stored[16:] == batch[16:]
    with pytest.raises(CorruptRecordError):
        list(decode_batches(stored))
    # ListOffsets by time is the one broker path that reads records: it must cope.
    found = offset_for_time(broker, topic, 0)
    assert (found.error_code, found.offset) == (0, 0)
    later = offset_for_time(broker, topic, 4_000)
    assert (later.error_code, later.offset) == (0, 1)
    assert well_behaved_client_ok(broker.address)


def bomb(codec: Compression, inflated_mb: int) -> bytes:
    """A batch of one record whose payload inflates to ``inflated_mb`` MiB of zeros."""
    module = {Compression.ZSTD: cramjam.zstd, Compression.GZIP: cramjam.gzip}[codec]
    compressor = module.Compressor()
    chunk = bytes(1 << 20)
    for _ in range(inflated_mb):
        compressor.compress(chunk)
    return rewrite(good(ts=10_000), records=bytes(compressor.finish()), codec=int(codec))


@pytest.mark.parametrize(("codec", "inflated_mb"), [(Compression.ZSTD, 1024),
                                                    (Compression.GZIP, 128)])
def test_compression_bomb_is_never_inflated_in_full(broker, codec, inflated_mb):
    batch = bomb(codec, inflated_mb)
    assert len(batch) < 1_048_588  # passes max.message.bytes: only the compressed size counts
    topic = f"bomb-{codec.name.lower()}"
    if codec == Compression.ZSTD:
        assert produce(broker, topic, batch, version=6).error_code == \
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    stored = produce(broker, topic, batch)
    assert stored.error_code == 0
    part = fetch(broker, topic, stored.base_offset)
    assert part.records[16:] == batch[16:]
    assert read_batch_header(part.records).compression == codec
    # The broker path that decodes records, on the bomb: answered, bounded.
    found = offset_for_time(broker, topic, 5_000)
    assert found.error_code == 0
    assert found.offset == stored.base_offset
    assert well_behaved_client_ok(broker.address)
    peak = broker.hwm_kb()
    assert peak < PEAK_RSS_BOUND_KB, f"peak RSS {peak} kB: the bomb was inflated"


def legacy_bomb(inflated_mb: int) -> bytes:
    """A message format v1 gzip wrapper whose inner message set inflates to ``inflated_mb`` MiB
    (what a Produce v2 client sends; the broker must convert it to store it)."""
    import zlib

    compressor = cramjam.gzip.Compressor()
    inner = bytearray()
    value = bytes(1 << 20)
    message = struct.pack(">bbqii", 1, 0, 10_000, -1, len(value)) + value
    entry = struct.pack(">qiI", 0, len(message) + 4, zlib.crc32(message)) + message
    for _ in range(inflated_mb):
        compressor.compress(entry)
    inner += bytes(compressor.finish())
    wrapper = struct.pack(">bbqii", 1, 1, 10_000, -1, len(inner)) + bytes(inner)
    return struct.pack(">qiI", 0, len(wrapper) + 4, zlib.crc32(wrapper)) + wrapper


def test_old_format_bomb_is_refused_without_inflating_it(broker):
    batch = legacy_bomb(512)
    assert len(batch) < 1_048_588
    result = produce(broker, "bomb-legacy", batch, version=2)
    assert result.error_code == ErrorCode.CORRUPT_MESSAGE  # it does not inflate within bounds
    assert well_behaved_client_ok(broker.address)
    peak = broker.hwm_kb()
    assert peak < PEAK_RSS_BOUND_KB, f"peak RSS {peak} kB: the bomb was inflated"


def test_down_converting_a_stored_bomb_is_bounded(broker):
    batch = bomb(Compression.GZIP, 128)
    stored = produce(broker, "bomb-old-fetch", batch)
    assert stored.error_code == 0
    part = FETCH.FetchTopic.FetchPartition(partition=0, fetch_offset=stored.base_offset,
                                           partition_max_bytes=4 << 20)
    resp = call(broker.address, ApiKey.Fetch, 3, replica_id=-1, max_wait_ms=0, min_bytes=0,
                max_bytes=4 << 20, topics=[FETCH.FetchTopic(topic="bomb-old-fetch",
                                                            partitions=[part])])
    # a Fetch v3 consumer needs it converted to message format v1, which would mean inflating
    # it past the broker's bound: the partition answers an error, the broker stays well
    assert resp.responses[0].partitions[0].error_code == ErrorCode.CORRUPT_MESSAGE
    assert well_behaved_client_ok(broker.address)
    peak = broker.hwm_kb()
    assert peak < PEAK_RSS_BOUND_KB, f"peak RSS {peak} kB: the bomb was inflated"
