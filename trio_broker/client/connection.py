"""One TCP connection to one broker: pipelined requests, responses matched in order.

Why this shape (Kafka's ``KafkaChannel`` + ``InFlightRequests``, in Trio):

* Sending never waits for a response. ``send`` registers the request in the in-flight queue and
  appends its frame to a write buffer without awaiting anything, so registration order is write
  order; a writer task flushes whatever is buffered in one ``send_all``. A caller cancelled after
  ``send`` cannot leave half a frame on the wire.
* The in-flight queue is bounded by ``max.in.flight.requests.per.connection``; ``send`` waits for
  a slot. Produce with ``acks=0`` gets no response, so it never takes a slot.
* One reader task per connection pops the head of the queue for every response frame. Brokers
  answer in request order, so a correlation id other than the head's means the stream is
  unusable: the connection closes and every in-flight request fails with a retriable
  ``CorrelationIdMismatchError``.
* Timeouts live in the reader's cancel scope, whose deadline is the earliest in-flight deadline
  (``request.timeout.ms``) or, with nothing in flight, the idle deadline
  (``connections.max.idle.ms``). A request timeout closes the connection and fails all its
  requests, as the Java client does; an idle expiry just closes it.

Connection states::

    CONNECTING --(tcp + ApiVersions)--> READY --(error / timeout / idle / close())--> CLOSED

ApiVersions: v3 first; on UNSUPPORTED_VERSION retry with the ApiVersions maximum the broker
listed, or v0 when its answer lists none or cannot be parsed (Java's fallback); on
INVALID_REQUEST retry v0 (librdkafka's). Each request then uses the highest version inside both
the broker's range and ``SUPPORTED_VERSIONS``.
"""

from __future__ import annotations

import logging
import math
import struct
from collections import deque
from collections.abc import Callable
from typing import Any

import trio

from ..client_core.errors import (
    CorrelationIdMismatchError,
    KafkaConnectionError,
    KafkaError,
    RequestTimedOutError,
    UnsupportedVersionError,
    describe_code,
)
from ..protocol.api_keys import SUPPORTED_VERSIONS, ApiKey
from ..protocol.errors import ErrorCode, RemoteProtocolError
from ..protocol.framing import NEED_DATA, FrameDecoder
from ..protocol.messages import decode_response, encode_request, make_request

LOGGER = logging.getLogger(__name__)

CLIENT_SOFTWARE_NAME = "trio-broker"
CLIENT_SOFTWARE_VERSION = "0.1.0"
_RECEIVE_BYTES = 1 << 18
_I32 = struct.Struct(">i")

#: Body builders: keyword fields (any version ignores fields it lacks) or a callable of the
#: chosen version.
BodySpec = dict[str, Any] | Callable[[int], Any]
ResponseCallback = Callable[["InFlightRequest"], None]


class InFlightRequest:
    """A sent request awaiting its response: ``await wait()`` or a callback from the reader."""

    __slots__ = ("_event", "api_key", "api_version", "callback", "correlation_id", "deadline",
                 "done", "error", "raw", "response")

    def __init__(self, correlation_id: int, api_key: int, api_version: int, deadline: float,
                 callback: ResponseCallback | None = None, raw: bool = False) -> None:
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.api_version = api_version
        self.deadline = deadline
        self.callback = callback
        self.raw = raw  # deliver the undecoded frame (ApiVersions negotiation decodes itself)
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


