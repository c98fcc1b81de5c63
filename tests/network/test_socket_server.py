"""The network layer, one test per behaviour of Kafka's SocketServerTest, over real sockets."""

from __future__ import annotations

import socket
import struct

import pytest
import trio
import trio.testing

from tests.wire import RawClient, size_prefix
from trio_broker import open_broker
from trio_broker.broker.apis import registry
from trio_broker.protocol.api_keys import ApiKey

API_VERSIONS = ApiKey.ApiVersions
METADATA = ApiKey.Metadata


async def connect(broker) -> RawClient:
    return await RawClient.connect(broker.host, broker.port)


async def test_simple_request_round_trip(trio_broker):
    client = await connect(trio_broker)
    # ApiVersions v0 from the reference's worked bytes: corr=1, client_id="c".
    await client.send_raw(bytes.fromhex("0000000b00120000000000010001" "63"))
    frame = await client.read_frame()
    assert frame[:4] == bytes.fromhex("00000001")  # header v0: correlation id only
    assert frame[4:6] == b"\x00\x00"  # error_code NONE
    body = await client.request(METADATA, 5, topics=None, allow_auto_topic_creation=False)
    assert [(b.node_id, b.host, b.port) for b in body.brokers] == [
        (0, trio_broker.host, trio_broker.port)]
    await client.aclose()


async def test_api_versions_v3_response_uses_header_v0(trio_broker):
    client = await connect(trio_broker)
    await client.send_raw(bytes.fromhex("000000110012000300000001000163000278023100"))
    frame = await client.read_frame()
    # correlation id then straight into the body: error 0, then a compact array (no tag byte).
    assert frame[:6] == bytes.fromhex("00000001" "0000")
    await client.aclose()


# 5: Kafka 4.4's ApiVersions (KIP-1242), not advertised here (docs/compatibility.md)
@pytest.mark.parametrize("version", [5, 99])
async def test_unsupported_api_versions_version_gets_v0_error_reply(trio_broker, version):
    client = await connect(trio_broker)
    _, data = client.encode(API_VERSIONS, 3, client_software_name="x",
                              client_software_version="1")
    data = data[:6] + version.to_bytes(2, "big") + data[8:]
    await client.send_raw(data)
    frame = await client.read_frame()
    assert frame[4:6] == b"\x00\x23"  # UNSUPPORTED_VERSION (35) in the v0 layout
    from trio_broker.protocol.messages import decode_response

    _, body = decode_response(API_VERSIONS, 0, frame)
    keys = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert keys[API_VERSIONS] == (0, 4)
    # the connection stays usable, as clients retry on it
    assert (await client.request(API_VERSIONS, 0)).error_code == 0
    await client.aclose()


async def test_pipelined_requests_answered_in_order(trio_broker):
    client = await connect(trio_broker)
    sent = []
    payload = b""
    for i in range(10):
        api, ver = (METADATA, 1) if i % 2 else (API_VERSIONS, 0)
        kwargs = {"topics": []} if api == METADATA else {}
        cid, data = client.encode(api, ver, correlation_id=1000 + i, **kwargs)
        sent.append((cid, api, ver))
        payload += data
    await client.send_raw(payload)
    for cid, api, ver in sent:
        got, _ = await client.receive(api, ver)
        assert got == cid
    await client.aclose()


async def test_pipelined_requests_answered_after_client_half_close(trio_broker):
    client = await connect(trio_broker)
    payload = b"".join(client.encode(API_VERSIONS, 0, correlation_id=i)[1] for i in range(5))
    await client.send_raw(payload)
    await client.stream.send_eof()
    for i in range(5):
        got, body = await client.receive(API_VERSIONS, 0)
        assert (got, body.error_code) == (i, 0)
    assert await client.read_frame() is None  # then the broker closes
    await client.aclose()


@pytest.mark.broker_config(socket_request_max_bytes=1000)
async def test_too_big_request_closes_connection(trio_broker):
    bad = await connect(trio_broker)
    good = await connect(trio_broker)
    await bad.send_raw(size_prefix(1001) + b"x" * 100)
    assert await bad.is_closed_by_peer()
    assert (await good.request(API_VERSIONS, 0)).error_code == 0
    metrics = trio_broker.state.metrics.expose().decode()
    assert 'kafka_server_connections_closed_total{reason="frame_size"} 1.0' in metrics


async def test_negative_and_huge_size_prefix_close_only_that_connection(trio_broker):
    good = await connect(trio_broker)
    for prefix in (size_prefix(-1), size_prefix(200 * 1024 * 1024)):
        bad = await connect(trio_broker)
        await bad.send_raw(prefix)
        assert await bad.is_closed_by_peer()
    assert (await good.request(API_VERSIONS, 0)).error_code == 0


async def test_garbage_header_and_unknown_api_close_connection(trio_broker):
    good = await connect(trio_broker)
    for payload in (b"\x00\x01", b"\x7f\x7f\x00\x00\x00\x00\x00\x01\xff\xff",
                    b"\x00\x03\x00\x63\x00\x00\x00\x01\xff\xff"):
        bad = await connect(trio_broker)
        await bad.send_raw(size_prefix(len(payload)) + payload)
        assert await bad.is_closed_by_peer()
    assert (await good.request(API_VERSIONS, 0)).error_code == 0


