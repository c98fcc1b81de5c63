"""Serve the registry in the broker's nursery: Hypercorn's Trio worker, as the console is served.

Why the same stack as the web console (``broker/http/server.py``): Starlette on Trio through
anyio, Hypercorn serving it from inside our own nursery with keep-alive, size limits and idle
timeouts already written; ``task_status`` reports the bound address and cancelling the nursery
stops it.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import trio
from hypercorn.trio import serve

from ..config import BrokerConfig
from ..config.listeners import parse_http_listener
from ..http.guard import HostCheck
from ..http.host_guard import HostGuard
from ..http.hypercorn_settings import hypercorn_config, quiet_server_logger, serve_tls
from ..http.request_metrics import SCHEMA_REGISTRY, CountRequests, HttpMetrics
from ..server.state import BrokerState
from .app import build_app
from .auth import RegistryAuth
from .registry import SchemaRegistry
from .store import KafkaStore

LOGGER = logging.getLogger("trio_broker.broker.schema_registry")
_SERVER_LOGGER = quiet_server_logger("trio_broker.broker.schema_registry.hypercorn")


async def run_registry(config: BrokerConfig, state: BrokerState, *,
                       task_status: trio.TaskStatus[tuple[str, int, SchemaRegistry]]
                       = trio.TASK_STATUS_IGNORED) -> None:
    """Read ``_schemas``, then serve the REST API until cancelled; reports (host, port,
    registry)."""
    scheme, host, port = parse_http_listener(config.schema_registry_listener,
                                             "schema.registry.listener")
    server_config = hypercorn_config(host, port, _SERVER_LOGGER)
    serve_tls(server_config, config, "schema.registry.listener", scheme)
    store = KafkaStore(state)
    await store.start()
    registry = SchemaRegistry(store)
    hosts = HostCheck(host, [h for h in config.http_allowed_hosts.split(",") if h])
    # an ASGI 3 callable; Hypercorn's types are narrower
    metrics = HttpMetrics(SCHEMA_REGISTRY)
    state.metrics.add_collector(metrics.collect)
    auth = (RegistryAuth(config.scram_credentials_path, state)
            if config.schema_registry_authentication_method.upper() == "BASIC" else None)
    app: Any = HostGuard(CountRequests(build_app(registry, auth), metrics), hosts)
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(functools.partial(
            serve, app, server_config, mode="asgi"))
        rest = binds[0].split("://", 1)[1]
        bound_host, _, bound_port = rest.rpartition(":")
        bound_host = bound_host.strip("[]")
        LOGGER.info("schema registry on %s://%s/ (%d subjects read from %s%s)", scheme, rest,
                    len(store.state.subjects), "_schemas",
                    "; basic authentication as the broker's SASL users" if auth else "")
        state.attached.schema_registry = registry
        try:
            task_status.started((bound_host, int(bound_port), registry))
            await trio.sleep_forever()
        finally:
            state.attached.schema_registry = None