class InFlightRequests:
    """FIFO of requests sent on one connection and not yet answered (Kafka's InFlightRequests)."""

    __slots__ = ("_queue",)

    def __init__(self) -> None:
        self._queue: deque[InFlightRequest] = deque()

    def __len__(self) -> int:
        return len(self._queue)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._queue)

    def add(self, request: InFlightRequest) -> None:
        self._queue.append(request)

    def complete_next(self, correlation_id: int) -> InFlightRequest:
        """Pop the oldest request, which must carry ``correlation_id``.

        Raises ``CorrelationIdMismatchError`` (leaving the request queued, so the caller fails it
        with the rest) when the response is not for the oldest request.
        """
        if not self._queue:
            raise CorrelationIdMismatchError(
                f"response with correlation id {correlation_id} but nothing is in flight")
        head = self._queue[0]
        if head.correlation_id != correlation_id:
            raise CorrelationIdMismatchError(
                f"response correlation id {correlation_id} does not match the oldest in-flight "
                f"request's {head.correlation_id} ({ApiKey(head.api_key).name})")
        return self._queue.popleft()

    def drain(self) -> list[InFlightRequest]:
        """Remove and return every request (the connection is closing)."""
        requests = list(self._queue)
        self._queue.clear()
        return requests

    def earliest_deadline(self) -> float:
        return min((r.deadline for r in self._queue), default=math.inf)


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
        self.in_flight = InFlightRequests()
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.closed = False
        self.close_reason: KafkaError | None = None
        self._on_close = on_close
        self._stream: trio.SocketStream | None = None
        self._slots = trio.Semaphore(max_in_flight)
        self._write_buffer = bytearray()
        self._write_wakeup = trio.Event()
        self._write_drained = trio.Event()
        self._correlation_id = 0
        self._last_active = trio.current_time()
        self._read_scope: trio.CancelScope | None = None
        self._cancel_scope = trio.CancelScope()
        self._closed_event = trio.Event()
        self._version_cache: dict[int, int] = {}

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port} {state}>"

    # --- lifecycle ---------------------------------------------------------------------------

    async def run(self, stream: trio.SocketStream, *,
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
        for request in self.in_flight.drain():
            self._slots.release()
            request._finish(None, error)
        if self._on_close is not None:
            self._on_close(self)

    # --- versions ----------------------------------------------------------------------------

    def version_for(self, api_key: int) -> int:
        """The highest version of ``api_key`` both the broker and this client support."""
        version = self._version_cache.get(api_key)
        if version is not None:
            return version
        ours = SUPPORTED_VERSIONS.get(api_key)  # type: ignore[call-overload]
        theirs = self.api_versions.get(api_key)
        if ours is None:
            raise UnsupportedVersionError(f"the client does not implement {ApiKey(api_key).name}")
        if theirs is None:
            raise UnsupportedVersionError(
                f"broker {self.node_id} does not support {ApiKey(api_key).name}")
        version = min(ours.max, theirs[1])
        if version < max(ours.min, theirs[0]):
            raise UnsupportedVersionError(
                f"no common version of {ApiKey(api_key).name}: broker {self.node_id} supports "
                f"{theirs[0]}-{theirs[1]}, the client {ours.min}-{ours.max}")
        self._version_cache[api_key] = version
        return version

    def supports(self, api_key: int) -> bool:
        try:
            self.version_for(api_key)
        except UnsupportedVersionError:
            return False
        return True

    async def negotiate_versions(self) -> None:
        """ApiVersions v3 with Java's and librdkafka's fallbacks (see the module docstring)."""
        version = 3
        for _ in range(4):
            request = await self.send(
                ApiKey.ApiVersions,
                {"client_software_name": CLIENT_SOFTWARE_NAME,
                 "client_software_version": CLIENT_SOFTWARE_VERSION},
                version=version, raw=True)
            assert request is not None
            frame = await request.wait()
            error, keys = _parse_api_versions(frame, version)
            if error == ErrorCode.NONE and keys is not None:
                self.api_versions = keys
                self._version_cache.clear()
                return
            if error == ErrorCode.UNSUPPORTED_VERSION and version > 0:
                listed = (keys or {}).get(ApiKey.ApiVersions)
                version = min(listed[1], version - 1) if listed else 0
                continue
            if error == ErrorCode.INVALID_REQUEST and version > 0:
                version = 0
                continue
            raise KafkaConnectionError(
                f"ApiVersions v{version} to node {self.node_id} failed with {describe_code(error)}")
        raise KafkaConnectionError(f"ApiVersions negotiation with node {self.node_id} failed")

    # --- requests ----------------------------------------------------------------------------

    def next_correlation_id(self) -> int:
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        return self._correlation_id

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
            self._write(encode_request(api_key, version, self.next_correlation_id(),
                                       self.client_id, message))
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
                    callback: ResponseCallback | None = None) -> InFlightRequest:
        """``send`` when ``can_send()``; raises ``trio.WouldBlock`` without a free slot."""
        if self.closed:
            raise self._closed_error()
        self._slots.acquire_nowait()
        return self._register(api_key, body, timeout_s, callback, None, False)

    def _register(self, api_key: int, body: BodySpec, timeout_s: float | None,
                  callback: ResponseCallback | None, version: int | None,
                  raw: bool) -> InFlightRequest:
        # the caller holds an in-flight slot; nothing here awaits, so the order requests
        # are registered in is the order their frames are written in
        try:
            if version is None:
                version = self.version_for(api_key)
            message = body(version) if callable(body) else make_request(api_key, version, **body)
            correlation_id = self.next_correlation_id()
            frame = encode_request(api_key, version, correlation_id, self.client_id, message)
        except BaseException:
            self._slots.release()
            raise
        deadline = trio.current_time() + (self.request_timeout_s if timeout_s is None
                                          else timeout_s)
        request = InFlightRequest(correlation_id, api_key, version, deadline, callback, raw)
        self.in_flight.add(request)
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
        decoder = FrameDecoder()
        in_flight = self.in_flight
        while True:
            idle_deadline = self._last_active + self.idle_timeout_s
            deadline = min(in_flight.earliest_deadline(), idle_deadline)
            with trio.CancelScope(deadline=deadline) as scope:
                self._read_scope = scope
                try:
                    data = await stream.receive_some(_RECEIVE_BYTES)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    self._fail(KafkaConnectionError(
                        f"read from node {self.node_id} failed: {exc!r}"))
                    return
            self._read_scope = None
            now = trio.current_time()
            if scope.cancelled_caught:
                if len(in_flight) and in_flight.earliest_deadline() <= now:
                    self._fail(RequestTimedOutError(
                        f"request to node {self.node_id} timed out; closing the connection"))
                    return
                if not len(in_flight) and self._last_active + self.idle_timeout_s <= now:
                    LOGGER.debug("closing idle connection to node %s", self.node_id)
                    self._fail(KafkaConnectionError(f"connection to node {self.node_id} idle"))
                    return
                continue
            if not data:
                self._fail(KafkaConnectionError(f"node {self.node_id} closed the connection"))
                return
            self._last_active = now
            decoder.receive_data(data)
            try:
                while (frame := decoder.next_frame()) is not NEED_DATA:
                    assert isinstance(frame, bytes)
                    self._dispatch(frame)
                    if self.closed:
                        return
            except RemoteProtocolError as exc:
                self._fail(KafkaConnectionError(f"bad response from node {self.node_id}: {exc}"))
                return

    def _dispatch(self, frame: bytes) -> None:
        if len(frame) < 4:
            raise RemoteProtocolError("response frame shorter than a correlation id")
        (correlation_id,) = _I32.unpack_from(frame, 0)
        try:
            request = self.in_flight.complete_next(correlation_id)
        except CorrelationIdMismatchError as exc:
            LOGGER.warning("node %s: %s; closing the connection", self.node_id, exc)
            self._fail(exc)
            return
        self._slots.release()
        if request.raw:
            request._finish(frame, None)
            return
        _, body = decode_response(request.api_key, request.api_version, frame)
        request._finish(body, None)


def _parse_api_versions(frame: bytes,
                        version: int) -> tuple[int, dict[int, tuple[int, int]] | None]:
    """(error code, {api_key: (min, max)} or None when the body cannot be parsed)."""
    if len(frame) < 6:
        return ErrorCode.UNKNOWN_SERVER_ERROR, None
    error = struct.unpack_from(">h", frame, 4)[0]
    try:
        _, body = decode_response(ApiKey.ApiVersions, version, frame)
    except RemoteProtocolError:
        return error, None
    keys = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys or ()}
    return error, keys
