"""BrokerConnection against a scripted broker on an in-memory stream: pipelining, in-flight
bounds, correlation-id matching, timeouts and the ApiVersions fallbacks.

The scripted side speaks real Kafka frames through the protocol layer's server half; only the
broker's choices (order, delay, which error) are scripted, which no real broker lets a test
choose.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
import trio
import trio.testing

from trio_broker.client.core.versions import CLIENT_VERSIONS
from trio_broker.client.trio import errors
from trio_broker.client.trio.connection import BrokerConnection
from trio_broker.protocol.api_keys import SUPPORTED_VERSIONS, ApiKey
from trio_broker.protocol.framing import NEED_DATA, FrameDecoder
from trio_broker.protocol.messages import (
    RequestHeader,
    decode_request_body,
    decode_request_header,
    encode_response,
    make_response,
    response_type,
)

ALL_VERSIONS = {int(k): (v.min, v.max) for k, v in SUPPORTED_VERSIONS.items()}


class ScriptedBroker:
    """The broker end of a memory stream: reads whole requests, writes chosen responses."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.decoder = FrameDecoder()

    async def read(self) -> tuple[RequestHeader, Any]:
        while True:
            frame = self.decoder.next_frame()
            if frame is not NEED_DATA:
                assert isinstance(frame, bytes)
                header = decode_request_header(frame)
                return header, decode_request_body(header, frame)
            data = await self.stream.receive_some()
            assert data, "client closed the stream"
            self.decoder.receive_data(data)

    async def respond(self, header: RequestHeader, body: Any, *,
                      correlation_id: int | None = None, version: int | None = None) -> None:
        if correlation_id is not None:
            header = RequestHeader(header.api_key, header.api_version, correlation_id,
                                   header.client_id, header.flexible, header.body_offset)
        await self.stream.send_all(encode_response(header, body, version=version))

    async def answer_api_versions(self, versions: dict[int, tuple[int, int]] | None = None,
                                  ) -> RequestHeader:
        header, _ = await self.read()
        assert header.api_key == ApiKey.ApiVersions
        await self.respond(header, api_versions_body(header.api_version,
                                                     versions or ALL_VERSIONS))
        return header


