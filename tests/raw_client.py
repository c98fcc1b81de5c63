"""A minimal raw Kafka-protocol client for tests that need byte-level control."""

from __future__ import annotations

import itertools
import struct
from typing import Any

import trio

from trio_broker.protocol.framing import NEED_DATA, FrameDecoder
from trio_broker.protocol.messages import decode_response, encode_request, make_request

_ids = itertools.count(1)


class RawClient:
    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder()

    @classmethod
    async def connect(cls, host: str, port: int) -> RawClient:
        return cls(await trio.open_tcp_stream(host, port))

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    def encode(self, api_key: int, version: int, correlation_id: int | None = None,
               **fields: Any) -> tuple[int, bytes]:
        cid = next(_ids) if correlation_id is None else correlation_id
        body = make_request(api_key, version, **fields)
        return cid, encode_request(api_key, version, cid, "raw-client", body)

    async def send(self, api_key: int, version: int, **fields: Any) -> int:
        cid, data = self.encode(api_key, version, **fields)
        await self.stream.send_all(data)
        return cid

    async def read_frame(self) -> bytes | None:
        """The next response frame, or None on EOF."""
        while True:
            frame = self.decoder.next_frame()
            if frame is not NEED_DATA:
                assert isinstance(frame, bytes)
                return frame
            data = await self.stream.receive_some(65536)
            if not data:
                return None
            self.decoder.receive_data(data)

    async def receive(self, api_key: int, version: int) -> tuple[int, Any]:
        frame = await self.read_frame()
        assert frame is not None, "connection closed before the response"
        return decode_response(api_key, version, frame)

    async def request(self, api_key: int, version: int, **fields: Any) -> Any:
        cid = await self.send(api_key, version, **fields)
        got, body = await self.receive(api_key, version)
        assert got == cid
        return body

    async def is_closed_by_peer(self) -> bool:
        """True once the broker has closed the connection (EOF or reset)."""
        try:
            return await self.read_frame() is None
        except (trio.BrokenResourceError, ConnectionResetError):
            return True

    async def aclose(self) -> None:
        await self.stream.aclose()


def size_prefix(n: int) -> bytes:
    return struct.pack(">i", n)
