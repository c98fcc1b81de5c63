"""The Host check of the Schema Registry and the REST proxy, as ASGI middleware.

Why apart from ``confluent_error``: that module (the services' error classes) imports no web
stack, this one Starlette, and only when one of the services is served.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.responses import JSONResponse

from .confluent_error import ConfluentError
from .guard import HostCheck

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class HostGuard:
    """ASGI middleware: answer only a request whose ``Host`` is one of the service's names
    (``HostCheck``), Confluent's error body with 421 otherwise, so that a web page cannot reach
    a loopback service through DNS rebinding."""

    def __init__(self, app: ASGIApp, hosts: HostCheck) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            server = scope.get("server")
            host = next((v.decode("latin-1") for k, v in scope.get("headers", ())
                         if k == b"host"), None)
            if not self.hosts.allows(host, server[0] if server else None):
                refusal = ConfluentError(421, 421, "HTTP 421 Misdirected Request")
                await JSONResponse(refusal.body(), status_code=421)(scope, receive, send)
                return
        await self.app(scope, receive, send)
