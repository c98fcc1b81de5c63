"""The request handler pool (Kafka's ``KafkaRequestHandlerPool`` + ``KafkaApis`` dispatch).

Why a fixed pool: M handler tasks drain the bounded request channel, so the number of requests
being worked on at once is bounded no matter how many connections there are. Work that waits
(long-poll fetch, held group joins) is parked in a purgatory and answered later through
``HandlerContext.respond``; it never holds a handler task.

Why some requests are answered in their connection's task (``INLINE_APIS``): the small APIs
every client sends all the time answer at once, and the hand-off through the request queue to a
handler task and back cost two passes of Trio's event loop per request, more than the request's
own work. The pool registers ``handle_inline`` with the request channel for them: the same
dispatch, quotas, authorization and fault injection, called by the connection's task, which gets
the response back as the call's result and writes it (no queue, no hand-over). Kafka's
metrics stay meaningful: such a request never waits in a queue (``RequestQueueTimeMs`` 0), and
its handling time counts as one handler's work in ``RequestHandlerAvgIdlePercent``
(``IdleMeter.add_busy``). A request of these APIs that does wait (an OffsetCommit waiting for its
group's write, a Produce waiting for the fsync of ``flush.messages``, a Metadata auto-creating a
topic) holds only its own connection, which is muted until answered anyway.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from functools import partial

import trio

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, RemoteProtocolError
from ...protocol.messages import (
    decode_request_body,
    encode_response,
    encode_response_parts,
    error_codes,
    make_response,
)
from ..apis.metadata import handle_metadata, refresh_answer
from ..apis.registry import HANDLERS, Handler, advertised_versions
from ..server.bodies import ResponseBody
from ..server.context import CloseConnection, Deferred, HandlerContext
from ..server.state import BrokerState
from ..server.throttle import throttle_ms
from .request_channel import (
    CloseConnectionResponse,
    NoOpResponse,
    Request,
    RequestChannel,
    Response,
    SendFileResponse,
    SendResponse,
)

LOGGER = logging.getLogger(__name__)

#: APIs answered in the connection's own task: small, and answered without parking in a
#: purgatory (Fetch, group joins and syncs, transactions and admin APIs go through the queue)
INLINE_APIS: frozenset[int] = frozenset({
    ApiKey.ApiVersions, ApiKey.Metadata, ApiKey.Produce, ApiKey.ListOffsets,
    ApiKey.OffsetCommit, ApiKey.FindCoordinator, ApiKey.Heartbeat})
#: API keys compared for every request, read from their enum once: on Python 3.11 reading a
#: member through its class costs several times the comparison
_API_VERSIONS, _METADATA, _FETCH = ApiKey.ApiVersions, ApiKey.Metadata, ApiKey.Fetch
#: inline APIs whose answers to a client's pipelined requests are written together: none of
#: them waits for anything but a topic's creation (Metadata) or a ``flush.messages`` fsync
#: (Produce); one answered later (an OffsetCommit waiting for its group's write) has the
#: answers before it written first. A test cluster's node (injected latency) batches nothing.
BATCHED_APIS: frozenset[int] = INLINE_APIS


class RequestHandlerPool:
    """M handler tasks taking requests from ``channel`` and dispatching them to the APIs."""

    def __init__(self, broker: BrokerState, channel: RequestChannel, num_handlers: int, *,
                 handlers: Mapping[int, Handler] | None = None) -> None:
        self.broker = broker
        self.channel = channel
        self.num_handlers = num_handlers
        self.metrics = broker.metrics
        self.metrics.handler_idle.workers = num_handlers
        #: where the handlers after the first start, until the first queued request starts them
        self._nursery: trio.Nursery | None = None
        #: the dispatch table: ``HANDLERS``, or a test cluster node's, which checks and injects
        #: faults before each handler (``trio_broker.testing.faults``)
        self.handlers: Mapping[int, Handler] = HANDLERS if handlers is None else handlers

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """``start`` in a nursery of its own."""
        async with trio.open_nursery() as nursery:
            self.start(nursery)
            task_status.started()

    def start(self, nursery: trio.Nursery) -> None:
        """Serve from now on, the handler tasks in ``nursery`` (no pass of the event loop, as
        ``nursery.start`` costs two). One handler task at first; the others start with the
        first queued request (a client that sends only inline APIs never needs them, and each
        task costs the start a spawn and a step). They count as waiting from now."""
        now = time.monotonic_ns()
        for index in range(1, self.num_handlers):
            self.metrics.handler_idle.begin(index, now)
        self._nursery = nursery
        nursery.start_soon(self._handler_loop, 0)
        self.channel.set_inline(
            self.handle_inline, INLINE_APIS,
            batched=() if self.broker.cluster.intercepting else BATCHED_APIS)

    async def _handler_loop(self, index: int, waiting: bool = False) -> None:
        """``waiting``: the idle meter already counts this handler as waiting."""
        receiver = self.channel.request_receiver
        idle = self.metrics.handler_idle
        while True:
            if not waiting:
                idle.begin(index, time.monotonic_ns())
            waiting = False
            try:
                request = await receiver.receive()
            except trio.EndOfChannel:
                return
            finally:
                now = time.monotonic_ns()
                idle.end(index, now)
            request.dequeued_ns = now
            if self._nursery is not None:  # the first queued request: the others start
                for other in range(1, self.num_handlers):
                    self._nursery.start_soon(self._handler_loop, other, True)
                self._nursery = None
            await self.handle(request)

    async def handle_inline(self, request: Request) -> Response | None:
        """Answer ``request`` in the caller's task and return the response, to be written by
        that task; ``None`` if it was parked (its answer comes later through the request
        channel, as a queued request's). Never queued; its handling counts as one handler's
        work."""
        request.dequeued_ns = start = request.received_ns
        header = request.header
        # a client's periodic refresh of the brokers, answered as ``handle_metadata`` (the
        # handler of this table now: not a test cluster's, which checks and injects faults, nor
        # one put in its place) would, without decoding it, building a handler context or
        # walking the answer
        if (header.api_key == _METADATA
                and self.handlers.get(_METADATA) is handle_metadata
                and (answer := refresh_answer(self.broker, header.api_version,
                                              bytes(request.frame[header.body_offset:]),
                                              request.context.listener_name)) is not None):
            request.api_local_done_ns = now = time.monotonic_ns()
            request.frame = b""
            self.metrics.request_metrics.count_errors(header.api_key, answer.errors)
            self.metrics.handler_idle.add_busy(start, now)
            return SendResponse(request, encode_response(header, answer))
        response = await self._dispatch(request, hold=True)
        # answered (or parked) just now: that stamp is the end of its handling and the
        # response's hand-over to the connection, one clock read less per request
        done = request.api_local_done_ns
        if not done:  # refused before a handler answered it
            done = request.response_dequeued_ns = time.monotonic_ns()
        self.metrics.handler_idle.add_busy(start, done)
        return response

    async def handle(self, request: Request) -> None:
        """Handle a queued request; its response goes back through the request channel."""
        response = await self._dispatch(request, hold=False)
        if response is not None:
            self.channel.send_response(response)

    async def _dispatch(self, request: Request, *, hold: bool) -> Response | None:
        """Dispatch one request; every failure is confined to this request's connection.

        Returns the response when the request is refused or closes its connection, when its
        handler returned its answer, and (with ``hold``) when the handler gave it through
        ``respond`` before returning: the caller writes or sends it. Else ``None``: the answer
        went (or, deferred, will go) through the request channel."""
        header = request.header
        if header.api_key == _API_VERSIONS and header.api_version > 4:
            return api_versions_unsupported(request)
        try:
            body = decode_request_body(header, request.frame)
        except RemoteProtocolError as exc:
            LOGGER.info("closing connection %s: %s", request.context.connection_id, exc)
            return CloseConnectionResponse(request, exc.reason)
        request.frame = b""  # the body is decoded; do not keep the bytes alive while parked
        handler = self.handlers.get(header.api_key)
        if handler is None:
            return CloseConnectionResponse(request, "unsupported_version")
        request.hold = hold
        # the answer's state lives in the request: a handler that returns its answer (most do)
        # costs no closure, only this partial for one that answers later
        ctx = HandlerContext(request.context, self.broker, partial(self._respond, request))
        try:
            result = await handler(ctx, body)
        except Exception:
            LOGGER.exception("handler for %r failed; closing connection %s", header,
                             request.context.connection_id)
            request.hold = False
            if request.answered:
                return request.held
            request.answered = True
            return CloseConnectionResponse(request, "handler_error")
        if isinstance(result, Deferred):
            request.hold = False  # its answer, given later, goes through the request channel
            request.api_local_done_ns = time.monotonic_ns()
            return request.held
        if isinstance(result, CloseConnection):
            LOGGER.info("closing connection %s: %s", request.context.connection_id,
                        result.reason)
            request.api_local_done_ns = time.monotonic_ns()
            return CloseConnectionResponse(request, result.reason)
        request.hold = True  # returned: the caller writes it (or sends it, for a queued one)
        self._respond(request, result)
        return request.held

    def _respond(self, request: Request, body: ResponseBody | None) -> None:
        """``HandlerContext.respond``: the answer given by the handler before it returned
        (held for the caller with ``hold``) or later (a parked request's), sent back through
        the processor owning the connection."""
        if request.answered:
            LOGGER.error("%r answered twice; second answer dropped", request.header)
            return
        request.answered = True
        response = self._response(request, body)
        if request.hold:
            request.held = response
        else:
            self.channel.send_response(response)

    def _response(self, request: Request, body: ResponseBody | None) -> Response:
        """The response to ``request`` answered with ``body``: its handling time stamped, its
        quotas recorded, its error codes counted."""
        now = time.monotonic_ns()
        if request.api_local_done_ns:
            request.api_remote_done_ns = now
        else:
            request.api_local_done_ns = now
        request.throttle_ms = throttle_ms(self.broker, request.context, body, request.size,
                                          request.api_local_done_ns - request.dequeued_ns)
        if body is None:
            return NoOpResponse(request)
        header = request.header
        try:
            if header.api_key == _FETCH:  # its records may be file regions
                parts = encode_response_parts(header, body)
                data = parts[0] if len(parts) == 1 else None
            else:
                data = encode_response(header, body)
        except Exception:
            LOGGER.exception("failed to encode the response to %r", header)
            return CloseConnectionResponse(request, "encode_error")
        self.metrics.request_metrics.count_errors(header.api_key, error_codes(body, 3))
        return (SendResponse(request, data) if data is not None
                else SendFileResponse(request, parts))


def api_versions_unsupported(request: Request) -> SendResponse:
    """Answer an ApiVersions version we do not know in the v0 layout, listing our ranges.

    The client then retries with a version from the list (KIP-511: a broker answers a newer
    ApiVersions request than it knows with UNSUPPORTED_VERSION in v0's layout).
    """
    header = request.header
    versions = advertised_versions()
    cls = make_response(ApiKey.ApiVersions, 0, error_code=0, api_keys=[])
    body = make_response(
        ApiKey.ApiVersions, 0, error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[type(cls).ApiVersion(api_key=int(k), min_version=v.min, max_version=v.max)
                  for k, v in sorted(versions.items())])
    data = encode_response(header, body, version=0)
    request.api_local_done_ns = time.monotonic_ns()
    return SendResponse(request, data)
