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


async def run_registry(config: BrokerConfig, state: BrokerState, *, mount: str | None = None,
                       task_status: trio.TaskStatus[tuple[str, int, SchemaRegistry] | None]
                       = trio.TASK_STATUS_IGNORED) -> None:
    """Read ``_schemas``, then serve the REST API until cancelled, on
    ``schema.registry.listener`` and under the path ``mount`` of the console's listener, if
    given; reports (host, port, registry), or None without a listener of its own."""
    listener = None
    if config.schema_registry_listener:
        scheme, host, port = parse_http_listener(config.schema_registry_listener,
                                                 "schema.registry.listener")
        server_config = hypercorn_config(host, port, _SERVER_LOGGER)
        serve_tls(server_config, config, "schema.registry.listener", scheme)
        listener = scheme, host, server_config
    store = KafkaStore(state)
    await store.start()
    registry = SchemaRegistry(store)
    allowed = [h for h in config.http_allowed_hosts.split(",") if h]
    metrics = HttpMetrics(SCHEMA_REGISTRY)
    state.metrics.add_collector(metrics.collect)
    auth = (RegistryAuth(config.scram_credentials_path, state)
            if config.schema_registry_authentication_method.upper() == "BASIC" else None)
    routes = CountRequests(build_app(registry, auth), metrics)

    def app_for(host: str) -> Any:  # an ASGI 3 callable; Hypercorn's types are narrower
        return HostGuard(routes, HostCheck(host, allowed))

    described = f"{len(store.state.subjects)} subjects read from _schemas" + (
        "; basic authentication as the broker's SASL users" if auth else "")
    async with trio.open_nursery() as nursery:
        bound = None
        if listener is not None:
            scheme, host, server_config = listener
            binds: list[str] = await nursery.start(functools.partial(
                serve, app_for(host), server_config, mode="asgi"))
            rest = binds[0].split("://", 1)[1]
            bound_host, _, bound_port = rest.rpartition(":")
            bound = bound_host.strip("[]"), int(bound_port), registry
            LOGGER.info("schema registry on %s://%s/ (%s)", scheme, rest, described)
        if mount is not None:
            console_host = parse_http_listener(config.http_listener)[1]
            state.http_mounts[mount] = app_for(console_host)
            LOGGER.info("schema registry under %s of the web console's listener (%s)", mount,
                        described)
        state.attached.schema_registry = registry
        try:
            task_status.started(bound)
            await trio.sleep_forever()
        finally:
            state.attached.schema_registry = None
            if mount is not None:
                state.http_mounts.pop(mount, None)
