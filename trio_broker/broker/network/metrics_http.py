"""A tiny Trio HTTP endpoint on ``metrics.listener``: ``/metrics``, ``/healthz``, ``/ready``.

Why not prometheus-client's own server: it runs a thread; this lives in the broker's nursery and
stops with it. The answers are one function, ``metrics_response(path, metrics)``, so another
HTTP server on the same listener (the console) can route these three paths to it.

- ``GET /metrics``: the Prometheus text exposition.
- ``GET /healthz``: liveness, 200 ``ok`` whenever the broker's loop answers at all.
- ``GET /ready``: readiness, 200 ``ready`` once the broker serves clients (listeners bound, logs
  recovered, group offsets loaded), 503 with the reason while starting or shutting down.

Why a Host check (``broker.http.guard``, as the console's): DNS rebinding lets a web page read
loopback under a name of its own, and ``/metrics`` names every topic. A request whose ``Host``
is not a loopback name, the bound host, the address it was accepted on or one of
``http.allowed.hosts`` is answered 421 Misdirected Request, as the console answers it.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import trio

from ..config import parse_http_listener
from ..http.guard import HostCheck
from ..metrics import BrokerMetrics

LOGGER = logging.getLogger(__name__)
_MAX_REQUEST = 8192
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
PATHS = ("/metrics", "/healthz", "/ready")
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            421: "Misdirected Request", 503: "Service Unavailable"}


class HttpAnswer(NamedTuple):
    status: int
    content_type: str
    body: bytes


def metrics_response(path: str, metrics: BrokerMetrics) -> HttpAnswer | None:
    """The answer to ``GET path`` (query string ignored), or None for a path not served here.
    """
    path = path.split("?", 1)[0]
    if path in ("/metrics", "/"):
        return HttpAnswer(200, PROMETHEUS_TEXT, metrics.expose())
    if path == "/healthz":
        return HttpAnswer(200, "text/plain; charset=utf-8", b"ok\n")
    if path == "/ready":
        ready, why = metrics.readiness()
        return HttpAnswer(200 if ready else 503, "text/plain; charset=utf-8",
                          why.encode() + b"\n")
    return None


async def serve_metrics(listener: str, metrics: BrokerMetrics, *,
                        allowed_hosts: tuple[str, ...] = (),
                        task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
                        ) -> None:
    _, host, port = parse_http_listener(listener, "metrics.listener")
    hosts = HostCheck(host or "", allowed_hosts)
    listeners = await trio.open_tcp_listeners(port, host=host)
    host, port = listeners[0].socket.getsockname()[:2]
    LOGGER.info("metrics on http://%s:%d/metrics", host, port)
    task_status.started((host, port))

    async def handler(stream: trio.SocketStream) -> None:
        try:
            local = str(stream.socket.getsockname()[0])
        except OSError:
            local = None
        await _handle(stream, metrics, hosts, local)

    await trio.serve_listeners(handler, listeners)


def _host_header(data: bytes) -> str | None:
    head = data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]
    for line in head:
        name, colon, value = line.partition(b":")
        if colon and name.strip().lower() == b"host":
            return value.strip().decode("latin-1")
    return None


async def _handle(stream: trio.abc.Stream, metrics: BrokerMetrics, hosts: HostCheck,
                  local_address: str | None) -> None:
    async with stream:
        data = b""
        with trio.move_on_after(5):
            while b"\r\n\r\n" not in data and len(data) < _MAX_REQUEST:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                data += chunk
                if not data[:1].isalpha():  # not HTTP (a Kafka client's frame): answer now
                    break
        first = data.split(b"\r\n", 1)[0].split()
        answer: HttpAnswer | None
        if len(first) < 2 or not data[:1].isalpha():
            answer = HttpAnswer(400, "text/plain", b"bad request\n")
        elif not hosts.allows(_host_header(data), local_address):
            answer = HttpAnswer(421, "text/plain", b"misdirected request: this Host is not "
                                b"served here (http.allowed.hosts)\n")
        elif first[0] not in (b"GET", b"HEAD"):
            answer = HttpAnswer(405, "text/plain", b"method not allowed\n")
        else:
            answer = metrics_response(first[1].decode("latin-1"), metrics) or HttpAnswer(
                404, "text/plain", b"not found\n")
        head = (f"HTTP/1.1 {answer.status} {_REASONS.get(answer.status, '')}\r\n"
                f"Content-Type: {answer.content_type}\r\n"
                f"Content-Length: {len(answer.body)}\r\nConnection: close\r\n\r\n").encode()
        try:
            await stream.send_all(head + (b"" if first[:1] == [b"HEAD"] else answer.body))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


__all__ = ["PATHS", "HttpAnswer", "metrics_response", "serve_metrics"]
