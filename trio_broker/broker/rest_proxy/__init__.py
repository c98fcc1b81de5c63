"""Confluent's REST Proxy API v3 served from the broker (docs/rest.md).

Why a thin entry point: the web stack (Starlette, Hypercorn) is imported only when
``rest.proxy.listener`` is set, so a broker without the proxy starts as fast as before.

What it owns: the ASGI application (``app``), the routes for the cluster, brokers, topics,
configs and partitions (``cluster_routes``), replicas (``replica_routes``), consumer groups and
lag (``group_routes``), ACLs (``acl_routes``), produce (``produce``, ``records``, and
``schema_records`` for keys and values written with the broker's Schema Registry), Confluent's
JSON shapes (``shapes``) and error bodies (``errors``), its Kafka client and shared reads
(``proxy``), basic authentication as the broker's SASL users (``auth``), v2's produce and
consumer instances (``v2_produce``, ``v2_consumers``, ``instances``) and the Hypercorn server
(``server``).

May import config, the server core (``BrokerState``), the Trio client (the proxy is a client of
the broker's own listener), the protocol, and the console's read path and Host check
(``broker.http.reads``, ``broker.http.guard``) and the Schema Registry's state and descriptor
reader; never the network or a handler.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from ..config import BrokerConfig
from ..server.state import BrokerState

if TYPE_CHECKING:
    from ..schema_registry.registry import SchemaRegistry

LOGGER = logging.getLogger("trio_broker.broker.rest_proxy")


async def serve_rest_proxy(config: BrokerConfig, state: BrokerState, *,
                           registry: SchemaRegistry | None = None,
                           task_status: trio.TaskStatus[tuple[str, int] | None]
                           = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the REST proxy on ``rest.proxy.listener`` (and under ``/kafka`` of the console's
    listener with ``kafka.rest.enable``) until cancelled; ``task_status`` reports the bound
    (host, port), or None without a listener of its own. ``registry``: the broker's Schema
    Registry, when it is served (records with schemas are written through it)."""
    if config.kafka_rest_enable and not config.http_listener:
        LOGGER.warning("kafka.rest.enable=true serves the REST proxy under /kafka of the web "
                       "console's listener, and http.listener is not set: nothing is served "
                       "there")
    if not config.rest_proxy_listener and not (config.kafka_rest_enable and config.http_listener):
        task_status.started(None)
        return
    from .server import run_rest_proxy

    await run_rest_proxy(config, state, registry=registry, task_status=task_status)


__all__ = ["serve_rest_proxy"]