async def test_malformed_body_closes_connection(trio_broker):
    bad = await connect(trio_broker)
    # Metadata v1 with an array count claiming 2**31-1 topics and no bytes behind it.
    payload = bytes.fromhex("0003000100000007ffff") + b"\x7f\xff\xff\xff"
    await bad.send_raw(size_prefix(len(payload)) + payload)
    assert await bad.is_closed_by_peer()
    good = await connect(trio_broker)
    assert (await good.request(API_VERSIONS, 0)).error_code == 0


@pytest.mark.broker_config(connections_max_idle_ms=60_000)
async def test_idle_connection_is_closed(trio_broker, autojump_clock):
    idle = await connect(trio_broker)
    start = trio.current_time()
    assert await idle.is_closed_by_peer()
    assert trio.current_time() - start >= 60
    metrics = trio_broker.state.metrics.expose().decode()
    assert 'reason="idle_timeout"' in metrics


@pytest.mark.broker_config(connections_max_idle_ms=60_000)
async def test_idle_expiry_applies_to_a_connection_with_a_request_in_flight(
        trio_broker, autojump_clock, monkeypatch):
    # A handler that never answers stands in for a request parked far longer than the idle
    # timeout (a fault that cannot be produced on demand otherwise).
    async def never_answer(ctx, request):
        await trio.sleep_forever()

    monkeypatch.setitem(registry.HANDLERS, int(METADATA), never_answer)
    client = await connect(trio_broker)
    await client.send(METADATA, 1, topics=[])
    start = trio.current_time()
    assert await client.is_closed_by_peer()
    assert 60 <= trio.current_time() - start < 120


@pytest.mark.broker_config(max_connections_per_ip=2)
async def test_max_connections_per_ip(trio_broker):
    a, b = await connect(trio_broker), await connect(trio_broker)
    assert (await a.request(API_VERSIONS, 0)).error_code == 0
    assert (await b.request(API_VERSIONS, 0)).error_code == 0
    c = await connect(trio_broker)
    assert await c.is_closed_by_peer()
    await a.aclose()
    # the slot frees once the broker has seen the close
    with trio.fail_after(5):
        while trio_broker.state.metrics.connections.get() > 1:  # noqa: ASYNC110
            await trio.sleep(0.01)
    d = await connect(trio_broker)
    assert (await d.request(API_VERSIONS, 0)).error_code == 0


@pytest.mark.broker_config(max_connections_per_ip=1,
                           max_connections_per_ip_overrides="127.0.0.1:3")
async def test_max_connections_per_ip_overrides(trio_broker):
    clients = [await connect(trio_broker) for _ in range(3)]
    for c in clients:
        assert (await c.request(API_VERSIONS, 0)).error_code == 0
    extra = await connect(trio_broker)
    assert await extra.is_closed_by_peer()


@pytest.mark.broker_config(max_connections_per_ip=0,
                           max_connections_per_ip_overrides="localhost:2")
async def test_per_ip_zero_with_override_for_localhost(trio_broker):
    a, b = await connect(trio_broker), await connect(trio_broker)
    for c in (a, b):
        assert (await c.request(API_VERSIONS, 0)).error_code == 0
    refused = await connect(trio_broker)
    assert await refused.is_closed_by_peer()


async def test_handler_exception_fails_only_that_connection(trio_broker, monkeypatch):
    async def broken(ctx, request):
        raise RuntimeError("injected handler fault")

    good = await connect(trio_broker)
    monkeypatch.setitem(registry.HANDLERS, int(METADATA), broken)
    bad = await connect(trio_broker)
    await bad.send(METADATA, 1, topics=[])
    assert await bad.is_closed_by_peer()
    assert (await good.request(API_VERSIONS, 0)).error_code == 0
    metrics = trio_broker.state.metrics.expose().decode()
    assert 'reason="handler_error"' in metrics


async def test_all_sockets_close_on_shutdown(tmp_path):
    async with open_broker(log_dirs=str(tmp_path)) as broker:
        clients = [await connect(broker) for _ in range(5)]
        for c in clients:
            assert (await c.request(API_VERSIONS, 0)).error_code == 0
    for c in clients:
        assert await c.is_closed_by_peer()
    with pytest.raises(OSError, match="onnect"):
        await trio.open_tcp_stream(broker.host, broker.port)


async def test_metrics_recorded_when_client_disconnects_before_response(
        trio_broker, monkeypatch):
    release = trio.Event()

    async def slow(ctx, request):
        await release.wait()
        return ctx.response(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=0,
                            topics=[])

    monkeypatch.setitem(registry.HANDLERS, int(METADATA), slow)
    client = await connect(trio_broker)
    await client.send(METADATA, 1, topics=[])
    await trio.sleep(0.05)
    await client.aclose()
    await trio.sleep(0.05)
    release.set()
    metrics = trio_broker.state.metrics
    with trio.fail_after(5):
        while True:
            text = metrics.expose().decode()
            if 'kafka_network_requestmetrics_totaltimems_count{request="Metadata"} 1.0' in text:
                break
            await trio.sleep(0.01)


