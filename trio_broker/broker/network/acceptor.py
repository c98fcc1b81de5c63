"""Kafka's ``Acceptor``: accepts connections on one listener, deals them to the processors.

Why apart from ``processor.py``: it needs nothing of a processor but ``accept``, and the
connection quotas are checked here, before a processor sees the connection (Kafka's order).
"""

from __future__ import annotations

import errno
import itertools
import logging
from collections.abc import Sequence
from typing import Protocol

import trio

from ..config import Listener
from ..metrics import BrokerMetrics
from .connection import peer_address
from .quotas import ConnectionQuotas

LOGGER = logging.getLogger(__name__)

# Accept errors that mean "overloaded, try again shortly" (as trio's serve_listeners).
ACCEPT_CAPACITY_ERRNOS = frozenset(
    e for e in (getattr(errno, n, None) for n in ("EMFILE", "ENFILE", "ENOMEM", "ENOBUFS"))
    if e is not None
)


class ConnectionTaker(Protocol):
    """What the acceptor deals connections to (a ``Processor``)."""

    async def accept(self, stream: trio.SocketStream, listener: Listener) -> None: ...


class Acceptor:
    """Accepts connections on one listener and deals them round-robin to the processors."""

    def __init__(self, socket_listener: trio.SocketListener, listener: Listener, *,
                 processors: Sequence[ConnectionTaker], quotas: ConnectionQuotas,
                 metrics: BrokerMetrics) -> None:
        self.socket_listener = socket_listener
        self.listener = listener
        self._processors = processors
        self._quotas = quotas
        self._metrics = metrics

    async def run(self) -> None:
        async with self.socket_listener, trio.open_nursery() as delayed_closes:
            await self._accept_loop(delayed_closes)

    async def _accept_loop(self, delayed_closes: trio.Nursery) -> None:
        quotas = self._quotas
        rr = itertools.cycle(self._processors)
        while True:
            await quotas.wait_for_slot()
            try:
                stream = await self.socket_listener.accept()
            except OSError as exc:
                if exc.errno in ACCEPT_CAPACITY_ERRNOS:
                    LOGGER.error("accept returned %s (%s); retrying in 100 ms",
                                 errno.errorcode.get(exc.errno or 0, "?"), exc)
                    await trio.sleep(0.1)
                    continue
                raise
            throttle_s = quotas.record_connection(self.listener.name)
            host, _ = peer_address(stream)
            ip_throttle_s = quotas.ip_throttle_s(host)
            if ip_throttle_s > 0:
                self._metrics.connections_refused.labels("per_ip_rate").inc()
                # debug, as Kafka: a flood would otherwise flood the log too
                LOGGER.debug("closing connection from %s in %.0f ms: its "
                            "connection_creation_rate quota (%s/s) is reached", host,
                            ip_throttle_s * 1000, quotas.ip_rate(host))
                delayed_closes.start_soon(_close_after, stream, ip_throttle_s)
            elif not quotas.try_acquire(host):
                self._metrics.connections_refused.labels("per_ip").inc()
                LOGGER.info("closing connection from %s: max.connections.per.ip (%d) "
                            "reached", host, quotas.limit_for(host))
                await stream.aclose()
            else:
                await next(rr).accept(stream, self.listener)
            if throttle_s > 0:
                # Kafka's acceptor waits the throttle time: new connections stay in the
                # backlog meanwhile, none is refused.
                await trio.sleep(throttle_s)


async def _close_after(stream: trio.SocketStream, delay_s: float) -> None:
    """Close a connection over its address's rate once the throttle time passes (Kafka's
    ``closeThrottledConnections``), so that a client retrying at once is slowed as well."""
    try:
        await trio.sleep(delay_s)
    finally:
        await trio.aclose_forcefully(stream)


__all__ = ["ACCEPT_CAPACITY_ERRNOS", "Acceptor", "ConnectionTaker"]
