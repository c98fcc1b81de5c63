"""A processor's selector (``selector.py``): parked connections answered by one task, over real
sockets. The requests here reach connections already parked: one processor, more than one
connection (one alone in its processor waits on its own socket), and ``wait_all_tasks_blocked``
after an answer (their tasks have found their sockets empty and wait in the selector)."""

from __future__ import annotations

import socket
import threading

import pytest
import trio
import trio.testing

from tests.wire import RawClient, create_topic, high_watermark, produce_request, size_prefix
from trio_broker.broker.apis import registry
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.records import build_batch

API_VERSIONS = ApiKey.ApiVersions


async def _parked_clients(broker, count: int,
                          receive_buffer: int | None = None) -> list[RawClient]:
    """``count`` (2 or more) connections, all connected before any of them sends, each
    answered once: their tasks then wait in the selector (``receive_buffer``: the last one's
    SO_RCVBUF, set before connecting, so the window is scaled for it)."""
    clients = []
    for i in range(count):
        sock = trio.socket.socket()
        if receive_buffer is not None and i == count - 1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        await sock.connect((broker.host, broker.port))
        clients.append(RawClient(trio.SocketStream(sock)))
    await trio.testing.wait_all_tasks_blocked()  # all of them accepted: none is alone
    for client in clients:
        assert (await client.request(API_VERSIONS, 0)).error_code == 0
    await trio.testing.wait_all_tasks_blocked()
    return clients


@pytest.mark.broker_config(num_network_threads=1)
async def test_answers_to_a_reader_that_lags_keep_their_order(trio_broker):
    """Pipelined requests sent a few at a time to a client that reads nothing until it has
    sent them all: the socket fills, the answers the selector could not write wait for the
    connection's task, and every answer arrives, once, in order."""
    _, client = await _parked_clients(trio_broker, 2, receive_buffer=4096)
    count, chunk = 6000, 8
    frames = [client.encode(API_VERSIONS, 3, correlation_id=1000 + i,
                            client_software_name="lag", client_software_version="1")[1]
              for i in range(count)]

    async def send_all() -> None:
        for i in range(0, count, chunk):
            await client.send_raw(b"".join(frames[i:i + chunk]))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_all)
        await trio.testing.wait_all_tasks_blocked()  # the sender waits on a full socket
        seen = []
        with trio.fail_after(60):
            while len(seen) < count:
                answer = await client.read_frame()
                assert answer is not None
                seen.append(int.from_bytes(answer[:4], "big"))
    assert seen == [1000 + i for i in range(count)]


@pytest.mark.broker_config(num_network_threads=1, log_flush_interval_messages=1)
async def test_a_request_that_waits_does_not_hold_up_the_other_connections(
        trio_broker, monkeypatch):
    """A produce whose fsync hangs (a fault injected into the flush: a slow disk cannot be
    had on demand) holds only its own connection: another connection of the same processor is
    answered meanwhile, and the first gets its answer once the fsync returns."""
    logs = trio_broker.state.logs
    flush = logs.flush
    entered, release = threading.Event(), threading.Event()

    def slow_flush(log):
        if log.name.startswith("slow-"):
            entered.set()
            release.wait(30)
        flush(log)

    admin, waiting, other = await _parked_clients(trio_broker, 3)
    await create_topic(admin, "slow")
    await create_topic(admin, "fast")
    monkeypatch.setattr(logs, "flush", slow_flush)
    await trio.testing.wait_all_tasks_blocked()

    def produce(topic: str):
        return produce_request(7, [(topic, 0, build_batch([(None, b"v")]))], acks=1,
                               timeout_ms=10_000)

    await waiting.send(ApiKey.Produce, 7, body=produce("slow"))
    assert await trio.to_thread.run_sync(entered.wait, 10)
    with trio.fail_after(10):
        answer = await other.request(ApiKey.Produce, 7, body=produce("fast"))
    assert answer.responses[0].partition_responses[0].error_code == 0
    release.set()
    with trio.fail_after(10):
        _, held = await waiting.receive(ApiKey.Produce, 7)
    assert held.responses[0].partition_responses[0].error_code == 0
    assert (await waiting.request(API_VERSIONS, 0)).error_code == 0  # it goes on


@pytest.mark.broker_config(connections_max_idle_ms=60_000, num_network_threads=1)
async def test_idle_expiry_closes_a_parked_connection_whose_request_waits(
        trio_broker, autojump_clock, monkeypatch):
    """The idle time closes a connection whose request the selector started and that waits
    (a handler that never answers stands in for one waiting far longer than the idle time),
    and the other connections of its processor are still served."""
    async def never_answer(ctx, request):
        await trio.sleep_forever()

    client, other = await _parked_clients(trio_broker, 2)
    monkeypatch.setitem(registry.HANDLERS, int(ApiKey.Metadata), never_answer)
    await client.send(ApiKey.Metadata, 1, topics=[])
    start = trio.current_time()
    assert (await other.request(API_VERSIONS, 0)).error_code == 0
    assert trio.current_time() - start < 1
    with trio.fail_after(600):
        assert await client.is_closed_by_peer()
    assert 60 <= trio.current_time() - start < 120


@pytest.mark.broker_config(num_network_threads=1)
async def test_acks_0_produce_on_a_parked_connection_gets_no_answer(trio_broker):
    """Produce with acks=0 answered by the selector: nothing is written back, the records are
    appended, and the next request's answer is the next frame the client reads."""
    admin, client = await _parked_clients(trio_broker, 2)
    await create_topic(admin, "quiet")
    await trio.testing.wait_all_tasks_blocked()
    for i in range(5):
        await client.send(ApiKey.Produce, 7, body=produce_request(
            7, [("quiet", 0, build_batch([(None, b"%d" % i)]))], acks=0, timeout_ms=10_000))
    with trio.fail_after(10):
        assert await high_watermark(client, "quiet") == 5


@pytest.mark.broker_config(num_network_threads=1, socket_request_max_bytes=1000)
@pytest.mark.parametrize(("bad", "reason"), [
    (size_prefix(1001) + b"x" * 100, "frame_size"),  # over socket.request.max.bytes
    (size_prefix(-1), "frame_size"),
    # Metadata v99: a header the selector cannot parse
    (size_prefix(10) + bytes.fromhex("0003006300000001ffff"), "unsupported_version"),
    # Metadata v1 claiming 2**31-1 topics with no bytes behind them: refused by its handler
    (size_prefix(14) + bytes.fromhex("0003000100000007ffff7fffffff"), "malformed"),
], ids=["too-big", "negative-size", "unknown-version", "malformed-body"])
async def test_a_bad_frame_on_a_parked_connection_closes_only_it(trio_broker, bad, reason):
    """A bad frame read by the selector closes its connection with the reason the
    connection's own reads give it; the processor's other connections are served on."""
    client, other = await _parked_clients(trio_broker, 2)
    await client.send_raw(bad)
    with trio.fail_after(10):
        assert await client.is_closed_by_peer()
    assert (await other.request(API_VERSIONS, 0)).error_code == 0
    metrics = trio_broker.state.metrics.expose().decode()
    assert f'kafka_server_connections_closed_total{{reason="{reason}"}} 1.0' in metrics