@pytest.mark.broker_config(max_connections=2)
async def test_max_connections_makes_the_acceptor_wait(trio_broker):
    a, b = await connect(trio_broker), await connect(trio_broker)
    for c in (a, b):
        assert (await c.request(API_VERSIONS, 0)).error_code == 0
    # The third TCP connect completes in the kernel backlog but is not served yet...
    c = await connect(trio_broker)
    await c.send(API_VERSIONS, 0)
    with trio.move_on_after(0.3) as waited:
        await c.receive(API_VERSIONS, 0)
    assert waited.cancelled_caught
    # ...until a slot frees: then it is accepted, not refused.
    await a.aclose()
    with trio.fail_after(5):
        _, body = await c.receive(API_VERSIONS, 0)
    assert body.error_code == 0


@pytest.mark.broker_config(metrics_listener="http://127.0.0.1:0")
async def test_prometheus_endpoint(trio_broker):
    client = await connect(trio_broker)
    await client.request(API_VERSIONS, 0)
    host, port = trio_broker.metrics_address
    stream = await trio.open_tcp_stream(host, port)
    await stream.send_all(f"GET /metrics HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    data = b""
    while chunk := await stream.receive_some(65536):
        data += chunk
    assert data.startswith(b"HTTP/1.1 200 OK")
    requests = b'kafka_network_requestmetrics_requests_total{request="ApiVersions",version="0"}'
    assert requests + b" 1.0" in data
    assert b'kafka_network_requestmetrics_requestqueuetimems_count{request="ApiVersions"}' in data
    assert b"kafka_network_requestchannel_requestqueuesize 0.0" in data
    assert b"kafka_server_socket_server_metrics_connection_count 1.0" in data


async def test_failed_acks0_produce_closes_the_connection(trio_broker):
    from trio_broker.protocol.api_keys import request_class
    from trio_broker.protocol.records import build_batch

    cls = request_class(ApiKey.Produce)
    client = await connect(trio_broker)
    good = await connect(trio_broker)
    batch = bytearray(build_batch([(b"k", b"v", ())]))
    batch[-1] ^= 0xFF  # CRC no longer matches
    part = cls.TopicProduceData.PartitionProduceData(index=0, records=bytes(batch))
    trio_broker.state.logs.create_topic("acks0", 1, {})
    await client.send(ApiKey.Produce, 7, transactional_id=None, acks=0, timeout_ms=1000,
                      topic_data=[cls.TopicProduceData(name="acks0", partition_data=[part])])
    assert await client.is_closed_by_peer()
    assert trio_broker.state.logs.get_log("acks0", 0).high_watermark == 0
    assert (await good.request(API_VERSIONS, 0)).error_code == 0


async def test_big_request_sent_in_pieces_is_read_whole(trio_broker):
    """A ~600 KB produce arriving in uneven pieces (its rest read into the frame's own buffer),
    pipelined between two small requests, is answered in order and fetched back byte for byte;
    a connection reset half-way through another big frame closes only that connection."""
    from tests.wire import create_topic, fetch, records_of
    from trio_broker.client.core.produce import parse_produce, produce_request
    from trio_broker.protocol.records import build_batch

    client = await connect(trio_broker)
    await create_topic(client, "big")
    values = [bytes([i % 251]) * 3000 + i.to_bytes(4, "big") for i in range(200)]
    batch = build_batch([(None, v) for v in values])
    body = produce_request(7, [("big", 0, batch)], acks=1, timeout_ms=10_000)
    _, produce = client.encode(ApiKey.Produce, 7, correlation_id=2, body=body)
    _, before = client.encode(API_VERSIONS, 0, correlation_id=1)
    _, after = client.encode(METADATA, 1, correlation_id=3, topics=[])
    stream = before + produce + after
    for start, end in ((0, 40_000), (40_000, 41_000), (41_000, 300_000),
                       (300_000, len(stream))):
        await client.send_raw(stream[start:end])
        await trio.sleep(0.01)
    assert (await client.receive(API_VERSIONS, 0))[0] == 1
    cid, answer = await client.receive(ApiKey.Produce, 7)
    [result] = parse_produce(answer).values()
    assert (cid, result.error, result.base_offset) == (2, 0, 0)
    assert (await client.receive(METADATA, 1))[0] == 3
    fetched = await fetch(client, "big", {0: 0})
    assert [r.value for r in records_of(fetched[0].records)] == values

    bad = await connect(trio_broker)
    await bad.send_raw(produce[:len(produce) // 3])
    bad.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                 struct.pack("ii", 1, 0))  # close with RST
    await bad.aclose()
    assert (await client.request(API_VERSIONS, 0)).error_code == 0
    with trio.fail_after(5):
        closed = 'reason="client_closed"'
        while closed not in trio_broker.state.metrics.expose().decode():  # noqa: ASYNC110
            await trio.sleep(0.01)
    await client.aclose()
