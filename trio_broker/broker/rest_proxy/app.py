"""The REST proxy's ASGI application: its routes, Confluent's error bodies, the Host check.

Why the Host check (``broker.http.guard``, the console's): the proxy writes to Kafka, and DNS
rebinding would let any web page a user on the machine opens reach a loopback proxy under a
name of its own. It answers only loopback names, the address it is bound to or reached on, and
``http.allowed.hosts``; any other Host gets 421, as the console does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from http import HTTPStatus
from typing import Any

import attrs
import trio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route

from ...client.core.errors import KafkaError
from ..http.guard import HostCheck
from ..http.host_guard import HostGuard
from . import (
    acl_routes,
    cluster_routes,
    group_routes,
    openapi,
    replica_routes,
    v2_consumers,
    v2_produce,
)
from .auth import REALM
from .errors import RestError, from_kafka
from .produce import ProduceEndpoint, produce_batch
from .proxy import RestProxy

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


async def _openapi(request: Request) -> Response:
    return JSONResponse(openapi.document())


def routes() -> list[Route]:
    """The operations served (``openapi.OPERATIONS`` documents each one)."""
    records = cluster_routes.CLUSTER + "/topics/{topic_name}/records"
    return [*cluster_routes.routes(), *replica_routes.routes(), *group_routes.routes(),
            *acl_routes.routes(),
            Route(records, ProduceEndpoint(), methods=["POST"]),
            Route(records + ":batch", produce_batch, methods=["POST"]), *v2_produce.routes(),
            *v2_consumers.routes()]


def _error(error: RestError) -> Response:
    return JSONResponse(error.body(), status_code=error.status)


async def _rest_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RestError)
    return _error(exc)


async def _kafka_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, KafkaError)
    return _error(from_kafka(exc))


async def _timeout(request: Request, exc: Exception) -> Response:
    return _error(RestError(500, 50003, "The request timed out."))


async def _internal_error(request: Request, exc: Exception) -> Response:
    """Any other failure: Confluent's JSON body (Starlette logs the traceback)."""
    return _error(RestError(500, 500, "Internal Server Error"))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    phrase = HTTPStatus(exc.status_code).phrase
    response = _error(RestError(exc.status_code, exc.status_code,
                                f"HTTP {exc.status_code} {phrase}"))
    response.headers.update(exc.headers or {})
    if exc.status_code == 405:  # every method the path serves (RFC 9110), not one route's
        allowed = {method for route in request.app.router.routes
                   if isinstance(route, Route) and route.methods
                   and route.matches(request.scope)[0] is not Match.NONE
                   for method in route.methods}
        response.headers["allow"] = ", ".join(sorted(allowed))
    return response


#: who answers a request: its ``Authorization`` header -> the proxy (or a RestError: 401)
Resolve = Callable[[str | None], Awaitable[RestProxy]]


class Authenticate:
    """ASGI middleware: the proxy that answers the request, the shared one or the user's
    (``auth``), put in the request's state for the routes (``proxy_of``)."""

    def __init__(self, app: ASGIApp, resolve: Resolve) -> None:
        self.app = app
        self.resolve = resolve

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            authorization = next((v.decode("latin-1") for k, v in scope.get("headers", ())
                                  if k == b"authorization"), None)
            try:
                proxy = await self.resolve(authorization)
            except RestError as error:
                response = _error(error)
                if error.status == 401:
                    response.headers["www-authenticate"] = f'Basic realm="{REALM}"'
                await response(scope, receive, send)
                return
            scope["state"] = {**scope.get("state", {}), "rest_proxy": proxy}
        await self.app(scope, receive, send)


#: an error answered before its request's body was read: up to this much of the body is read
#: first, so the connection can carry the next request; a bigger body closes the connection
DRAIN_LIMIT_BYTES = 64 * 1024
DRAIN_TIMEOUT_S = 5.0


class DrainBody:
    """ASGI middleware: an error answered before its request's body was read reads the rest of
    a small body first.

    Why: Hypercorn closes a connection whose request was answered before the body arrived whole,
    and a client that sends its next request on it (keep-alive) sees the connection closed
    without an answer. A body over ``DRAIN_LIMIT_BYTES`` is not read: the answer says
    ``connection: close``. A streaming produce is answered 200 while it reads, so it is never
    drained.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = next((v for k, v in scope.get("headers", ()) if k == b"content-length"), None)
        body_done = declared == b"0" or not any(
            k in (b"content-length", b"transfer-encoding") for k, _ in scope.get("headers", ()))

        async def tracked_receive() -> Message:
            nonlocal body_done
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        async def draining_send(message: Message) -> None:
            if (message["type"] == "http.response.start" and message["status"] >= 400
                    and not body_done):
                small = declared is not None and declared.isdigit() and (
                    int(declared) <= DRAIN_LIMIT_BYTES)
                if small:
                    with trio.move_on_after(DRAIN_TIMEOUT_S):
                        while not body_done:
                            await tracked_receive()
                if not body_done:
                    message["headers"] = [*message.get("headers", ()),
                                          (b"connection", b"close")]
            await send(message)

        await self.app(scope, tracked_receive, draining_send)


def build_app(resolve: Resolve, hosts: HostCheck, cors: Cors | None = None) -> ASGIApp:
    """The proxy's ASGI application; with ``cors``, browsers of those origins may call it
    (preflights are answered before authentication, as they carry no credentials)."""
    app = Starlette(routes=[*routes(), Route("/v3/openapi.json", _openapi, methods=["GET"])],
                    exception_handlers={
        RestError: _rest_error, KafkaError: _kafka_error, trio.TooSlowError: _timeout,
        HTTPException: _http_error, 500: _internal_error})
    inner: ASGIApp = Authenticate(app, resolve)
    if cors is not None:
        from starlette.middleware.cors import CORSMiddleware

        inner = CORSMiddleware(inner, allow_origins=list(cors.origins),  # type: ignore[arg-type]
                               allow_methods=list(cors.methods),
                               allow_headers=list(cors.headers))
    return DrainBody(HostGuard(inner, hosts))


@attrs.frozen
class Cors:
    """Confluent's ``access.control.allow.{origin,methods,headers}``, as lists."""

    origins: tuple[str, ...]
    methods: tuple[str, ...]
    headers: tuple[str, ...]

    @classmethod
    def from_config(cls, origin: str, methods: str, headers: str) -> Cors | None:
        """None (CORS off) unless origins are configured."""
        def split(text: str) -> tuple[str, ...]:
            return tuple(p.strip() for p in text.split(",") if p.strip())

        if not split(origin):
            return None
        return cls(split(origin), split(methods), split(headers))
