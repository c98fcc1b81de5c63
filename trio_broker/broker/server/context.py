"""What an API handler sees: the request, who sent it, the broker's state, and how to answer.

Why two objects: ``RequestContext`` is Kafka's: the facts of one request (its header, the id of
the connection it came on, the client's address, the listener, the principal), built by the
network layer, which keeps its connections to itself. ``HandlerContext`` adds what a handler may
touch, the broker state and the way to answer later, so a handler can be tested with a
hand-built context and the network layer stays ignorant of what any API means.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...protocol.messages import RequestHeader, make_response
from .bodies import ResponseBody

if TYPE_CHECKING:
    from ..security.sasl import SaslAuthenticator
    from .state import BrokerState


class Deferred:
    """Returned by a handler that parked its request in a purgatory.

    The handler task is free at once; the parked operation later calls ``ctx.respond(body)``
    exactly once (on its event or at its deadline).
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "DEFERRED"


DEFERRED = Deferred()


class CloseConnection:
    """Returned by a handler that cannot answer and must close the connection instead.

    Kafka does this for a Produce with acks=0 that failed: the client expects no response, so a
    closed connection is the only way it learns of the error (and refreshes its metadata).
    """

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


#: What a handler returns: a response body, ``None`` for "no response" (acks=0 produce), or
#: ``DEFERRED`` when it will call ``ctx.respond`` later.
HandlerResult = ResponseBody | Deferred | CloseConnection | None


class RequestContext:
    """Kafka's ``RequestContext``: one request's header and where it came from.

    ``connection_id`` names the connection without holding it; responses find their way back
    through it. ``principal`` is ``"User:<name>"`` from SASL or a TLS client certificate, None
    for an anonymous client. ``sasl`` is the connection's SASL state on a SASL listener (the
    SaslHandshake and SaslAuthenticate handlers drive it), None elsewhere. ``sendfile``: the
    connection writes to a plain socket, so a Fetch may answer with regions of segment files
    (zero-copy); False for TLS and for anything that is not a socket server's connection.
    """

    __slots__ = ("client_host", "client_port", "connection_id", "header", "listener_name",
                 "principal", "sasl", "security_protocol", "sendfile")

    # positional or keyword: the network layer builds one per request, and a call by keywords
    # costs more than the assignments
    def __init__(self, header: RequestHeader, connection_id: str, client_host: str,
                 client_port: int = 0, listener_name: str = "PLAINTEXT",
                 security_protocol: str = "PLAINTEXT", principal: str | None = None,
                 sasl: SaslAuthenticator | None = None, sendfile: bool = False) -> None:
        self.header = header
        self.connection_id = connection_id
        self.client_host = client_host
        self.client_port = client_port
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.principal = principal
        self.sasl = sasl
        self.sendfile = sendfile

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    def __repr__(self) -> str:
        return f"RequestContext({self.header!r}, connection {self.connection_id})"


class HandlerContext:
    """One request as an API handler sees it: its context, the broker, and how to answer."""

    __slots__ = ("_respond", "broker", "request")

    def __init__(self, request: RequestContext, broker: BrokerState,
                 respond: Callable[[ResponseBody | None], None]) -> None:
        self.request = request
        self.broker = broker
        self._respond = respond

    @property
    def header(self) -> RequestHeader:
        return self.request.header

    @property
    def version(self) -> int:
        return self.request.header.api_version

    @property
    def client_id(self) -> str:
        return self.request.client_id

    @property
    def client_host(self) -> str:
        return self.request.client_host

    @property
    def connection_id(self) -> str:
        return self.request.connection_id

    @property
    def listener(self) -> str:
        """The name of the listener the request arrived on: answers naming brokers give each
        broker's endpoint on this listener."""
        return self.request.listener_name

    @property
    def principal(self) -> str | None:
        """``"User:<name>"`` once authenticated (SASL or a TLS client certificate), else None."""
        return self.request.principal

    def response(self, **fields: object) -> ResponseBody:
        """A response body of this request's API and version."""
        header = self.request.header
        body: ResponseBody = make_response(header.api_key, header.api_version, **fields)
        return body

    def respond(self, body: ResponseBody | None) -> None:
        """Send the response of a ``DEFERRED`` request (once)."""
        self._respond(body)
