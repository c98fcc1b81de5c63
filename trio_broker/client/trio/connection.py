"""One TCP connection to one broker: pipelined requests, responses matched in order.

Why this shape (Kafka's ``KafkaChannel`` + ``InFlightRequests``, in Trio):

* Sending never waits for a response. ``send`` registers the request in the in-flight queue and
  appends its frame to a write buffer without awaiting anything, so registration order is write
  order; a writer task flushes whatever is buffered in one ``send_all``. A caller cancelled after
  ``send`` cannot leave half a frame on the wire.
* The in-flight queue is bounded by ``max.in.flight.requests.per.connection``; ``send`` waits for
  a slot. Produce with ``acks=0`` gets no response, so it never takes a slot.
* One reader task per connection feeds what it reads to the client core's connection state
  machine (``client.core.connection``), which matches each response to the oldest request in
  flight. Brokers answer in request order, so a correlation id other than the head's means the
  stream is unusable: the connection closes and every in-flight request fails with a retriable
  ``CorrelationIdMismatchError``.
* Timeouts live in the reader's cancel scope, whose deadline is the earliest in-flight deadline
  (``request.timeout.ms``) or, with nothing in flight, the idle deadline
  (``connections.max.idle.ms``). A request timeout closes the connection and fails all its
  requests, as the Java client does; an idle expiry just closes it.

Connection states::

    CONNECTING --(tcp [+ TLS] + ApiVersions [+ SASL])--> READY
               --(error / timeout / idle / close())--> CLOSED

ApiVersions and the version of each request come from the client core (``client.core.versions``:
v3 first with Java's and librdkafka's fallbacks; then the highest version in both the broker's
range and the client's own); so does the SASL login (``client.core.sasl``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import trio

from ...protocol.api_keys import ApiKey
from ...protocol.messages import make_request
from ..core.connection import NEED_DATA, ClientConnection, InFlight
from ..core.errors import (
    KafkaConnectionError,
    KafkaError,
    RequestTimedOutError,
)
from ..core.sasl import SaslAuthentication, SaslCredentials, SaslStep
from ..core.versions import ApiVersionsExchange, api_versions_request, choose_version

LOGGER = logging.getLogger(__name__)

#: reads of this size; an answer with more than this still missing is read into one buffer of
#: its size (``frame_view``) instead of a buffer grown read by read
_RECEIVE_BYTES = 1 << 18

#: Body builders: keyword fields (any version ignores fields it lacks) or a callable of the
#: chosen version.
BodySpec = dict[str, Any] | Callable[[int], Any]
ResponseCallback = Callable[["InFlightRequest"], None]


class InFlightRequest:
    """A sent request awaiting its response: ``await wait()`` or a callback from the reader."""

    __slots__ = ("_event", "api_key", "api_version", "callback", "correlation_id", "deadline",
                 "done", "error", "response")

    def __init__(self, correlation_id: int, api_key: int, api_version: int, deadline: float,
                 callback: ResponseCallback | None = None) -> None:
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.api_version = api_version
        self.deadline = deadline
        self.callback = callback
        self.done = False
        self.response: Any = None
        self.error: BaseException | None = None
        self._event: trio.Event | None = None

    def _finish(self, response: Any, error: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        self.response = response
        self.error = error
        if self._event is not None:
            self._event.set()
        if self.callback is not None:
            self.callback(self)

    async def wait(self) -> Any:
        """The decoded response body; raises the error that failed the request."""
        if not self.done:
            if self._event is None:
                self._event = trio.Event()
            await self._event.wait()
        else:
            await trio.lowlevel.checkpoint()
        if self.error is not None:
            raise self.error
        return self.response


class BrokerConnection:
    """A connection to one broker node; created by ``NetworkClient``, never by applications."""

    def __init__(self, node_id: int, host: str, port: int, *, client_id: str | None,
                 request_timeout_s: float, max_in_flight: int, idle_timeout_s: float,
                 on_close: Callable[[BrokerConnection], None] | None = None) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.max_in_flight = max_in_flight
        self.where = f"node {node_id}"
        self._state = ClientConnection(client_id, address=self.where)
        #: requests sent and not yet answered, oldest first (``InFlight.context`` is the
        #: ``InFlightRequest`` a caller waits on)
        self.in_flight = self._state.in_flight
        self.api_versions: dict[int, tuple[int, int]] = {}
        #: feature name -> level the broker finalized (ApiVersions v3+, KIP-584)
        self.finalized_features: dict[str, int] = {}
        self.closed = False
        self.close_reason: KafkaError | None = None
        self._on_close = on_close
        self._stream: trio.abc.Stream | None = None
        self._slots = trio.Semaphore(max_in_flight)
        self._write_buffer = bytearray()
        self._write_wakeup = trio.Event()
        self._write_drained = trio.Event()
        self._last_active = trio.current_time()
        self._read_scope: trio.CancelScope | None = None
        self._cancel_scope = trio.CancelScope()
        self._closed_event = trio.Event()
        self._version_cache: dict[int, int] = {}

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port} {state}>"

    # --- lifecycle ---------------------------------------------------------------------------

    async def run(self, stream: trio.abc.Stream, *,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own ``stream``: run the reader and writer until the connection closes."""
        self._stream = stream
        try:
            with self._cancel_scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._writer)
                    task_status.started()
                    await self._reader()
                    nursery.cancel_scope.cancel()
        finally:
            if not self.closed:
                self._fail(KafkaConnectionError(f"connection to node {self.node_id} closed"))
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            self._closed_event.set()

    async def wait_closed(self) -> None:
        await self._closed_event.wait()

    def close(self, reason: KafkaError | None = None) -> None:
        """Close now; in-flight requests fail with ``reason`` (a retriable connection error)."""
        if not self.closed:
            self._fail(reason or KafkaConnectionError(
                f"connection to node {self.node_id} closed by the client"))

    def _fail(self, error: KafkaError) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = error
        self._cancel_scope.cancel()
        self._write_wakeup.set()
        self._write_drained.set()
        for request in self._state.fail_all():
            self._slots.release()
            request.context._finish(None, error)
        if self._on_close is not None:
            self._on_close(self)

    # --- versions and authentication ---------------------------------------------------------

    def version_for(self, api_key: int) -> int:
        """The highest version of ``api_key`` both the broker and this client support."""
        version = self._version_cache.get(api_key)
        if version is None:
            version = self._version_cache[api_key] = choose_version(
                api_key, self.api_versions, f"broker {self.node_id}")
        return version

    def supports(self, api_key: int) -> bool:
        try:
            self.version_for(api_key)
        except KafkaError:
            return False
        return True

    async def negotiate_versions(self) -> None:
        """ApiVersions, with the client core's fallbacks."""
        exchange = ApiVersionsExchange(f"node {self.node_id}")
        while True:
            request = await self.send(ApiKey.ApiVersions, api_versions_request,
                                      version=exchange.version, raw=True)
            assert request is not None
            found = exchange.receive(await request.wait())
            if found is not None:
                self.api_versions = found
                self.finalized_features = exchange.finalized_features
                self._version_cache.clear()
                return

    async def authenticate(self, credentials: SaslCredentials) -> None:
        """The SASL login (after ApiVersions, before anything else)."""
        auth = SaslAuthentication(credentials, f"node {self.node_id} ({self.host}:{self.port})")
        step: SaslStep | None = auth.first()
        while step is not None:
            step = auth.receive(await self.request(step.api_key, step.build))

    # --- requests ----------------------------------------------------------------------------

    async def send(self, api_key: int, body: BodySpec, *, expect_response: bool = True,
                   timeout_s: float | None = None, callback: ResponseCallback | None = None,
                   version: int | None = None, raw: bool = False) -> InFlightRequest | None:
        """Queue one request for writing; waits only for an in-flight slot.

        Returns the ``InFlightRequest``. A request that expects no response (Produce with
        acks=0) returns None once its bytes are written to the socket, which is all the
        acknowledgement it will get. Raises a ``KafkaConnectionError`` if the connection is
        closed or closes while waiting.
        """
        if self.closed:
            raise self._closed_error()
        if not expect_response:
            version = self.version_for(api_key) if version is None else version
            message = body(version) if callable(body) else make_request(api_key, version, **body)
            drained = self._write_drained
            _, frame = self._state.send_request(api_key, version, message,
                                                expect_response=False)
            self._write(frame)
            await drained.wait()
            if self.closed:
                raise self._closed_error()
            return None
        await self._slots.acquire()
        if self.closed:
            self._slots.release()
            raise self._closed_error()
        return self._register(api_key, body, timeout_s, callback, version, raw)

    def can_send(self) -> bool:
        """Whether ``send_nowait`` would succeed (open, with a free in-flight slot)."""
        return not self.closed and self._slots.value > 0

    def send_nowait(self, api_key: int, body: BodySpec, *, timeout_s: float | None = None,
                    callback: ResponseCallback | None = None,
                    version: int | None = None) -> InFlightRequest:
        """``send`` when ``can_send()``; raises ``trio.WouldBlock`` without a free slot."""
        if self.closed:
            raise self._closed_error()
        self._slots.acquire_nowait()
        return self._register(api_key, body, timeout_s, callback, version, False)

    def _register(self, api_key: int, body: BodySpec, timeout_s: float | None,
                  callback: ResponseCallback | None, version: int | None,
                  raw: bool) -> InFlightRequest:
        # the caller holds an in-flight slot; nothing here awaits, so the order requests
        # are registered in is the order their frames are written in
        try:
            if version is None:
                version = self.version_for(api_key)
            message = body(version) if callable(body) else make_request(api_key, version, **body)
            deadline = trio.current_time() + (self.request_timeout_s if timeout_s is None
                                              else timeout_s)
            request = InFlightRequest(0, api_key, version, deadline, callback)
            wire, frame = self._state.send_request(api_key, version, message, context=request,
                                                   raw=raw)
        except BaseException:
            self._slots.release()
            raise
        assert wire is not None
        request.correlation_id = wire.correlation_id
        scope = self._read_scope
        if scope is not None and deadline < scope.deadline:
            scope.deadline = deadline
        self._write(frame)
        return request

    async def request(self, api_key: int, body: BodySpec, *,
                      timeout_s: float | None = None) -> Any:
        """Send and wait for the decoded response body."""
        request = await self.send(api_key, body, timeout_s=timeout_s)
        assert request is not None
        return await request.wait()

    def _closed_error(self) -> KafkaError:
        return self.close_reason or KafkaConnectionError(f"connection to node {self.node_id} "
                                                         "is closed")

    def _earliest_deadline(self) -> float:
        return min((r.context.deadline for r in self.in_flight), default=math.inf)

    def _write(self, frame: bytes) -> None:
        self._write_buffer += frame
        self._last_active = trio.current_time()
        self._write_wakeup.set()

    async def _writer(self) -> None:
        stream = self._stream
        assert stream is not None
        while True:
            await self._write_wakeup.wait()
            self._write_wakeup = trio.Event()
            if self.closed:
                return
            while self._write_buffer:
                data = bytes(self._write_buffer)
                self._write_buffer.clear()
                with trio.move_on_after(self.request_timeout_s) as scope:
                    try:
                        await stream.send_all(data)
                    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                        self._fail(KafkaConnectionError(
                            f"write to node {self.node_id} failed: {exc!r}"))
                        return
                if scope.cancelled_caught:
                    self._fail(RequestTimedOutError(
                        f"write to node {self.node_id} stalled for {self.request_timeout_s} s"))
                    return
                self._last_active = trio.current_time()
            self._write_drained.set()
            self._write_drained = trio.Event()

    async def _reader(self) -> None:
        stream = self._stream
        assert stream is not None
        state = self._state
        in_flight = self.in_flight
        # a plain TCP connection's socket, read into a big answer's own buffer (frame_view)
        plain = stream.socket if type(stream) is trio.SocketStream else None
        while True:
            idle_deadline = self._last_active + self.idle_timeout_s
            deadline = min(self._earliest_deadline(), idle_deadline)
            got = 0
            with trio.CancelScope(deadline=deadline) as scope:
                self._read_scope = scope
                try:
                    if plain is not None and (
                            view := state.frame_view(_RECEIVE_BYTES)) is not None:
                        got = await plain.recv_into(view)
                        state.received_into(got)
                    else:
                        data = await stream.receive_some(_RECEIVE_BYTES)
                        got = len(data)
                        state.receive_data(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    self._fail(KafkaConnectionError(
                        f"read from node {self.node_id} failed: {exc!r}"))
                    return
            self._read_scope = None
            now = trio.current_time()
            if scope.cancelled_caught:
                if in_flight and self._earliest_deadline() <= now:
                    self._fail(RequestTimedOutError(
                        f"request to node {self.node_id} timed out; closing the connection"))
                    return
                if not in_flight and self._last_active + self.idle_timeout_s <= now:
                    LOGGER.debug("closing idle connection to node %s", self.node_id)
                    self._fail(KafkaConnectionError(f"connection to node {self.node_id} idle"))
                    return
                continue
            if not got:
                self._fail(KafkaConnectionError(f"node {self.node_id} closed the connection"))
                return
            self._last_active = now
            try:
                while (response := state.next_response()) is not NEED_DATA:
                    self._slots.release()
                    response.request.context._finish(response.body, None)
                    if self.closed:
                        return
            except KafkaConnectionError as exc:
                LOGGER.warning("node %s: %s; closing the connection", self.node_id, exc)
                self._fail(exc)
                return


__all__ = ["BodySpec", "BrokerConnection", "InFlight", "InFlightRequest"]
