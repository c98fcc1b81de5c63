"""What an API handler sees: the request, who sent it, the broker's state, and how to answer.

Why a context object: handlers are plain async functions registered by API key; everything they
may touch comes through here, so a handler can be tested with a hand-built context and the network
layer stays ignorant of what any API means.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..protocol.messages import ApiMessage, RequestHeader, make_response

if TYPE_CHECKING:
    from ..broker_state import BrokerState


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
HandlerResult = ApiMessage | Deferred | CloseConnection | None


class RequestContext:
    """One request as the API layer sees it."""

    __slots__ = ("_respond", "broker", "client_host", "connection_id", "header", "principal")

    def __init__(self, header: RequestHeader, broker: BrokerState, *, client_host: str,
                 connection_id: str, respond: Callable[[ApiMessage | None], None],
                 principal: str | None = None) -> None:
        self.header = header
        self.broker = broker
        self.client_host = client_host
        self.connection_id = connection_id
        self.principal = principal
        self._respond = respond

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    def response(self, **fields: Any) -> ApiMessage:
        """A response body of this request's API and version."""
        return make_response(self.header.api_key, self.header.api_version, **fields)

    def respond(self, body: ApiMessage | None) -> None:
        """Send the response of a ``DEFERRED`` request (once)."""
        self._respond(body)
