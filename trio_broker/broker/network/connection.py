"""One client connection's state, and the settings a processor applies to every connection.

Why apart from ``processor.py``: the connection is what a processor's task and the queued
requests' responses meet at (the response slot), and it is all a connection task needs to know
about itself.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import attrs
import trio

from ...protocol.framing import FrameDecoder
from ..config import BrokerConfig, Listener
from .request_channel import Request, Response, SendFileResponse

if TYPE_CHECKING:
    from .sasl_session import SaslSession

_connection_ids = itertools.count(1)
#: answers held back for one write stop growing here (a socket buffer's worth)
UNSENT_MAX_BYTES = 65536
#: pipelined frames a connection task answers between two yields: this many bytes of them,
#: each counted as YIELD_FRAME_MIN at least (so 16 small ones), so one connection's buffer does
#: not hold the loop, nor does each small request pay a loop pass (docs/architecture.md)
YIELD_BYTES, YIELD_FRAME_MIN = 65536, 4096


@attrs.frozen
class ProcessorSettings:
    """The broker settings a processor applies to each connection (Kafka's names)."""

    #: connections.max.idle.ms: a connection with no request or response this long is closed
    connections_max_idle_ms: int
    #: socket.request.max.bytes: the largest request frame accepted
    socket_request_max_bytes: int

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ProcessorSettings:
        return cls(config.connections_max_idle_ms, config.socket_request_max_bytes)


class UnsentResponses:
    """Answers to a connection's pipelined requests not yet written, in request order.

    Why: a small answer costs a ``send`` (on loopback the kernel delivers it to the reader in
    that call) that costs more than the request's own work; a client that pipelines gets the
    answers to the frames it already sent in one write, as the bare echo server writes them.
    Only frames already read are answered before the write, so no answer waits for a client.
    """

    __slots__ = ("data", "requests", "size")

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.data: list[bytes] = []
        self.size = 0

    def __bool__(self) -> bool:
        return bool(self.requests)

    def add(self, request: Request, data: bytes) -> bool:
        """Hold ``data``, the answer to ``request``; True once enough is held to write."""
        self.requests.append(request)
        self.data.append(data)
        self.size += len(data)
        return self.size >= UNSENT_MAX_BYTES

    def hold(self, requests: list[Request], data: bytes) -> None:
        """Hold the unwritten rest ``data`` of the answers to ``requests`` (written in part)."""
        self.requests.extend(requests)
        self.data.append(data)
        self.size += len(data)

    def take(self) -> tuple[list[Request], bytes]:
        """The requests answered and their answers as one run of bytes; empties the holder."""
        requests, data = self.requests, self.data
        self.requests, self.data, self.size = [], [], 0
        return requests, data[0] if len(data) == 1 else b"".join(data)


class Connection:
    """One client connection: its stream, frame buffer, idle scope and the slot for the response
    to a queued (or parked) request; an inline request's response is its handler's return value."""

    __slots__ = ("_response", "_waiter", "client_host", "client_port", "decoder", "fd", "id",
                 "idle_scope", "in_flight", "listener_name", "principal", "sasl",
                 "security_protocol", "stream", "unsent")

    def __init__(self, stream: trio.abc.Stream, listener: Listener, client_host: str,
                 client_port: int, max_frame_bytes: int) -> None:
        self.id = f"{client_host}:{client_port}-{next(_connection_ids)}"
        self.stream = stream
        self.listener_name = listener.name
        self.security_protocol = listener.security_protocol
        self.client_host = client_host
        self.client_port = client_port
        self.decoder = FrameDecoder(max_frame_bytes)
        #: the socket's descriptor on a plain socket (-1 on any other stream)
        self.fd = stream.socket.fileno() if type(stream) is trio.SocketStream else -1
        self.idle_scope: trio.CancelScope | None = None
        self.in_flight: Request | None = None
        #: the SASL session of a SASL listener's connection (None elsewhere)
        self.sasl: SaslSession | None = None
        #: "User:..." from SASL or a TLS client certificate; None = anonymous
        self.principal: str | None = None
        self._response: Response | None = None
        self._waiter: trio.Event | None = None
        #: answers to pipelined requests not yet written (``UnsentResponses``)
        self.unsent = UnsentResponses()

    def deliver(self, response: Response) -> None:
        """The response to the queued (or parked) request in flight, from its processor."""
        self._response = response
        if self._waiter is not None:
            self._waiter.set()

    async def wait_response(self) -> Response:
        """The response to the queued (or parked) request in flight; returns at once (no
        checkpoint) if it has already been delivered: no loop pass is spent."""
        while (response := self._response) is None:
            self._waiter = trio.Event()
            await self._waiter.wait()
        self._waiter = None
        self._response = None
        return response

    def drop_response(self) -> None:
        """The connection is closing: release a response it will never send."""
        response, self._response = self._response, None
        if isinstance(response, SendFileResponse):
            response.close()


def peer_address(stream: trio.SocketStream) -> tuple[str, int]:
    """(host, port) of the connection's peer; ("unknown", 0) when the socket cannot tell."""
    try:
        host, port = stream.socket.getpeername()[:2]
    except OSError:
        return "unknown", 0
    return str(host), int(port)


__all__ = ["UNSENT_MAX_BYTES", "YIELD_BYTES", "YIELD_FRAME_MIN", "Connection", "ProcessorSettings",
           "UnsentResponses", "peer_address"]
