"""Run the web console in the broker's nursery: Hypercorn's Trio worker serving a Starlette app.

Why this stack: Starlette runs on Trio through anyio and gives routing, requests and responses;
Hypercorn's Trio worker serves it from inside our own nursery (``task_status`` reports the bound
address, cancelling the nursery stops it) with HTTP/1.1 keep-alive, size limits, idle timeouts
and TLS already written and tested. It costs more per request than a bare h11 loop, and its
imports are paid only when ``http.listener`` is set: both small against the console's budgets
(docs/benchmarks.md, "Web console"; docs/console.md).

The console never shares a task with client requests: its pages wait on its own Kafka client's
connections to the broker, which queue like any client's, and its work per request is bounded
(paged lists, bounded browser reads), so a page view costs the broker a few small requests.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from ..config import BrokerConfig
from ..server.state import BrokerState
from .app import build_app
from .hypercorn_settings import hypercorn_config, quiet_server_logger
from .sessions import Sessions
from .settings import console_listener, console_settings
from .web import Console

LOGGER = logging.getLogger("trio_broker.broker.http")
_SERVER_LOGGER = quiet_server_logger("trio_broker.broker.http.hypercorn")


def _hypercorn_config(console: Console) -> HypercornConfig:
    settings = console.settings
    config = hypercorn_config(settings.host, settings.port, _SERVER_LOGGER)
    if settings.scheme == "https":
        config.certfile = settings.certfile
        config.keyfile = settings.keyfile or settings.certfile
        config.keyfile_password = settings.key_password or None
    return config


def _address(bind: str) -> tuple[str, int]:
    """``http://127.0.0.1:9400`` or ``https://[::1]:9400`` -> (host, port)."""
    rest = bind.split("://", 1)[1]
    host, _, port = rest.rpartition(":")
    return host.strip("[]"), int(port)


async def run_console(config: BrokerConfig, state: BrokerState,
                      listeners: list[tuple[str, str, int]], *,
                      task_status: trio.TaskStatus[tuple[str, int] | None]
                      = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the console until cancelled; reports its bound (host, port), or None when off."""
    # the console's client connects where a client of that listener is told to
    settings = console_settings(config, state.advertised(console_listener(config)))
    if not settings.enabled:
        LOGGER.info("web console off: %s", settings.off_reason)
        task_status.started(None)
        return
    if settings.presents_no_certificate:
        LOGGER.info("web console: its client presents no certificate to the %s listener "
                    "(ssl.client.auth=%s); set http.console.ssl.certfile to give it one",
                    console_listener(config), settings.client_auth)
    async with trio.open_nursery() as nursery:
        sessions = Sessions(settings, nursery)
        await sessions.start()
        console = Console(settings, state, listeners, sessions)
        nursery.start_soon(console.sampler.run)
        app: Any = build_app(console)  # an ASGI 3 callable; Hypercorn's types are narrower
        binds: list[str] = await nursery.start(functools.partial(
            serve, app, _hypercorn_config(console), mode="asgi"))
        host, port = _address(binds[0])
        LOGGER.info("web console on %s://%s:%d/ (%s%s)", settings.scheme,
                    f"[{host}]" if ":" in host else host, port,
                    "read-only" if settings.read_only else "read-write",
                    ", login with the broker's SASL users" if settings.login_required else "")
        task_status.started((host, port))
