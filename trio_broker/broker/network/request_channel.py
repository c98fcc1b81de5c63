"""The request channel: one bounded queue of requests, one response queue per processor.

Why (Kafka's ``RequestChannel``): the bounded request queue is the broker's backpressure: when
handlers fall behind, connections block on ``send`` and stop reading their sockets. Responses go
back to the processor that owns the connection, so a connection's bytes are only ever touched by
its own processor.

Why some requests skip the queue: the small APIs that answer without waiting (``set_inline``:
ApiVersions, Metadata, Produce, ...) are answered by the handler pool's code called by the
connection's own task (``answer_inline``), which gets the response back as the call's result and
writes it: the queue and the hand-off to a handler task and back cost two passes of Trio's event
loop per request, more than the work of such a request. One of them that parks is answered
later through ``send_response``, as a queued request is. Everything runs on the one event loop
either way; the connection stays muted while its request is in flight.

Responses are a closed family: send bytes, send bytes and file regions (zero-copy fetch), no-op
(acks=0 produce), or close.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Coroutine
from typing import Any

import trio

from ...protocol.messages import RequestHeader
from ..metrics import RequestTimes
from ..server.context import RequestContext
from ..storage import FileRegion


class Request(RequestTimes):
    """A decoded-header request on its way through the pipeline, with Kafka's timestamps.

    It names its connection by ``context.connection_id`` and its owning processor by index,
    never by reference: the response finds its way back through the processor's table of
    connections, and a connection that closed meanwhile simply is not found there.
    """

    __slots__ = ("answered", "context", "frame", "header", "held", "hold", "processor", "size",
                 "throttle_ms")

    def __init__(self, processor: int, context: RequestContext,
                 frame: bytes | bytearray) -> None:
        # Performance: one request, one call; the stamps are RequestTimes' (set inline).
        self.received_ns = time.monotonic_ns()
        self.dequeued_ns = self.api_local_done_ns = self.api_remote_done_ns = 0
        self.response_dequeued_ns = 0
        self.api_version = context.header.api_version
        self.processor = processor
        self.context = context
        self.header: RequestHeader = context.header
        self.frame = frame
        #: client quota throttle: the connection stays muted this long after the response
        self.throttle_ms = 0
        #: set by the handler pool as it dispatches: the frame's size; whether the handler
        #: answered; whether that answer is ``held`` for the caller to write (an inline
        #: request's) rather than sent through the channel
        self.size = len(frame)
        self.answered = False
        self.hold = False
        self.held: Response | None = None


class Response:
    """Base of the response family."""

    __slots__ = ("request",)

    def __init__(self, request: Request) -> None:
        self.request = request


class SendResponse(Response):
    """Bytes to write: the whole response frame."""

    __slots__ = ("data",)

    def __init__(self, request: Request, data: bytes) -> None:
        self.request = request  # not through ``super()``: one per answer, the call costs more
        self.data = data


class SendFileResponse(Response):
    """A response frame in parts: bytes, and file regions to send with ``sendfile`` (a Fetch's
    records on a plaintext connection). Whoever drops it unsent must ``close`` it."""

    __slots__ = ("parts", "size")

    def __init__(self, request: Request, parts: list[bytes | FileRegion]) -> None:
        super().__init__(request)
        self.parts = parts
        self.size = sum(map(len, parts))

    def close(self) -> None:
        """Close the regions' file descriptors (after sending, or instead of it)."""
        for part in self.parts:
            if isinstance(part, FileRegion):
                part.close()


class NoOpResponse(Response):
    """No bytes go back (Produce with acks=0); the connection simply unmutes."""

    __slots__ = ()


class CloseConnectionResponse(Response):
    """The request could not be served; close its connection (Kafka's behaviour)."""

    __slots__ = ("reason",)

    def __init__(self, request: Request, reason: str) -> None:
        super().__init__(request)
        self.reason = reason


class RequestChannel:
    """One bounded request queue shared by all processors; one response queue per processor."""

    def __init__(self, queued_max_requests: int, num_processors: int) -> None:
        self._req_send, self._req_recv = trio.open_memory_channel[Request](queued_max_requests)
        # A connection has at most one request in flight (it is muted until answered), so the
        # response queues are bounded by the number of connections; they never block a handler.
        self._resp = [trio.open_memory_channel[Response](math.inf) for _ in range(num_processors)]
        #: per processor: a function that hands a response to its connection at once
        self._deliver: list[Callable[[Response], None] | None] = [None] * num_processors
        #: the APIs answered in the sender's task (``set_inline``)
        self.inline_keys: frozenset[int] = frozenset()
        #: inline APIs whose answers to pipelined requests may be written together
        self.batched_keys: frozenset[int] = frozenset()
        #: ``await answer_inline(request)``, for a request of ``inline_keys``: answer it in the
        #: caller's task and return the response; ``None`` if it was parked (its response then
        #: comes through ``send_response``, as a queued request's)
        self.answer_inline: Callable[[Request], Coroutine[Any, Any, Response | None]] = _no_inline

    def set_inline(self, answer: Callable[[Request], Coroutine[Any, Any, Response | None]] | None,
                   api_keys: Collection[int] = (), batched: Collection[int] = ()) -> None:
        """Have requests of ``api_keys`` answered by ``await answer(request)`` in the task that
        reads them (``answer_inline``), instead of queueing them for a handler task (``None``:
        queue everything).

        ``batched`` (a subset of ``api_keys``): APIs answered without waiting for anything, so
        a connection may answer the next pipelined request of one of them before it writes
        the answers before it, and write them all at once."""
        self.answer_inline = answer or _no_inline
        self.inline_keys = frozenset(api_keys) if answer is not None else frozenset()
        self.batched_keys = self.inline_keys & frozenset(batched)

    async def send_request(self, request: Request) -> None:
        """Queue ``request`` for the handlers (waiting while the queue is full); its response
        comes through ``send_response``."""
        await self._req_send.send(request)

    @property
    def request_receiver(self) -> trio.MemoryReceiveChannel[Request]:
        return self._req_recv

    def request_queue_size(self) -> int:
        return self._req_send.statistics().current_buffer_used

    def response_queue_size(self) -> int:
        return sum(s.statistics().current_buffer_used for s, _ in self._resp)

    def set_deliver(self, processor: int, deliver: Callable[[Response], None] | None) -> None:
        """Let ``processor`` take the responses to queued and parked requests directly
        (``deliver(response)`` on the event loop, never blocking) instead of through its
        response queue: one task hand-off less per request. ``None`` goes back to the queue."""
        self._deliver[processor] = deliver

    def send_response(self, response: Response) -> None:
        """Hand a response to the processor owning the request's connection (never blocks)."""
        deliver = self._deliver[response.request.processor]
        if deliver is not None:
            deliver(response)
            return
        try:
            self._resp[response.request.processor][0].send_nowait(response)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass  # shutting down: the connection is gone

    def response_receiver(self, processor: int) -> trio.MemoryReceiveChannel[Response]:
        return self._resp[processor][1]

    def close(self) -> None:
        self._req_send.close()
        for s, _ in self._resp:
            s.close()


async def _no_inline(request: Request) -> Response | None:
    raise RuntimeError(f"no inline answer is set for {request.header.api_name}")
