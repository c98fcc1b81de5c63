"""The console's ASGI application: its routes, and the headers every answer carries.

Why a Host check on every bind (``guard.py``): DNS rebinding lets a web page reach the console,
on loopback or on a private address, under a name of its own, and then the page's Origin equals
that Host; answering only the console's own names (loopback, the bound or reached address,
``http.allowed.hosts``) closes that door. The Content-Security-Policy allows scripts and styles
from the console itself only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Route

from . import client_pages, group_pages, overview, schema_pages, share_pages, topic_pages
from .guard import HostCheck
from .web import Console

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'self'; script-src 'self'; style-src 'self'; "
     b"img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]


def routes() -> list[Route]:
    return [
        Route("/", overview.overview),
        Route("/api/live", overview.live),
        Route("/metrics", overview.metrics),
        Route("/login", overview.login_form, methods=["GET"]),
        Route("/login", overview.login, methods=["POST"]),
        Route("/logout", overview.logout, methods=["POST"]),
        Route("/static/{name}", overview.static),
        Route("/topics", topic_pages.topics, methods=["GET"]),
        Route("/topics", topic_pages.create_topic, methods=["POST"]),
        Route("/topics/{name}", topic_pages.topic),
        Route("/topics/{name}/messages", topic_pages.browse),
        Route("/topics/{name}/produce", topic_pages.produce, methods=["POST"]),
        Route("/topics/{name}/delete", topic_pages.delete_topic, methods=["POST"]),
        Route("/topics/{name}/configs", topic_pages.alter_configs, methods=["POST"]),
        Route("/topics/{name}/partitions", topic_pages.add_partitions, methods=["POST"]),
        Route("/groups", group_pages.groups),
        Route("/groups/view", group_pages.group),
        Route("/groups/reset", group_pages.reset_offsets, methods=["POST"]),
        Route("/groups/delete", group_pages.delete_group, methods=["POST"]),
        Route("/api/group-lag", group_pages.group_lag),
        Route("/clients", client_pages.clients),
        Route("/share-groups", share_pages.share_groups),
        Route("/schemas", schema_pages.subjects),
        Route("/schemas/subject", schema_pages.subject),
        Route("/schemas/diff", schema_pages.diff),
    ]


class Mounts:
    """ASGI dispatch: a path under one of ``mounts``' prefixes goes to that application (with
    the prefix moved to ``root_path``, so its links keep it), any other to the console."""

    def __init__(self, app: ASGIApp, mounts: dict[str, ASGIApp]) -> None:
        self.app = app
        self.mounts = mounts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        for prefix, mounted in self.mounts.items():
            if scope["type"] == "http" and (path == prefix or path.startswith(prefix + "/")):
                child = {**scope, "root_path": scope.get("root_path", "") + prefix,
                         "path": path[len(prefix):] or "/"}
                await mounted(child, receive, send)
                return
        await self.app(scope, receive, send)


class Guard:
    """ASGI middleware: the Host check, and the security headers."""

    def __init__(self, app: ASGIApp, console: Console) -> None:
        self.app = app
        settings = console.settings
        self.hosts = HostCheck(settings.host, settings.allowed_hosts)

    def _host_allowed(self, scope: Scope) -> bool:
        server = scope.get("server")
        local = server[0] if server else None
        for name, value in scope.get("headers", ()):
            if name == b"host":
                return self.hosts.allows(value.decode("latin-1"), local)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not self._host_allowed(scope):
            await send({"type": "http.response.start", "status": 421,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"misdirected request\n"})
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def build_app(console: Console) -> ASGIApp:
    app = Starlette(routes=routes())
    app.state.console = console

    async def not_found(request: Any, exc: Any) -> Any:
        return await group_pages.not_found(request)

    app.add_exception_handler(404, not_found)
    return Mounts(Guard(app, console), console.state.http_mounts)
