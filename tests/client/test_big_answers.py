"""The Trio client's reader against a real TCP socket: a big answer (a ~1 MB fetch answer is
the usual one) is read straight into one buffer of its size, between small pipelined answers,
and a broker gone half-way through one fails the connection instead of hanging it."""

from __future__ import annotations

import contextlib
import socket
import struct
from typing import Any

import pytest
import trio

from tests.client.test_connection import ScriptedBroker, metadata_body
from trio_broker.client.core.connection import ClientConnection
from trio_broker.client.trio import errors
from trio_broker.client.trio.connection import BrokerConnection
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.messages import encode_response, make_response, response_type

TOPIC = response_type(ApiKey.Metadata).MetadataResponseTopic


def big_metadata(version: int, topics: int) -> Any:
    """A Metadata answer of ``topics`` topics named ``t-00000``...: ~topics x 20 bytes."""
    return make_response(ApiKey.Metadata, version, brokers=[], cluster_id="c", controller_id=-7,
                         topics=[TOPIC(error_code=0, name=f"t-{i:05d}", is_internal=False,
                                       partitions=[]) for i in range(topics)])


async def serve_once(nursery: trio.Nursery, handler: Any) -> int:
    """A listener on 127.0.0.1 whose first connection is given to ``handler``; its port."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")

    async def accept_one() -> None:
        stream = await listeners[0].accept()
        await listeners[0].aclose()
        async with stream:
            await handler(stream)

    nursery.start_soon(accept_one)
    return int(listeners[0].socket.getsockname()[1])


async def connect(port: int, nursery: trio.Nursery) -> BrokerConnection:
    conn = BrokerConnection(1, "127.0.0.1", port, client_id="t", request_timeout_s=30,
                            max_in_flight=5, idle_timeout_s=540)
    await nursery.start(conn.run, await trio.open_tcp_stream("127.0.0.1", port))
    await conn.negotiate_versions()
    return conn


async def send_in_pieces(stream: trio.SocketStream, data: bytes) -> None:
    """Uneven pieces, each given time to be read before the next is sent."""
    sizes = [3, 1, 70_000, 1, 300_000, 9, 123_457]
    at = 0
    for size in sizes * (len(data) // sum(sizes) + 1):
        if at >= len(data):
            return
        await stream.send_all(data[at:at + size])
        at += size
        await trio.sleep(0.001)


async def test_a_big_answer_between_small_ones_is_read_in_place(monkeypatch) -> None:
    reads_in_place: list[int] = []
    counted = ClientConnection.received_into

    def count(self: ClientConnection, n: int) -> None:
        reads_in_place.append(n)
        counted(self, n)

    monkeypatch.setattr(ClientConnection, "received_into", count)

    async def broker_side(stream: trio.SocketStream) -> None:
        broker = ScriptedBroker(stream)
        await broker.answer_api_versions()
        headers = [(await broker.read())[0] for _ in range(3)]
        first, big, last = headers
        await broker.respond(first, metadata_body(first.api_version, 1))
        await send_in_pieces(stream, encode_response(big, big_metadata(big.api_version, 60_000)))
        await broker.respond(last, metadata_body(last.api_version, 3))
        await trio.sleep_forever()  # the connection stays open

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            port = await serve_once(nursery, broker_side)
            conn = await connect(port, nursery)
            requests = [await conn.send(ApiKey.Metadata, {"topics": []}) for _ in range(3)]
            answers = [await r.wait() for r in requests if r is not None]
            assert [a.controller_id for a in answers] == [1, -7, 3]
            assert [t.name for t in answers[1].topics] == [f"t-{i:05d}" for i in range(60_000)]
            assert reads_in_place, "the big answer was not read into its own buffer"
            assert not conn.closed
            conn.close()
            nursery.cancel_scope.cancel()


async def one_request_fails(answer: Any, error: type[Exception], match: str | None = None,
                            ) -> None:
    """One Metadata request, which the broker side's ``answer(stream, header)`` answers
    badly: it fails with ``error`` and closes the connection (nothing hangs)."""
    async def broker_side(stream: trio.SocketStream) -> None:
        broker = ScriptedBroker(stream)
        await broker.answer_api_versions()
        header, _ = await broker.read()
        await answer(stream, header)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            port = await serve_once(nursery, broker_side)
            conn = await connect(port, nursery)
            request = await conn.send(ApiKey.Metadata, {"topics": []})
            assert request is not None
            with pytest.raises(error, match=match):
                await request.wait()
            assert conn.closed
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("how", ["closed", "reset"])
async def test_a_broker_gone_half_way_through_a_big_answer_fails_the_connection(how) -> None:
    async def half_then_gone(stream: trio.SocketStream, header: Any) -> None:
        frame = encode_response(header, big_metadata(header.api_version, 60_000))
        await stream.send_all(frame[:len(frame) // 2])
        await trio.sleep(0.05)
        if how == "reset":  # RST instead of FIN
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                     struct.pack("ii", 1, 0))
        await stream.aclose()

    await one_request_fails(half_then_gone, errors.KafkaConnectionError)


async def test_an_answer_bigger_than_the_client_takes_fails_the_connection() -> None:
    """A size prefix over the client's limit (a broken or hostile peer) fails the connection
    with an error naming the size, however many bytes follow it."""
    async def too_big(stream: trio.SocketStream, header: Any) -> None:
        with contextlib.suppress(trio.BrokenResourceError):
            await stream.send_all(struct.pack(">ii", 0x7FFF_FFF0, header.correlation_id)
                                  + bytes(1 << 20))
        await trio.sleep_forever()

    await one_request_fails(too_big, errors.InvalidResponseError, match="2147483632 bytes")
