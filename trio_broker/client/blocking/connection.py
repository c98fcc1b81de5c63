"""One blocking socket to one broker, driving the client core's connection state machine.

Why plain sockets: the console tools send a handful of requests and the Spark driver and
executors run in plain worker processes, none with an event loop; a socket per broker with a
deadline on every call is the simplest thing that is correct there.

Opening runs, in Kafka's order: TCP (``TCP_NODELAY``, a 4 MiB receive buffer for large fetch
answers), TLS when the protocol says so, ApiVersions (v3 with the core's fallbacks), then SASL.
Requests can be pipelined: ``send`` returns the in-flight request at once and ``receive`` waits
for its answer later (answers come in send order; ones that arrive for earlier requests are kept
until asked for). A response frame is read with ``recv_into`` straight into one buffer of its
announced size: a fetch answer is megabytes, and this saves two copies of every fetched byte.

A failed or timed-out read leaves the stream unusable, so the connection closes itself and
raises a ``KafkaConnectionError`` or ``KafkaTimeoutError`` (both retriable) whose text is one
line naming the broker.
"""

from __future__ import annotations

import select
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.messages import make_request
from ..core.bootstrap import format_address
from ..core.connection import ClientConnection, InFlight
from ..core.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from ..core.sasl import SaslAuthentication, SaslStep
from ..core.security import Security
from ..core.versions import (
    ApiVersionsExchange,
    api_name,
    api_versions_request,
    choose_version,
)

_RECEIVE_BUFFER = 4 << 20
_CHUNK = 4 << 20

#: a request body, or a builder of one from the version chosen for it
Body = Any | Callable[[int], Any]


def _reason(exc: OSError) -> str:
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timed out"
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    return exc.strerror or str(exc) or type(exc).__name__


class BrokerConnection:
    """A ready connection to one broker: versions negotiated, authenticated if asked."""

    def __init__(self, host: str, port: int, *, timeout_s: float = 30.0,
                 client_id: str | None = "trio-broker", security: Security | None = None,
                 node_id: int | None = None) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.address = format_address(host, port)
        self.timeout_s = timeout_s
        self.where = f"the broker at {self.address}"
        self.closed = False
        self._state = ClientConnection(client_id, address=self.where)
        self._answers: dict[int, Any] = {}
        self._poller: select.poll | None = None
        security = security or Security.plaintext()
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise KafkaConnectionError(f"cannot connect to {self.where}: {_reason(exc)}"
                                       ) from None
        self._sock: socket.socket = sock
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RECEIVE_BUFFER)
            if security.ssl_context is not None:
                self._sock = security.ssl_context.wrap_socket(sock, server_hostname=host)
            self.versions = self._negotiate_versions()
            if security.sasl is not None:
                self._authenticate(SaslAuthentication(security.sasl, self.where))
        except OSError as exc:
            self.close()
            raise KafkaConnectionError(f"cannot connect to {self.where}: {_reason(exc)}"
                                       ) from None
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"<BrokerConnection {self.address}{' closed' if self.closed else ''}>"

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._sock.close()

    # --- opening -------------------------------------------------------------------------

    def _negotiate_versions(self) -> dict[int, tuple[int, int]]:
        exchange = ApiVersionsExchange(self.where)
        while True:
            request = self.send(ApiKey.ApiVersions, api_versions_request(exchange.version),
                                version=exchange.version, raw=True)
            assert request is not None
            found = exchange.receive(self.receive(request))
            if found is not None:
                return found

    def _authenticate(self, auth: SaslAuthentication) -> None:
        step: SaslStep | None = auth.first()
        while step is not None:
            body = self.request(step.api_key, step.build)
            step = auth.receive(body)

    # --- requests ------------------------------------------------------------------------

    def version_for(self, api_key: int) -> int:
        """The highest version of ``api_key`` both sides speak."""
        return choose_version(api_key, self.versions, self.where)

    def supports(self, api_key: int) -> bool:
        try:
            self.version_for(api_key)
        except KafkaError:
            return False
        return True

    def send(self, api_key: int, body: Body, *, version: int | None = None,
             expect_response: bool = True, raw: bool = False) -> InFlight | None:
        """Write one request without waiting; returns it (None when no answer will come).

        ``body`` is a builder taking the version (chosen by negotiation unless ``version`` is
        given) or, with ``version``, a built body.
        """
        if self.closed:
            raise KafkaConnectionError(f"the connection to {self.where} is closed")
        if version is None:
            version = self.version_for(api_key)
        message = body(version) if callable(body) else body
        request, frame = self._state.send_request(api_key, version, message,
                                                  expect_response=expect_response, raw=raw)
        try:
            self._sock.settimeout(self.timeout_s)
            self._sock.sendall(frame)
        except OSError as exc:
            raise self._lost(exc) from None
        return request

    def receive(self, request: InFlight, *, timeout_s: float | None = None) -> Any:
        """The answer to ``request`` (answers to earlier requests are read and kept)."""
        cid = request.correlation_id
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        while cid not in self._answers:
            if self.closed:
                raise KafkaConnectionError(f"the connection to {self.where} is closed")
            try:
                frame = self._read_frame(deadline)
                response = self._state.receive_frame(frame)
            except TimeoutError:
                self.close()
                raise KafkaTimeoutError(f"no answer from {self.where} to "
                                        f"{api_name(request.api_key)} in time") from None
            except OSError as exc:
                raise self._lost(exc) from None
            except KafkaError:
                self.close()
                raise
            self._answers[response.request.correlation_id] = response.body
        return self._answers.pop(cid)

    def request(self, api_key: int, body: Body, *, version: int | None = None,
                timeout_s: float | None = None) -> Any:
        """Send one request and wait for its decoded answer."""
        request = self.send(api_key, body, version=version)
        assert request is not None
        return self.receive(request, timeout_s=timeout_s)

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        """One request at a fixed version from keyword fields (tools and tests that pin one)."""
        return self.request(api_key, make_request(api_key, version, **fields), version=version)

    def readable(self) -> bool:
        """Whether an answer has arrived or started to (reading would not wait on the network),
        checked without blocking."""
        if self.closed:
            return False
        if self._answers:
            return True
        sock = self._sock
        if isinstance(sock, ssl.SSLSocket) and sock.pending():
            return True
        if self._poller is None:  # poll, not select: descriptors above 1023 are common
            self._poller = select.poll()
            self._poller.register(sock, select.POLLIN)
        return bool(self._poller.poll(0))

    # --- reading -------------------------------------------------------------------------

    def _read_frame(self, deadline: float) -> bytearray:
        size = int.from_bytes(self._read_into(bytearray(4), deadline), "big", signed=True)
        self._state.check_frame_size(size)
        return self._read_into(bytearray(size), deadline)

    def _read_into(self, buf: bytearray, deadline: float) -> bytearray:
        view = memoryview(buf)
        got = 0
        total = len(buf)
        sock = self._sock
        while got < total:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("timed out")
            sock.settimeout(remaining)
            n = sock.recv_into(view[got:], min(total - got, _CHUNK))
            if not n:
                raise ConnectionResetError("the broker closed the connection")
            got += n
        return buf

    def _lost(self, exc: OSError) -> KafkaConnectionError:
        self.close()
        return KafkaConnectionError(f"lost the connection to {self.where}: {_reason(exc)}")


__all__ = ["BrokerConnection"]