def api_versions_body(version: int, versions: dict[int, tuple[int, int]],
                      error_code: int = 0) -> Any:
    entry = response_type(ApiKey.ApiVersions).ApiVersion
    return make_response(ApiKey.ApiVersions, version, error_code=error_code, api_keys=[
        entry(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in versions.items()])


def metadata_body(version: int, marker: int) -> Any:
    """A Metadata response whose controller id identifies which request it answers."""
    return make_response(ApiKey.Metadata, version, brokers=[], cluster_id="c",
                         controller_id=marker, topics=[])


async def connected(nursery: trio.Nursery, *, max_in_flight: int = 5,
                    request_timeout_s: float = 30, idle_timeout_s: float = 540,
                    versions: dict[int, tuple[int, int]] | None = None,
                    ) -> tuple[BrokerConnection, ScriptedBroker]:
    client_end, broker_end = trio.testing.memory_stream_pair()
    conn = BrokerConnection(1, "memory", 0, client_id="t", request_timeout_s=request_timeout_s,
                            max_in_flight=max_in_flight, idle_timeout_s=idle_timeout_s)
    broker = ScriptedBroker(broker_end)
    await nursery.start(conn.run, client_end)
    async with trio.open_nursery() as inner:
        inner.start_soon(broker.answer_api_versions, versions)
        await conn.negotiate_versions()
    return conn, broker


async def test_requests_are_pipelined_and_answered_in_order() -> None:
    async with trio.open_nursery() as nursery:
        conn, broker = await connected(nursery)
        requests = [await conn.send(ApiKey.Metadata, {"topics": []}) for _ in range(5)]
        # all five are on the wire before the broker has answered any
        headers = [(await broker.read())[0] for _ in range(5)]
        assert [h.correlation_id for h in headers] == [r.correlation_id for r in requests]
        for header in headers:
            await broker.respond(header, metadata_body(header.api_version,
                                                       header.correlation_id))
        for request in requests:
            assert request is not None
            response = await request.wait()
            assert response.controller_id == request.correlation_id
        conn.close()


async def test_in_flight_requests_are_bounded() -> None:
    async with trio.open_nursery() as nursery:
        conn, broker = await connected(nursery, max_in_flight=2)
        first = await conn.send(ApiKey.Metadata, {"topics": []})
        await conn.send(ApiKey.Metadata, {"topics": []})
        assert not conn.can_send()
        with pytest.raises(trio.WouldBlock):
            conn.send_nowait(ApiKey.Metadata, {"topics": []})
        third_sent = trio.Event()

        async def third() -> None:
            await conn.send(ApiKey.Metadata, {"topics": []})
            third_sent.set()

        nursery.start_soon(third)
        await trio.testing.wait_all_tasks_blocked()
        assert not third_sent.is_set()
        header, _ = await broker.read()
        assert first is not None
        assert header.correlation_id == first.correlation_id
        await broker.respond(header, metadata_body(header.api_version, 0))
        await third_sent.wait()
        assert len(conn.in_flight) == 2
        conn.close()


async def test_correlation_mismatch_closes_and_fails_every_in_flight_request() -> None:
    async with trio.open_nursery() as nursery:
        conn, broker = await connected(nursery)
        requests = [await conn.send(ApiKey.Metadata, {"topics": []}) for _ in range(3)]
        header, _ = await broker.read()
        await broker.respond(header, metadata_body(header.api_version, 0),
                             correlation_id=header.correlation_id + 1)
        for request in requests:
            assert request is not None
            with pytest.raises(errors.CorrelationIdMismatchError) as info:
                await request.wait()
            assert info.value.retriable
        assert conn.closed
        with pytest.raises(errors.KafkaConnectionError):
            await conn.send(ApiKey.Metadata, {"topics": []})


async def test_request_timeout_closes_the_connection(autojump_clock: Any) -> None:
    async with trio.open_nursery() as nursery:
        conn, _ = await connected(nursery, request_timeout_s=30)
        start = trio.current_time()
        request = await conn.send(ApiKey.Metadata, {"topics": []})
        quick = await conn.send(ApiKey.Metadata, {"topics": []}, timeout_s=5)
        assert request is not None
        assert quick is not None
        with pytest.raises(errors.RequestTimedOutError):
            await quick.wait()
        assert trio.current_time() - start == pytest.approx(5)
        with pytest.raises(errors.RequestTimedOutError):
            await request.wait()  # the connection went down with it, as in the Java client
        assert conn.closed
        await conn.wait_closed()


async def test_idle_connection_is_closed(autojump_clock: Any) -> None:
    async with trio.open_nursery() as nursery:
        conn, _ = await connected(nursery, idle_timeout_s=60)
        await trio.sleep(59)
        assert not conn.closed
        await conn.wait_closed()
        assert trio.current_time() >= 60
        assert isinstance(conn.close_reason, errors.KafkaConnectionError)


async def test_a_response_without_a_request_closes_the_connection() -> None:
    async with trio.open_nursery() as nursery:
        conn, broker = await connected(nursery)
        header = RequestHeader(ApiKey.Metadata, 5, 99, "t", False, 0)
        await broker.respond(header, metadata_body(5, 0))
        await conn.wait_closed()
        assert isinstance(conn.close_reason, errors.CorrelationIdMismatchError)


async def test_acks_zero_produce_takes_no_in_flight_slot() -> None:
    async with trio.open_nursery() as nursery:
        conn, broker = await connected(nursery, max_in_flight=1)
        for _ in range(3):
            assert await conn.send(ApiKey.Produce, {"transactional_id": None, "acks": 0,
                                                    "timeout_ms": 100, "topic_data": []},
                                   expect_response=False) is None
        assert len(conn.in_flight) == 0
        for _ in range(3):
            header, body = await broker.read()
            assert header.api_key == ApiKey.Produce
            assert body.acks == 0
        conn.close()


async def test_versions_are_the_highest_both_sides_support() -> None:
    async with trio.open_nursery() as nursery:
        conn, _ = await connected(nursery, versions={**ALL_VERSIONS, ApiKey.Fetch: (0, 9),
                                                     ApiKey.Produce: (0, 13),
                                                     ApiKey.CreateTopics: (5, 7)})
        assert conn.version_for(ApiKey.Fetch) == 9
        assert conn.version_for(ApiKey.Produce) == CLIENT_VERSIONS[ApiKey.Produce].max
        with pytest.raises(errors.UnsupportedVersionError,
                           match=r"^broker 1 speaks CreateTopics v5-7; this client needs v2-4$"):
            conn.version_for(ApiKey.CreateTopics)
        conn.close()


async def test_api_versions_falls_back_to_the_advertised_maximum() -> None:
    client_end, broker_end = trio.testing.memory_stream_pair()
    conn = BrokerConnection(1, "memory", 0, client_id="t", request_timeout_s=30,
                            max_in_flight=5, idle_timeout_s=540)
    broker = ScriptedBroker(broker_end)
    async with trio.open_nursery() as nursery:
        await nursery.start(conn.run, client_end)

        async def old_broker() -> None:
            header, _ = await broker.read()
            assert header.api_version == 3
            # the unsupported-version reply: error 35 in the v0 layout, listing ApiVersions 0-2
            await broker.respond(header, api_versions_body(0, {ApiKey.ApiVersions: (0, 2)}, 35),
                                 version=0)
            header = await broker.answer_api_versions()
            assert header.api_version == 2

        nursery.start_soon(old_broker)
        await conn.negotiate_versions()
        assert conn.api_versions == ALL_VERSIONS
        conn.close()


async def test_api_versions_falls_back_to_v0_when_the_error_reply_is_unreadable() -> None:
    # librdkafka's mock cluster answers v3 with error 35 in a layout neither v0 nor v3 parses
    client_end, broker_end = trio.testing.memory_stream_pair()
    conn = BrokerConnection(1, "memory", 0, client_id="t", request_timeout_s=30,
                            max_in_flight=5, idle_timeout_s=540)
    broker = ScriptedBroker(broker_end)
    async with trio.open_nursery() as nursery:
        await nursery.start(conn.run, client_end)

        async def quirky_broker() -> None:
            header, _ = await broker.read()
            payload = struct.pack(">i", header.correlation_id) + bytes.fromhex(
                "0023010012000000020000000000")
            await broker.stream.send_all(struct.pack(">i", len(payload)) + payload)
            header = await broker.answer_api_versions()
            assert header.api_version == 0

        nursery.start_soon(quirky_broker)
        await conn.negotiate_versions()
        assert conn.version_for(ApiKey.Metadata) == CLIENT_VERSIONS[ApiKey.Metadata].max
        conn.close()
