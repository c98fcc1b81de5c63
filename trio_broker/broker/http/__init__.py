"""The broker's HTTP side: the web console (docs/console.md).

Why a thin entry point: the console's web stack (Starlette, Hypercorn, Jinja2) is imported only
when ``http.listener`` is set, so a broker without a console starts as fast as before.

What it owns: the ASGI application and its routes (``app``, ``web``), the pages (``overview``,
``topic_pages``, ``group_pages``, ``messages``), what they read and write through the broker's
own listener (``reads``, ``writes``), its Kafka clients, one per login (``sessions``), its
settings (``settings``), the live charts' sampler (``live``) and the Hypercorn server
(``server``). The metrics endpoint is the network's (``broker.network.metrics_http``), the test
cluster's control API the test double's (``testing.control``), Confluent's REST Proxy API the
REST proxy's (``broker.rest_proxy``, which reuses ``reads`` and ``guard``). The Hypercorn
settings every HTTP face shares (``hypercorn_settings``) and Confluent's error answer the
Schema Registry and the REST proxy share (``confluent_error``) live here too.

May import config, metrics, the server core (``BrokerState``), the Trio client (the console is a
client of the broker's own listener) and the protocol; never the network or a handler.
"""

from __future__ import annotations

import trio

from ..config import BrokerConfig
from ..server.state import BrokerState


async def serve_http(config: BrokerConfig, state: BrokerState,
                     listeners: list[tuple[str, str, int]], *,
                     task_status: trio.TaskStatus[tuple[str, int] | None]
                     = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the web console on ``http.listener`` until cancelled; ``task_status`` reports the
    bound (host, port), or None when the console is off."""
    if not config.http_listener:
        task_status.started(None)
        return
    from .server import run_console

    await run_console(config, state, listeners, task_status=task_status)


__all__ = ["serve_http"]
