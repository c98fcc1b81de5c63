"""The control endpoint of a test cluster (``control.listener``): its faults over HTTP + JSON.

Why HTTP: test suites in any language drive a cluster started with ``trio-broker serve
--brokers N`` from outside the process: stop and start brokers, move leaders, inject errors,
read what clients sent. The console's stack serves it (Starlette on Hypercorn's Trio worker,
in the cluster's own event loop), so each call runs the cluster's control directly.

Routes (JSON bodies and answers; a bad request is 400 with ``{"error": ...}``):
``GET /v1/brokers``; ``POST /v1/brokers/{id}/stop``; ``POST /v1/brokers/{id}/start``;
``POST /v1/brokers/{id}/latency {"ms": 100}``;
``POST /v1/partitions/{topic}/{partition}/leader {"node_id": k}``;
``POST /v1/faults {"api": "Produce", "errors": ["NOT_LEADER_OR_FOLLOWER"], "node_id": null}``
(or ``{"api": ..., "disconnect": true, "count": 1}``); ``DELETE /v1/faults``;
``GET /v1/requests``.

Why the guard in front (``broker/http/guard.py``): the endpoint stops brokers and reads what
clients sent, and any web page the tester's browser opens can send requests to it. A write must
carry ``Content-Type: application/json`` (415 otherwise), which a page cannot send cross-origin
without a CORS preflight this endpoint never grants; every request must name an allowed ``Host``
(421 otherwise: DNS rebinding) and, when it has an ``Origin``, one naming that Host (403); with
``control.listener.token`` set, every request must carry ``Authorization: Bearer <token>`` (401).
"""

from __future__ import annotations

import functools
import json
import logging
import math
from typing import Any, Protocol

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..broker.config import parse_http_listener
from ..broker.http.guard import HostCheck, bearer_token_matches, origin_matches

LOGGER = logging.getLogger("trio_broker.testing.control")


class ClusterControls(Protocol):
    """What the endpoint drives (``trio_broker.testing.Cluster``)."""

    @property
    def brokers(self) -> Any: ...
    async def stop_broker(self, node_id: int) -> None: ...
    async def start_broker(self, node_id: int) -> None: ...
    def move_leader(self, topic: str, partition: int, node_id: int) -> int: ...
    def inject(self, api: str | int, errors: Any = (), *, node_id: int | None = None,
               disconnect: bool = False, count: int = 1) -> None: ...
    def set_latency(self, node_id: int, ms: float) -> None: ...
    def clear_faults(self) -> None: ...
    def requests(self) -> Any: ...
    def live(self, node_id: int) -> bool: ...


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _json(request: Request) -> dict[str, Any]:
    return parse_body(await request.body())


def parse_body(raw: bytes) -> dict[str, Any]:
    """A request's JSON object (an empty body is an empty object)."""
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except RecursionError:  # json.loads recurses once per level of nesting
        raise ValueError("the body is nested too deeply") from None
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    return body


def _int(body: dict[str, Any], name: str, default: int | None = None) -> int | None:
    """An integer field (a JSON number or a numeric string); anything else is a 400, including
    what Python's json reads as infinite or NaN (``1e999``, ``Infinity``)."""
    value = body.get(name, default)
    if value is None:
        return None
    try:
        return int(value)
    except (OverflowError, ValueError, TypeError):
        raise ValueError(f"{name}={value!r} is not an integer") from None


def apply_latency(cluster: Any, node: int, body: dict[str, Any]) -> None:
    """``POST /v1/brokers/{node_id}/latency``: ``{"ms": 250}``."""
    ms = float(body["ms"])
    if not math.isfinite(ms):  # a request delayed forever (or by NaN) is no latency
        raise ValueError(f"ms={body['ms']!r} is not a finite number")
    cluster.set_latency(node, ms)


def apply_fault(cluster: Any, body: dict[str, Any]) -> None:
    """``POST /v1/faults``: ``{"api": "Produce", "errors": [...], "node_id": 1}`` or
    ``{"api": "Fetch", "disconnect": true, "count": 2}``."""
    cluster.inject(body["api"], body.get("errors") or (), node_id=_int(body, "node_id"),
                   disconnect=bool(body.get("disconnect", False)),
                   count=_int(body, "count", 1))


#: methods that change the cluster; they must send JSON (a DELETE only if it sends a body type)
_WRITES = frozenset({"POST", "PUT", "PATCH"})


