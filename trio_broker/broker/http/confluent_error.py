"""Confluent's REST error answers, shared by the Schema Registry and the REST proxy.

Why one class: both of Confluent's services answer a refusal with an HTTP status and the same
body, ``{"error_code": 40401, "message": "..."}``; each service raises its own subclass where
its rule is checked and turns it into that body at its HTTP entry point.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.responses import JSONResponse

from .guard import HostCheck

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class ConfluentError(Exception):
    """An answer other than success: the HTTP status and Confluent's error body."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


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
