"""The per-request savings on the request path: answers to pipelined requests written together,
and the answers that do not change between requests encoded once (``Encoded``)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.wire import RawClient
from trio_broker.broker.network import processor
from trio_broker.client.core.metadata import metadata_request
from trio_broker.protocol import messages
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.errors import RemoteProtocolError
from trio_broker.protocol.messages import (
    Encoded,
    decode_request_header,
    encode_response,
    error_codes,
    make_response,
    response_type,
)
from trio_broker.testing import open_cluster


def counting_writes(monkeypatch) -> list[int]:
    """The sizes of the writes of whole answers the connection tasks make (the real writes)."""
    sizes: list[int] = []
    send_bytes = processor.send_bytes

    async def counted(stream, data):
        sizes.append(len(data))
        await send_bytes(stream, data)

    monkeypatch.setattr(processor, "send_bytes", counted)
    return sizes


async def test_pipelined_answers_are_written_together_and_in_order(trio_broker, monkeypatch):
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    await client.request(ApiKey.ApiVersions, 0)
    writes = counting_writes(monkeypatch)
    n = 60
    sent = [client.encode(ApiKey.Metadata, 1, topics=[]) if i % 2 else
            client.encode(ApiKey.ApiVersions, 3, client_software_name="t",
                          client_software_version="1") for i in range(n)]
    await client.send_raw(b"".join(frame for _, frame in sent))
    for i, (cid, _) in enumerate(sent):
        api, version = (ApiKey.Metadata, 1) if i % 2 else (ApiKey.ApiVersions, 3)
        got, body = await client.receive(api, version)
        assert got == cid
        assert body.error_code == 0 if api == ApiKey.ApiVersions else body.brokers
    # one write per buffer of frames read, not one per request
    assert len(writes) <= n // 4, writes
    # every request still has Kafka's timings, recorded when its answer was written
    metrics = trio_broker.state.metrics.request_metrics
    assert metrics.count(ApiKey.Metadata) == n // 2
    assert metrics.count(ApiKey.ApiVersions) == n // 2 + 1
    await client.aclose()


async def test_a_request_of_the_queue_has_the_answers_before_it_written_first(trio_broker):
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    sent = [client.encode(ApiKey.Metadata, 1, topics=[]),
            client.encode(ApiKey.ListGroups, 0),  # a handler task answers it
            client.encode(ApiKey.Metadata, 1, topics=[])]
    await client.send_raw(b"".join(frame for _, frame in sent))
    for (cid, _), api in zip(sent, (ApiKey.Metadata, ApiKey.ListGroups, ApiKey.Metadata),
                             strict=True):
        got, _ = await client.receive(api, 0 if api == ApiKey.ListGroups else 1)
        assert got == cid
    await client.aclose()


async def test_a_frame_that_closes_the_connection_comes_after_the_answers_before_it(
        trio_broker):
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    answered = [client.encode(ApiKey.Metadata, 1, topics=[]) for _ in range(3)]
    unknown_api = struct.pack(">hhih", 9999, 0, 77, -1)
    await client.send_raw(b"".join(frame for _, frame in answered)
                          + struct.pack(">i", len(unknown_api)) + unknown_api)
    for cid, _ in answered:
        assert (await client.receive(ApiKey.Metadata, 1))[0] == cid
    assert await client.is_closed_by_peer()
    await client.aclose()


def test_an_encoded_answer_is_the_answer_encoded():
    cls = response_type(ApiKey.Metadata)
    body = make_response(ApiKey.Metadata, 9, throttle_time_ms=0, cluster_id="c",
                         controller_id=1, topics=[cls.MetadataResponseTopic(
                             error_code=3, name="t", partitions=[])],
                         brokers=[cls.MetadataResponseBroker(node_id=1, host="h", port=9,
                                                             rack=None)])
    frame = struct.pack(">hhih", ApiKey.Metadata, 9, 5, -1) + b"\x00"
    header = decode_request_header(frame)
    once = Encoded(body, 9)
    assert encode_response(header, once) == encode_response(header, body)
    assert error_codes(once) == error_codes(body)
    assert 3 in error_codes(once)


async def test_metadata_naming_no_topic_follows_the_live_brokers(tmp_path: Path):
    async with open_cluster(3, log_dirs=str(tmp_path)) as cluster:
        b = cluster.brokers[2]
        client = await RawClient.connect(b.host, b.port)
        for version in (1, 12):
            body = await client.request(ApiKey.Metadata, version,
                                        body=metadata_request(version, []))
            assert sorted(x.node_id for x in body.brokers) == [0, 1, 2]
            assert (body.controller_id, body.topics) == (0, [])
        await cluster.stop_broker(0)
        for version in (1, 12):
            body = await client.request(ApiKey.Metadata, version,
                                        body=metadata_request(version, []))
            assert sorted(x.node_id for x in body.brokers) == [1, 2]
            assert body.controller_id == 1
        await client.aclose()


def test_the_header_fast_path_reads_what_the_full_decoder_reads():
    frames = []
    for key, version, client_id in ((ApiKey.Metadata, 1, "c"), (ApiKey.Metadata, 12, "ü"),
                                     (ApiKey.Produce, 9, ""), (ApiKey.ApiVersions, 3, "x")):
        raw = client_id.encode()
        head = struct.pack(">hhih", key, version, 42, len(raw)) + raw
        frames.append(head + b"\x00" if version >= 9 or key == ApiKey.ApiVersions else head)
    for frame in frames:
        fast, full = decode_request_header(frame), messages._decode_request_header(frame)
        assert [getattr(fast, f) for f in fast.__slots__] == [
            getattr(full, f) for f in full.__slots__]


@pytest.mark.parametrize("frame", [
    struct.pack(">hhih", ApiKey.Metadata, 1, 7, 2) + b"\xff\xfe",  # client id not UTF-8
    struct.pack(">hhih", ApiKey.Metadata, 12, 7, 2) + b"\xc3\x28\x00",
    struct.pack(">hhih", ApiKey.Metadata, 1, 7, 9) + b"abc",  # client id past the frame's end
    struct.pack(">hhih", ApiKey.Metadata, 1, 7, -2),  # a length below null's -1
    struct.pack(">hhih", ApiKey.Metadata, 99, 7, 1) + b"c",  # a version nobody supports
    struct.pack(">hhih", 30000, 0, 7, 1) + b"c",  # an API key nobody knows
    struct.pack(">hhi", ApiKey.Metadata, 1, 7),  # shorter than the fixed part
], ids=["not-utf8", "not-utf8-flexible", "past-end", "below-null", "version", "api-key",
        "short"])
def test_a_malformed_header_fails_the_same_on_the_fast_path(frame: bytes) -> None:
    """Bad input takes the fast path's checks or falls through to the full decoder: either way
    the same error, with the same words, as the full decoder alone gives."""
    with pytest.raises(RemoteProtocolError) as fast:
        decode_request_header(frame)
    with pytest.raises(RemoteProtocolError) as full:
        messages._decode_request_header(frame)
    assert (type(fast.value), str(fast.value)) == (type(full.value), str(full.value))

