"""A tiny Trio HTTP endpoint serving the Prometheus text exposition on ``metrics.listener``.

Why not prometheus-client's own server: it runs a thread; this lives in the broker's nursery and
stops with it.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import trio

from ..config import ConfigError
from ..metrics import BrokerMetrics

LOGGER = logging.getLogger(__name__)
_MAX_REQUEST = 8192


def parse_metrics_listener(value: str) -> tuple[str, int]:
    url = urlsplit(value if "://" in value else f"http://{value}")
    if url.scheme != "http" or not url.hostname or url.port is None:
        raise ConfigError(f"metrics.listener={value!r}: expected http://host:port")
    return url.hostname, url.port


async def serve_metrics(listener: str, metrics: BrokerMetrics, *,
                        task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
                        ) -> None:
    host, port = parse_metrics_listener(listener)
    listeners = await trio.open_tcp_listeners(port, host=host)
    host, port = listeners[0].socket.getsockname()[:2]
    LOGGER.info("metrics on http://%s:%d/metrics", host, port)
    task_status.started((host, port))

    async def handler(stream: trio.SocketStream) -> None:
        await _handle(stream, metrics)

    await trio.serve_listeners(handler, listeners)


async def _handle(stream: trio.abc.Stream, metrics: BrokerMetrics) -> None:
    async with stream:
        data = b""
        with trio.move_on_after(5):
            while b"\r\n\r\n" not in data and len(data) < _MAX_REQUEST:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                data += chunk
        first = data.split(b"\r\n", 1)[0].split()
        if len(first) < 2 or first[0] != b"GET":
            status, body, ctype = b"400 Bad Request", b"bad request\n", b"text/plain"
        elif first[1].split(b"?")[0] not in (b"/", b"/metrics"):
            status, body, ctype = b"404 Not Found", b"not found\n", b"text/plain"
        else:
            status, body = b"200 OK", metrics.expose()
            ctype = b"text/plain; version=0.0.4; charset=utf-8"
        head = (b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype
                + b"\r\nContent-Length: " + str(len(body)).encode()
                + b"\r\nConnection: close\r\n\r\n")
        try:
            await stream.send_all(head + body)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
