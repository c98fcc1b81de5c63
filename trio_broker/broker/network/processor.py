"""Kafka's ``Processor``: the connections one processor owns, each served by a task of its own.

A connection task reads one frame, decodes its header and is then *muted* while its ``Request``
is handled: the small APIs (``request_handler.INLINE_APIS``) by a plain call in this same task,
which returns the response; the others through the request channel's queue to a handler task,
the response coming back through this processor. It reads nothing more until the response is
written, so responses keep request order and later frames wait in its buffer (Kafka's staged
receives). An idle plain connection is *parked* with its processor's ``Selector``
(``selector.py``, Kafka's ``Selector``): one task polls all of them and answers their small
requests itself, waking a connection's task for the rest. The loop's steps are named as
Kafka's ``Processor``'s are: configure a new connection, read, dispatch, write, unmute,
disconnect. Each connection lives in a cancel scope whose deadline moves on every request and
response (``connections.max.idle.ms``); expiry closes that connection only. Bytes trickling in
do not keep a connection alive forever: the deadline moves when a frame *starts*, so one frame
must arrive within the idle time (slowloris). Anything a peer does wrong closes that peer's
connection with one log line and a counted reason.

Security (docs/security.md): an ``SSL``/``SASL_SSL`` listener wraps each accepted stream in a
``trio.SSLStream`` and handshakes inside the idle scope; a ``SASL_*`` listener gives each
connection a ``SaslSession`` (``sasl_session.py``). Until it has authenticated, only ApiVersions
and the SASL requests pass ``_parse`` (anything else closes the connection before a handler
sees it) and frames are limited to ``sasl.server.max.receive.size``; a failed login is answered
after ``connection.failed.authentication.delay.ms`` and the connection is closed. After
SaslHandshake v0 the tokens come as bare size-prefixed frames, as before KIP-152.

Zero-copy fetch: on a plain socket, a Fetch response may come as a ``SendFileResponse``: its
bytes and, between them, regions of segment files, sent with ``sendfile`` (``send_file.py``);
the regions' descriptors are closed once sent, or when the response is dropped unsent.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING

import trio

from ...protocol.errors import RemoteProtocolError, UnsupportedVersionError
from ...protocol.framing import NEED_DATA
from ...protocol.messages import decode_request_header, peek_correlation_id
from ..config import Listener
from ..metrics import BrokerMetrics
from ..server.context import RequestContext
from .connection import YIELD_BYTES, YIELD_FRAME_MIN, Connection, ProcessorSettings, peer_address
from .quotas import ConnectionQuotas
from .request_channel import (
    CloseConnectionResponse,
    Request,
    RequestChannel,
    Response,
    SendFileResponse,
    SendResponse,
)
from .selector import AVAILABLE as SELECTOR_AVAILABLE
from .selector import RECEIVE_SIZE, Handover, Selector
from .send_file import send_bytes, send_parts

if TYPE_CHECKING:
    import ssl

    from ..security.sasl import SaslSettings

LOGGER = logging.getLogger(__name__)

#: the rest of a big frame is read in reads of up to this size (fewer loop passes per MB)
_RECEIVE_MAX = 1 << 20
#: how long closing may take (a TLS close_notify to a peer that does not read)
_CLOSE_TIMEOUT_S = 1.0
#: TCP_NOTSENT_LOWAT of every connection: the socket reports writable only while less than this
#: is queued unsent, so big fetch answers do not pile up in the kernel and stall on zero-window
#: advertisements and retransmissions (docs/benchmarks.md, "Zero-copy fetch", has the stalls it
#: prevented).
_NOTSENT_LOWAT = 1 << 20
_TCP_NOTSENT_LOWAT = getattr(socket, "TCP_NOTSENT_LOWAT", 25 if sys.platform == "linux" else None)
#: the security protocols whose connections get TLS, and SASL
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
#: each connection's task (Trio's task tree, its instruments): the name the interpreter gives it
CONNECTION_TASK_NAME = f"{__name__}.Processor._serve_connection"


async def _recv_into(sock: trio.socket.SocketType, view: memoryview) -> int:
    """``recv_into``, a peer gone reported as ``SocketStream.receive_some`` reports it."""
    try:
        return await sock.recv_into(view)
    except OSError as exc:  # as send_file.py's writes do
        raise trio.BrokenResourceError(f"socket connection broken: {exc}") from exc


async def _recv(sock: trio.socket.SocketType, size: int,
                park: Callable[[], Awaitable[int | Handover]] | None = None
                ) -> bytes | int | Handover:
    """``SocketStream.receive_some`` on a plain socket, a checkpoint as Trio's is (cancelled
    before reading, a pass of the event loop whether it waits or not, so connections with
    requests take turns), without the layers of calls and context managers Trio puts around
    ``recv``: per small request they cost more than the read (docs/benchmarks.md, "Scale")."""
    await trio.lowlevel.checkpoint_if_cancelled()
    fd = sock.fileno()
    try:
        data = os.read(fd, size)
    except BlockingIOError:
        pass
    except OSError as exc:
        raise trio.BrokenResourceError(f"socket connection broken: {exc}") from exc
    else:
        await trio.lowlevel.cancel_shielded_checkpoint()
        return data
    if park is not None:  # the processor's selector waits for it (``selector.py``)
        return await park()
    while True:
        await trio.lowlevel.wait_readable(sock)
        try:
            return os.read(fd, size)
        except BlockingIOError:
            pass
        except OSError as exc:
            raise trio.BrokenResourceError(f"socket connection broken: {exc}") from exc


class Processor:
    """Owns a set of connections: reads their requests, writes their responses."""

    def __init__(self, index: int, *, request_channel: RequestChannel, metrics: BrokerMetrics,
                 quotas: ConnectionQuotas, settings: ProcessorSettings,
                 ssl_context: ssl.SSLContext | None = None,
                 sasl_settings: SaslSettings | None = None,
                 disconnected: list[Callable[[str], None]] | None = None) -> None:
        self.index = index
        #: told the id of every connection that closes (the server's list, filled later)
        self._disconnected = [] if disconnected is None else disconnected
        self._channel = request_channel
        self._metrics = metrics
        self._quotas = quotas
        self._settings = settings
        self._idle_s = settings.connections_max_idle_ms / 1000
        #: the idle deadline is not moved by less than this (``_move_idle_deadline``)
        self._idle_slack_s = self._idle_s / 100
        self._ssl_context = ssl_context
        self._sasl_settings = sasl_settings
        self._new_send, self._new_recv = trio.open_memory_channel[
            tuple[trio.SocketStream, Listener]](20)
        self.connections: dict[str, Connection] = {}
        #: set by ``stop_reading``: read no new request, finish the ones in flight
        self.draining = False
        self._drained: trio.Event | None = None
        #: the idle plain connections' selector, while ``run`` runs (``selector.py``)
        self._selector: Selector | None = None

    async def accept(self, stream: trio.SocketStream, listener: Listener) -> None:
        await self._new_send.send((stream, listener))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await self._run(task_status)
        finally:
            if self._selector is not None:  # every task that used it has ended
                self._selector.close()
                self._selector = None

    async def _run(self, task_status: trio.TaskStatus[None]) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._process_new_responses)
            self._channel.set_deliver(self.index, self._deliver_response)
            task_status.started()
            async for stream, listener in self._new_recv:
                # named, as the interpreter names it: a compiled method has no qualname
                nursery.start_soon(self._serve_connection, stream, listener, nursery,
                                   name=CONNECTION_TASK_NAME)

    # -- shutdown ----------------------------------------------------------------------------
    def stop_reading(self) -> None:
        """Read no new request on any connection; in-flight ones still get their answers."""
        self.draining = True
        if self._selector is not None:
            self._selector.stop_reading()

    def in_flight(self) -> int:
        return sum(1 for c in self.connections.values() if c.in_flight or c.unsent)

    async def wait_in_flight_done(self) -> None:
        """Return once no connection of this processor waits for a response."""
        while self.in_flight():
            self._drained = trio.Event()
            await self._drained.wait()

    def _request_finished(self) -> None:
        """While draining, wake ``wait_in_flight_done`` to count again."""
        if self._drained is not None:
            self._drained.set()

    # -- step: processNewResponses (queued and parked requests' responses) --------------------
    def _deliver_response(self, response: Response, now: int = 0) -> None:
        """A handler's response to a queued (or parked) request, handed straight to its
        connection's task (``now``: when it left the response queue; else it is handed over in
        the call that answered it, whose stamp is the hand-over's too: one clock read less)."""
        req = response.request
        now = now or req.api_remote_done_ns or req.api_local_done_ns or time.monotonic_ns()
        req.response_dequeued_ns = now
        conn = self.connections.get(req.context.connection_id)
        if conn is not None:
            conn.deliver(response)
        else:  # the client left before its answer: still record the request's timings
            if isinstance(response, SendFileResponse):
                response.close()
            self._metrics.request_metrics.record_timings(req.header.api_key, req, now)

    async def _process_new_responses(self) -> None:
        """Responses that came through the queue (before ``set_deliver``, or after it)."""
        async for response in self._channel.response_receiver(self.index):
            self._deliver_response(response, time.monotonic_ns())

    # -- one task per connection -------------------------------------------------------------
    async def _serve_connection(self, stream: trio.SocketStream, listener: Listener,
                                nursery: trio.Nursery) -> None:
        """Serve one accepted connection until it closes; its quota slot was taken by the
        acceptor. Whatever goes wrong closes this connection only."""
        conn = self._configure_new_connection(stream, listener)
        reason = "client_closed"
        try:
            reason = await self._process_connection(conn, nursery)
        except RemoteProtocolError as exc:
            reason = exc.reason
            LOGGER.info("closing connection %s: %s", conn.id, exc)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            reason = "client_closed"
        except OSError as exc:
            reason = "socket_error"
            LOGGER.info("closing connection %s: %s", conn.id, exc)
        finally:
            await self._process_disconnected(conn, reason)

    def _configure_new_connection(self, stream: trio.SocketStream,
                                  listener: Listener) -> Connection:
        """Kafka's ``configureNewConnections``: socket options, TLS, SASL; registered."""
        host, port = peer_address(stream)
        if _TCP_NOTSENT_LOWAT is not None:
            try:
                stream.setsockopt(socket.IPPROTO_TCP, _TCP_NOTSENT_LOWAT, _NOTSENT_LOWAT)
            except OSError:  # not a TCP socket, or a kernel without it
                pass
        transport: trio.abc.Stream = stream
        protocol = listener.security_protocol
        if protocol in TLS_PROTOCOLS:
            assert self._ssl_context is not None
            transport = trio.SSLStream(stream, self._ssl_context, server_side=True)
        conn = Connection(transport, listener, host, port,
                          self._settings.socket_request_max_bytes)
        if protocol in SASL_PROTOCOLS:
            assert self._sasl_settings is not None
            from .sasl_session import SaslSession  # only on SASL listeners

            conn.sasl = SaslSession(self._sasl_settings, transport, conn.id, host, self._metrics)
            conn.decoder.max_frame_bytes = min(self._sasl_settings.max_receive_size,
                                               conn.decoder.max_frame_bytes)
        self.connections[conn.id] = conn
        self._metrics.connections.inc()
        return conn

    async def _process_disconnected(self, conn: Connection, reason: str) -> None:
        """Kafka's ``processDisconnected``: forget the connection, release its quota slot and
        any response it will never send, count the reason, tell the ``disconnected`` callables
        (what the broker state keeps per connection), close the stream."""
        del self.connections[conn.id]
        if self._selector is not None and conn.fd >= 0:
            self._selector.forget(conn)
        conn.drop_response()
        if self.draining:
            self._request_finished()
        self._quotas.release(conn.client_host)
        self._metrics.connections.dec()
        self._metrics.connections_closed.labels(reason).inc()
        for listener in self._disconnected:
            listener(conn.id)
        with trio.CancelScope(shield=True, deadline=trio.current_time() + _CLOSE_TIMEOUT_S):
            await conn.stream.aclose()

    def _selector_for(self, conn: Connection, nursery: trio.Nursery) -> Selector | None:
        """The selector where ``conn`` waits for its requests (started with the first plain
        connection, its leader in ``nursery``); None for a connection that reads on its own
        (TLS, SASL, a test cluster's node, a platform without edge-triggered epoll)."""
        if (not SELECTOR_AVAILABLE or conn.fd < 0 or conn.sasl is not None
                or not self._channel.batched_keys):
            return None
        if self._selector is None:
            self._selector = Selector(request_channel=self._channel, metrics=self._metrics,
                                      parse=self._parse, unmute=self._move_idle_deadline)
            self._selector.start(nursery)
        return self._selector

    async def _process_connection(self, conn: Connection, nursery: trio.Nursery) -> str:
        """Read frames and answer them one at a time, in order, until the connection closes
        (the reason it closed), all within its idle scope."""
        decoder = conn.decoder
        eof = False
        ran = 0  # pipelined frames' bytes answered since this task last yielded (a read yields)
        with trio.CancelScope(deadline=trio.current_time() + self._idle_s) as idle:
            conn.idle_scope = idle
            if isinstance(conn.stream, trio.SSLStream) and not await self._handshake(conn):
                return "ssl_handshake_failed"
            sasl = conn.sasl
            # a plain connection waits for its next request in the processor's selector
            selector = self._selector_for(conn, nursery)
            park = None if selector is None else partial(selector.park, conn)
            while True:
                frame = decoder.next_frame_in_place()
                if frame is NEED_DATA:
                    ran = 0  # the read below yields, whether it waits or not
                    if conn.unsent:  # the answers to the frames read so far go out first
                        await self._send_unsent(conn)
                    if eof or self.draining:
                        return "client_closed" if eof else "shutdown"
                    # alone in its processor, a connection waits on its own socket: one
                    # wait either way, and the selector's poll would add a system call
                    got = await self._receive(conn, park if len(self.connections) > 1 else None)
                    if type(got) is Handover:  # a request the selector started
                        if (reason := await self._finish_handover(conn, got)) is not None:
                            return reason
                        continue
                    eof = not got
                    continue
                if self.draining:
                    if conn.unsent:
                        await self._send_unsent(conn)
                    return "shutdown"
                if sasl is not None and sasl.bare_tokens:
                    if not await sasl.receive_bare_token(frame):
                        return "authentication_failed"
                    self._unmute(conn)
                    continue
                try:
                    request = self._parse(conn, frame)
                except RemoteProtocolError:
                    if conn.unsent:  # answered before this frame was read, as Kafka's would be
                        await self._send_unsent(conn)
                    raise
                # a SASL listener's connections write each answer on its own (login state)
                batch = sasl is None and request.header.api_key in self._channel.batched_keys
                response = await self._dispatch(conn, request, batch)
                if sasl is not None and sasl.authenticator.failed:
                    return await sasl.answer_failed_login(request, response)
                if (reason := await self._write(conn, request, response, batch)) is not None:
                    return reason
                if request.throttle_ms:  # client quota: muted (Kafka's ThrottledChannel)
                    await trio.sleep(request.throttle_ms / 1000)
                self._unmute(conn)
                if decoder.buffered:  # pipelined frames (an answer's one write did not yield)
                    ran += max(len(frame), YIELD_FRAME_MIN)
                    if ran >= YIELD_BYTES:
                        ran = 0
                        await trio.lowlevel.checkpoint()
        return "idle_timeout"

    async def _handshake(self, conn: Connection) -> bool:
        """The TLS handshake (inside the idle scope); False when it failed."""
        assert isinstance(conn.stream, trio.SSLStream)
        try:
            await conn.stream.do_handshake()
        except trio.BrokenResourceError as exc:
            LOGGER.info("closing connection %s: TLS handshake failed: %s", conn.id,
                        exc.__cause__ or exc)
            return False
        from ..security.tls import peer_principal  # only on TLS listeners

        try:
            conn.principal = peer_principal(conn.stream)
        except ValueError as exc:  # a certificate whose subject cannot be read
            LOGGER.info("closing connection %s: %s", conn.id, exc)
            return False
        LOGGER.debug("connection %s: TLS %s, TLS principal %s", conn.id,
                     conn.stream.version(), conn.principal)
        return True

    async def _receive(self, conn: Connection,
                       park: Callable[[], Awaitable[int | Handover]] | None = None
                       ) -> int | Handover:
        """Read what the peer sent into the connection's frame buffer: the bytes read, 0 when
        the peer closed its side (whole frames already buffered are still answered). With
        ``park``, a socket found empty waits in the selector, which reads it and may answer
        requests itself: then what the selector woke the task with (bytes it read, a
        ``Handover``, ``GO_ON``)."""
        decoder = conn.decoder
        stream = conn.stream
        if type(stream) is trio.SocketStream and (
                view := decoder.frame_view(RECEIVE_SIZE)) is not None:
            # the rest of a big frame, read from a plain socket into its own buffer
            n = await _recv_into(stream.socket, view[:_RECEIVE_MAX])
            self._metrics.bytes_in.inc(n)
            decoder.received_into(n)
            return n
        size = min(max(RECEIVE_SIZE, decoder.missing_bytes()), _RECEIVE_MAX)
        data: bytes | bytearray
        if type(stream) is trio.SocketStream:
            got = await _recv(stream.socket, size, park)
            if not isinstance(got, bytes):  # what the selector woke the task with
                return got
            data = got
        else:
            data = await stream.receive_some(size)
        if data:
            self._metrics.bytes_in.inc(len(data))
            if not decoder.buffered:
                # A frame starts: it must be complete within the idle time (slowloris).
                self._move_idle_deadline(conn)
            decoder.receive_data(data)
        return len(data)

    async def _finish_handover(self, conn: Connection, handover: Handover) -> str | None:
        """Write the answer to a request the selector started (waiting for it first when it
        was queued or parked), as ``_dispatch`` and ``_write`` would; the reason to close."""
        request, response = handover.request, handover.response
        if response is None:
            response = await conn.wait_response()
        conn.in_flight = None
        if self.draining:
            self._request_finished()
        if (reason := await self._write(conn, request, response, False)) is not None:
            return reason
        if request.throttle_ms:
            await trio.sleep(request.throttle_ms / 1000)
        self._unmute(conn)
        return None

    async def _dispatch(self, conn: Connection, request: Request, batch: bool) -> Response:
        """Hand ``request`` to the handlers and return its response; the connection is muted
        meanwhile. An inline API's request is answered by this task, by a plain call; a queued
        one's (or a parked inline one's) answer comes back through this processor."""
        channel = self._channel
        if conn.unsent and not batch:  # answers held back go out before anything else
            await self._send_unsent(conn)
        conn.in_flight = request
        if request.header.api_key in channel.inline_keys:
            response = await channel.answer_inline(request)
        else:
            await channel.send_request(request)
            response = None
        if response is None:  # it waits (queued or parked): the answers before it go out first
            if conn.unsent:
                await self._send_unsent(conn)
            response = await conn.wait_response()
        conn.in_flight = None
        if self.draining:
            self._request_finished()
        return response

    async def _write(self, conn: Connection, request: Request, response: Response,
                     batch: bool) -> str | None:
        """Write ``response`` (or hold it, to write with the answers to the pipelined frames
        after it) and record its timings once written; the reason to close, if it says so."""
        metrics = self._metrics
        unsent = conn.unsent
        if isinstance(response, SendResponse):
            decoder = conn.decoder
            if unsent or (batch and decoder.buffered):
                # Pipelined frames of batched APIs: their answers are written together once
                # the buffer holds no more frames (or enough is held back).
                if (unsent.add(request, response.data) or not decoder.buffered
                        or request.throttle_ms):
                    await self._send_unsent(conn)
            else:
                await send_bytes(conn.stream, response.data)
                metrics.bytes_out.inc(len(response.data))
                metrics.request_metrics.record_timings(request.header.api_key, request,
                                                       time.monotonic_ns())
            if conn.sasl is not None:
                conn.sasl.answered(request.header)
            return None
        if unsent:
            await self._send_unsent(conn)
        if isinstance(response, SendFileResponse):
            try:
                by_sendfile = await send_parts(conn.stream, response.parts)
            finally:
                response.close()
            metrics.bytes_out.inc(response.size)
            metrics.sendfile_bytes.inc(by_sendfile)
        metrics.request_metrics.record_timings(request.header.api_key, request,
                                               time.monotonic_ns())
        if isinstance(response, CloseConnectionResponse):
            return response.reason
        return None

    async def _send_unsent(self, conn: Connection) -> None:
        """Write the answers held back while pipelined frames were answered, in one write."""
        requests, data = conn.unsent.take()
        await send_bytes(conn.stream, data)
        self._metrics.bytes_out.inc(len(data))
        now = time.monotonic_ns()
        record = self._metrics.request_metrics.record_timings
        for request in requests:
            record(request.header.api_key, request, now)

    def _unmute(self, conn: Connection) -> None:
        """An answer is out: note a login it completed, move the idle deadline."""
        sasl = conn.sasl
        if sasl is not None:
            principal = sasl.authenticator.principal
            if sasl.authenticator.complete and conn.principal != principal:
                conn.principal = principal
                conn.decoder.max_frame_bytes = self._settings.socket_request_max_bytes
                LOGGER.debug("connection %s authenticated as %s", conn.id, principal)
        self._move_idle_deadline(conn)

    def _move_idle_deadline(self, conn: Connection) -> None:
        """``connections.max.idle.ms`` from now. Moving a deadline costs a heap update: skipped
        while it would move less than 1% of the idle time (a request a few ms after its
        predecessor's response), so a connection expires after 99-100% of it."""
        idle = conn.idle_scope
        assert idle is not None
        deadline = trio.current_time() + self._idle_s
        if deadline - idle.deadline > self._idle_slack_s:
            idle.deadline = deadline

    def _parse(self, conn: Connection, frame: bytes | bytearray) -> Request:
        try:
            header = decode_request_header(frame)
        except UnsupportedVersionError as exc:
            # Kafka cannot parse such a body and closes the connection.
            raise RemoteProtocolError(
                f"{exc} (correlation id {peek_correlation_id(frame)})",
                reason="unsupported_version") from exc
        sasl = conn.sasl
        if sasl is not None:
            sasl.check_allowed(header)
        context = RequestContext(header, conn.id, conn.client_host, conn.client_port,
                                 conn.listener_name, conn.security_protocol, conn.principal,
                                 None if sasl is None else sasl.authenticator,
                                 type(conn.stream) is trio.SocketStream)
        return Request(self.index, context, frame)


__all__ = ["Processor"]
