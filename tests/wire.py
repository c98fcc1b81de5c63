"""The raw wire helper: byte-level control over one Kafka connection, for tests of the broker.

Built on the client core: frames are encoded by its connection state machine (with a chosen
correlation id when a test wants one), responses are framed by it (size checked before
buffering), and ``request`` matches each answer to its request through its in-flight FIFO, so a
wrong correlation id fails the test. Nothing else is decided for the test: it picks every
version, may send raw bytes, read frames as they come, and decode them as it likes. Request
bodies for the common calls come from the core's builders at the version the test pins.
"""

from __future__ import annotations

import struct
from typing import Any

import trio

from trio_broker.client.core.admin import NewTopic, create_topics_request, parse_create_topics
from trio_broker.client.core.connection import NEED_DATA, ClientConnection
from trio_broker.client.core.fetch import (
    FetchedPartition,
    fetch_entry,
    fetch_request,
    parse_fetch,
)
from trio_broker.client.core.offsets import list_offsets_request, parse_list_offsets
from trio_broker.client.core.produce import (
    init_producer_id_request,
    parse_init_producer_id,
    parse_produce,
    produce_request,
)
from trio_broker.client.core.structs import EARLIEST, LATEST, TopicPartition
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.batch import iter_batches
from trio_broker.protocol.messages import decode_response, make_request
from trio_broker.protocol.records import Record, build_batch, decode_batches

__all__ = ["EARLIEST", "LATEST", "RawClient", "batch_sizes", "create_topic", "fetch",
           "fetch_body", "high_watermark", "idempotent_batch", "init_producer_id",
           "list_offsets", "produce", "produce_one", "records_of", "size_prefix"]

_RECEIVE_BYTES = 65536


class RawClient:
    """One connection, driven by hand."""

    def __init__(self, stream: trio.abc.Stream | None, *, client_id: str = "raw-client") -> None:
        self.stream = stream
        self.conn = ClientConnection(client_id, address="the broker under test")

    @classmethod
    async def connect(cls, host: str, port: int) -> RawClient:
        return cls(await trio.open_tcp_stream(host, port))

    # --- writing -------------------------------------------------------------------------

    def encode(self, api_key: int, version: int, correlation_id: int | None = None, *,
               body: Any = None, **fields: Any) -> tuple[int, bytes]:
        """(correlation id, frame) of one request, not sent and not expected back."""
        message = make_request(api_key, version, **fields) if body is None else body
        _, frame = self.conn.send_request(api_key, version, message, expect_response=False,
                                          correlation_id=correlation_id)
        return struct.unpack_from(">i", frame, 8)[0], frame

    async def send_raw(self, data: bytes) -> None:
        assert self.stream is not None
        await self.stream.send_all(data)

    async def send(self, api_key: int, version: int, *, body: Any = None,
                   **fields: Any) -> int:
        """Send one request (answered later through ``receive``); its correlation id."""
        cid, frame = self.encode(api_key, version, body=body, **fields)
        await self.send_raw(frame)
        return cid

    # --- reading -------------------------------------------------------------------------

    async def read_frame(self) -> bytes | None:
        """The next response frame (size prefix stripped), or None on EOF."""
        assert self.stream is not None
        while True:
            frame = self.conn.next_frame()
            if frame is not NEED_DATA:
                assert isinstance(frame, bytes)
                return frame
            data = await self.stream.receive_some(_RECEIVE_BYTES)
            if not data:
                return None
            self.conn.receive_data(data)

    async def receive(self, api_key: int, version: int) -> tuple[int, Any]:
        """(correlation id, body) of the next frame, decoded as ``api_key`` v``version``."""
        frame = await self.read_frame()
        assert frame is not None, "connection closed before the response"
        return decode_response(api_key, version, frame)

    async def request(self, api_key: int, version: int, *, body: Any = None,
                      **fields: Any) -> Any:
        """Send one request and return its answer, matched by correlation id."""
        message = make_request(api_key, version, **fields) if body is None else body
        request, frame = self.conn.send_request(api_key, version, message)
        await self.send_raw(frame)
        raw = await self.read_frame()
        assert raw is not None, "connection closed before the response"
        response = self.conn.receive_frame(raw)  # raises unless it answers this request
        assert response.request is request
        return response.body

    async def is_closed_by_peer(self) -> bool:
        """True once the broker has closed the connection (EOF or reset)."""
        try:
            return await self.read_frame() is None
        except (trio.BrokenResourceError, ConnectionResetError):
            return True

    async def aclose(self) -> None:
        assert self.stream is not None
        await self.stream.aclose()


