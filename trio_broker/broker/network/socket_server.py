"""Kafka's SocketServer, in Trio's structured concurrency.

Threading model, Trio edition. One nursery owns, per listener, an ``Acceptor`` task
(``acceptor.py``); N ``Processor``s (``processor.py``), each owning a nursery of connection
tasks, a selector for its idle connections, a new-connection channel and a response channel;
one bounded ``RequestChannel``; and a pool of M request handler tasks (``request_handler.py``).

Collaborators are passed in, as Kafka's are: a ``Processor`` gets the request channel, the
metrics, the connection quotas, its settings and the TLS and SASL settings; an ``Acceptor`` gets
its listener, the processors and the quotas. Nothing holds a pointer back to the server, and a
``Request`` names its connection by id (``RequestContext.connection_id``), never by reference.

Shutdown order (``SocketServer.stop``): acceptors, then processors stop reading new requests and
finish what is in flight within the grace period, then everything is cancelled and closed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from ..config import BrokerConfig, ConfigError
from ..metrics import BrokerMetrics
from .acceptor import Acceptor
from .connection import Connection, ProcessorSettings
from .processor import SASL_PROTOCOLS, TLS_PROTOCOLS, Processor
from .quotas import ConnectionQuotas
from .request_channel import RequestChannel

if TYPE_CHECKING:
    import ssl

    from ..security.sasl import SaslSettings

LOGGER = logging.getLogger(__name__)


class SocketServer:
    """Listeners, acceptors, processors and the request channel of one broker."""

    def __init__(self, config: BrokerConfig, metrics: BrokerMetrics) -> None:
        self.config = config
        self.metrics = metrics
        n = config.num_network_threads
        self.request_channel = RequestChannel(config.queued_max_requests, n)
        self.quotas = ConnectionQuotas(config.max_connections, config.max_connections_per_ip,
                                       config.per_ip_overrides)
        protocols = {listener.security_protocol for listener in config.listener_list}
        ssl_context: ssl.SSLContext | None = None
        sasl_settings: SaslSettings | None = None
        # TLS and SASL are imported by the listeners that use them, not by every broker.
        if protocols & TLS_PROTOCOLS:
            from ..security.tls import TLSConfigError, server_ssl_context

            try:
                ssl_context = server_ssl_context(config)
            except TLSConfigError as exc:
                raise ConfigError(str(exc)) from None
        if protocols & SASL_PROTOCOLS:
            from ..security.credentials import CredentialsError, CredentialStore
            from ..security.sasl import SaslSettings, oauth_settings

            path = config.scram_credentials_path
            try:
                # the log dir's store may not exist yet: AlterUserScramCredentials writes it
                credentials = CredentialStore(path, missing_ok=not config.sasl_credentials_file)
            except CredentialsError as exc:
                raise ConfigError(str(exc)) from None
            sasl_settings = SaslSettings(
                mechanisms=config.sasl_mechanism_list, credentials=credentials,
                failed_authentication_delay_s=(
                    config.connection_failed_authentication_delay_ms / 1000),
                max_receive_size=config.sasl_server_max_receive_size,
                reauth_ms=config.connections_max_reauth_ms, oauth=oauth_settings(config))
        settings = ProcessorSettings.from_config(config)
        #: callables told the id of each connection that closes (the broker state's parts that
        #: keep something per connection; added once the state exists)
        self.disconnected: list[Callable[[str], None]] = []
        self.processors = [
            Processor(i, request_channel=self.request_channel, metrics=metrics,
                      quotas=self.quotas, settings=settings, ssl_context=ssl_context,
                      sasl_settings=sasl_settings, disconnected=self.disconnected)
            for i in range(n)]
        self.bound: list[tuple[str, str, int]] = []  # (listener name, host, port)
        self._acceptor_scope = trio.CancelScope()
        metrics.request_queue_size.set_function(self.request_channel.request_queue_size)
        metrics.response_queue_size.set_function(self.request_channel.response_queue_size)

    async def start(self, nursery: trio.Nursery) -> list[tuple[str, str, int]]:
        """Bind every listener, start processors and acceptors; return what was bound."""
        acceptors = []
        for listener in self.config.listener_list:
            sockets = await trio.open_tcp_listeners(listener.port, host=listener.host or None)
            for sock_listener in sockets:
                host, port = sock_listener.socket.getsockname()[:2]
                self.bound.append((listener.name, host, port))
                acceptors.append(Acceptor(sock_listener, listener, processors=self.processors,
                                          quotas=self.quotas, metrics=self.metrics))
        for processor in self.processors:
            nursery.start_soon(processor.run)
        nursery.start_soon(self._run_acceptors, acceptors)
        return self.bound

    async def _run_acceptors(self, acceptors: list[Acceptor]) -> None:
        with self._acceptor_scope:
            async with trio.open_nursery() as nursery:
                for acceptor in acceptors:
                    nursery.start_soon(acceptor.run)

    def in_flight(self) -> int:
        return sum(p.in_flight() for p in self.processors)

    async def stop(self, grace_s: float) -> None:
        """Stop accepting, stop reading new requests, wait for in-flight ones up to ``grace_s``."""
        self._acceptor_scope.cancel()
        for p in self.processors:
            p.stop_reading()
        with trio.move_on_after(grace_s):
            for p in self.processors:
                await p.wait_in_flight_done()
        if self.in_flight():
            LOGGER.warning("shutdown: %d requests still in flight after %.1fs grace",
                           self.in_flight(), grace_s)


__all__ = ["Acceptor", "Connection", "Processor", "ProcessorSettings", "SocketServer"]