class ControlGuard:
    """ASGI middleware: the Host, Origin, token and Content-Type checks of every request."""

    def __init__(self, app: Any, hosts: HostCheck, token: str = "") -> None:
        self.app, self.hosts, self.token = app, hosts, token

    def _refusal(self, scope: Any) -> Response | None:
        headers = Headers(scope=scope)
        host = headers.get("host")
        server = scope.get("server")
        if not self.hosts.allows(host, server[0] if server else None):
            return _error(421, "misdirected request: this Host is not one the endpoint serves")
        if not origin_matches(headers.get("origin"), host):
            return _error(403, "cross-origin request refused")
        if self.token and not bearer_token_matches(headers.get("authorization"), self.token):
            return JSONResponse({"error": "a bearer token (control.listener.token) is needed"},
                                status_code=401,
                                headers={"www-authenticate": 'Bearer realm="trio-broker control"'})
        content_type = headers.get("content-type")
        if scope["method"] in _WRITES or (scope["method"] == "DELETE" and content_type):
            media = (content_type or "").split(";", 1)[0].strip().lower()
            if media != "application/json":
                return _error(415, "the body must be Content-Type: application/json")
        return None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (refusal := self._refusal(scope)) is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)


def build_control_app(cluster: ClusterControls, *, bound_host: str = "127.0.0.1",
                      allowed_hosts: tuple[str, ...] = (), token: str = "") -> Any:
    """The ASGI app of the control endpoint over ``cluster``, bound to ``bound_host``."""

    def handled(fn: Any) -> Any:
        @functools.wraps(fn)
        async def run(request: Request) -> Response:
            try:
                result: Response = await fn(request)
            except (ValueError, KeyError, TypeError) as exc:
                return _error(400, str(exc) or type(exc).__name__)
            return result

        return run

    def node_of(request: Request) -> int:
        return int(request.path_params["node_id"])

    @handled
    async def brokers(request: Request) -> Response:
        return JSONResponse({"brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
             "alive": cluster.live(b.node_id)}
            for b in cluster.brokers]})

    @handled
    async def stop(request: Request) -> Response:
        node = node_of(request)
        await cluster.stop_broker(node)
        return JSONResponse({"node_id": node, "alive": False})

    @handled
    async def start(request: Request) -> Response:
        node = node_of(request)
        await cluster.start_broker(node)
        return JSONResponse({"node_id": node, "alive": True})

    @handled
    async def latency(request: Request) -> Response:
        node, body = node_of(request), await _json(request)
        apply_latency(cluster, node, body)
        return JSONResponse({"node_id": node, "latency_ms": body["ms"]})

    @handled
    async def leader(request: Request) -> Response:
        topic, partition = request.path_params["topic"], int(request.path_params["partition"])
        node = int((await _json(request))["node_id"])
        epoch = cluster.move_leader(topic, partition, node)
        return JSONResponse({"topic": topic, "partition": partition, "leader": node,
                             "leader_epoch": epoch})

    @handled
    async def faults(request: Request) -> Response:
        apply_fault(cluster, await _json(request))
        return JSONResponse({"injected": True})

    @handled
    async def clear(request: Request) -> Response:
        cluster.clear_faults()
        return JSONResponse({"cleared": True})

    @handled
    async def requests(request: Request) -> Response:
        return JSONResponse({"requests": [r.to_json() for r in cluster.requests()]})

    app = Starlette(routes=[
        Route("/v1/brokers", brokers, methods=["GET"]),
        Route("/v1/brokers/{node_id:int}/stop", stop, methods=["POST"]),
        Route("/v1/brokers/{node_id:int}/start", start, methods=["POST"]),
        Route("/v1/brokers/{node_id:int}/latency", latency, methods=["POST"]),
        Route("/v1/partitions/{topic}/{partition:int}/leader", leader, methods=["POST"]),
        Route("/v1/faults", faults, methods=["POST"]),
        Route("/v1/faults", clear, methods=["DELETE"]),
        Route("/v1/requests", requests, methods=["GET"]),
    ])
    return ControlGuard(app, HostCheck(bound_host, allowed_hosts), token)


async def serve_control(listener: str, cluster: ClusterControls, *,
                        token: str = "", allowed_hosts: tuple[str, ...] = (),
                        task_status: trio.TaskStatus[tuple[str, int]]
                        = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the control endpoint until cancelled; reports its bound (host, port)."""
    _, host, port = parse_http_listener(listener, "control.listener")
    config = HypercornConfig()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("trio_broker.broker.http.hypercorn")
    config.include_server_header = False
    config.graceful_timeout = 1.0
    app: Any = build_control_app(cluster, bound_host=host, allowed_hosts=allowed_hosts,
                                 token=token)
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(functools.partial(serve, app, config,
                                                                 mode="asgi"))
        bound = binds[0].split("://", 1)[1]
        bound_host, _, bound_port = bound.rpartition(":")
        LOGGER.info("cluster control endpoint on http://%s/ (%s)", bound,
                    "bearer token required" if token else "no token: set control.listener.token "
                    "to require one")
        task_status.started((bound_host.strip("[]"), int(bound_port)))