def size_prefix(n: int) -> bytes:
    return struct.pack(">i", n)


# --- the common calls, at versions the tests pin ----------------------------------------------

async def produce(client: RawClient, topic: str, batches: dict[int, bytes], *, acks: int = 1,
                  version: int = 7) -> dict[int, tuple[int, int]]:
    """{partition: (error code, base offset)}"""
    body = produce_request(version, ((topic, p, b) for p, b in batches.items()), acks=acks,
                           timeout_ms=10_000)
    answers = parse_produce(await client.request(ApiKey.Produce, version, body=body))
    return {tp.partition: (r.error, r.base_offset) for tp, r in answers.items()}


async def produce_one(client: RawClient, topic: str, batch: bytes, *, partition: int = 0,
                      acks: int = -1) -> tuple[int, int]:
    """(error code, base offset) of one batch."""
    [result] = (await produce(client, topic, {partition: batch}, acks=acks)).values()
    return result


def fetch_body(topic: str, offsets: dict[int, int], *, version: int = 11,
               max_wait_ms: int = 0, min_bytes: int = 1, max_bytes: int = 50 << 20,
               partition_max_bytes: int = 1 << 20) -> Any:
    return fetch_request(version, [(topic, fetch_entry(p, o, partition_max_bytes))
                                   for p, o in offsets.items()],
                         max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes)


async def fetch(client: RawClient, topic: str, offsets: dict[int, int], *, version: int = 11,
                **kwargs: Any) -> dict[int, FetchedPartition]:
    """{partition: what one Fetch returned for it}"""
    body = fetch_body(topic, offsets, version=version, **kwargs)
    code, parts = parse_fetch(await client.request(ApiKey.Fetch, version, body=body))
    assert code == 0
    return {tp.partition: part for tp, part in parts.items()}


async def list_offsets(client: RawClient, topic: str, partitions: list[int], timestamp: int,
                       *, version: int = 3) -> dict[int, tuple[int, int, int]]:
    """{partition: (error code, offset, timestamp)}"""
    body = list_offsets_request(version, {TopicPartition(topic, p): timestamp
                                          for p in partitions})
    answers = parse_list_offsets(await client.request(ApiKey.ListOffsets, version, body=body))
    return {tp.partition: (code, found.offset, found.timestamp)
            for tp, (code, found) in answers.items()}


async def high_watermark(client: RawClient, topic: str, partition: int = 0) -> int:
    [(code, offset, _)] = (await list_offsets(client, topic, [partition], LATEST,
                                              version=2)).values()
    assert code == 0
    return offset


async def create_topic(client: RawClient, name: str, partitions: int = 1, *,
                       version: int = 2) -> None:
    body = create_topics_request(version, [NewTopic(name, partitions, 1)], timeout_ms=10_000)
    answers = parse_create_topics(await client.request(ApiKey.CreateTopics, version, body=body))
    assert [code for _, code, _ in answers] == [0], answers


async def init_producer_id(client: RawClient, version: int = 1) -> tuple[int, int, int]:
    """(error code, producer id, epoch)"""
    return parse_init_producer_id(await client.request(
        ApiKey.InitProducerId, version, body=init_producer_id_request(version)))


def idempotent_batch(producer_id: int, base_sequence: int, count: int = 3, *,
                     epoch: int = 0) -> bytes:
    return build_batch(
        [(b"k", b"seq-%d" % (base_sequence + i)) for i in range(count)],
        producer_id=producer_id, producer_epoch=epoch, base_sequence=base_sequence)


def records_of(data: bytes) -> list[Record]:
    return [r for _, records in decode_batches(data) for r in records]


def batch_sizes(data: bytes) -> list[int]:
    """Sizes of the whole batches in a fetched payload; asserts there is no partial tail."""
    sizes = [h.size for _, h in iter_batches(data)]
    assert sum(sizes) == len(data), "fetch returned a partial batch"
    return sizes
