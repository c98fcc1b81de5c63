"""NetworkClient: connections opened on demand, reconnect backoff, and the metadata cache.

Why one object for both: which node to talk to comes from metadata, and metadata comes from a
node; Kafka's ``NetworkClient`` owns both for that reason, and so does this one.

Connections: one per node, opened by a task in the client's nursery (so a cancelled caller never
leaves a half-open connection) and shared by everyone who asked meanwhile. A failed attempt puts
the node in backoff: ``reconnect.backoff.ms * 2**failures`` with +/-20% jitter, capped at
``reconnect.backoff.max.ms``; a successful ApiVersions exchange resets it. Bootstrap servers are
nodes -1, -2, ... until the first Metadata response names the real brokers; a group coordinator
gets its own connection, as node ``2**31 - 1 - node_id`` (Java does the same so that long
JoinGroup waits never block other requests to that broker).

Security: TLS wraps the stream before ApiVersions, and SASL logs in right after it (Kafka's
order); a refused login or an untrusted certificate is not retried silently: it reaches
whoever waits for metadata or a connection, as Java's ``AuthenticationException`` does.

Metadata: one updater task refreshes when asked (``request_update`` after an error that says the
cache is stale, ``refresh_metadata`` to wait for fresh data) or when ``metadata.max.age.ms`` has
passed, never more often than ``retry.backoff.ms``. It asks for the topics someone registered
interest in (``wait_for_topic`` / ``add_topics``), so a cluster with thousands of topics costs a
client only what it uses.
"""

from __future__ import annotations

import logging
import math
import ssl
from collections.abc import Callable, Iterable
from typing import Any

import trio

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..core.backoff import ExponentialBackoff
from ..core.bootstrap import parse_bootstrap
from ..core.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    SslAuthenticationError,
    describe_code,
    error_for,
)
from ..core.metadata import ClusterMetadata, TopicInfo, metadata_request
from ..core.rng import CLIENT_RANDOM
from ..core.security import resolve_security
from .connection import BodySpec, BrokerConnection

LOGGER = logging.getLogger(__name__)

COORDINATOR_ID_BASE = 2**31 - 1


class Wakeup:
    """A resettable signal with one waiter: ``set()`` wakes it, ``wait()`` consumes the signal."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = trio.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait()
        self._event = trio.Event()

    def clear(self) -> None:
        if self._event.is_set():
            self._event = trio.Event()


class _ConnectAttempt:
    __slots__ = ("error", "event")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.error: KafkaError | None = None


class NetworkClient:
    """Connections to the cluster's nodes and the metadata cache; lives in its owner's nursery."""

    def __init__(self, config: dict[str, Any], *, allow_auto_topic_creation: bool) -> None:
        self.config = config
        self.client_id: str = config["client.id"]
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.request_timeout_s = config["request.timeout.ms"] / 1000
        self.retry_backoff = ExponentialBackoff(config["retry.backoff.ms"],
                                                config["retry.backoff.max.ms"])
        self.metadata = ClusterMetadata()
        self._reconnect_backoff = ExponentialBackoff(config["reconnect.backoff.ms"],
                                                     config["reconnect.backoff.max.ms"])
        self._setup_timeout_s = config["socket.connection.setup.timeout.ms"] / 1000
        self._idle_timeout_s = config["connections.max.idle.ms"] / 1000
        self._max_in_flight = config["max.in.flight.requests.per.connection"]
        self._max_age_s = config["metadata.max.age.ms"] / 1000
        self._bootstrap = {-(i + 1): (addr.host, addr.port)
                           for i, addr in enumerate(parse_bootstrap(config["bootstrap.servers"]))}
        self.security = resolve_security(config, config["bootstrap.servers"])
        self._extra_nodes: dict[int, tuple[str, int]] = dict(self._bootstrap)
        self._connections: dict[int, BrokerConnection] = {}
        self._pending: dict[int, _ConnectAttempt] = {}
        self._failures: dict[int, int] = {}
        self._backoff_until: dict[int, float] = {}
        self._wanted_topics: set[str] = set()
        #: a pattern subscription needs every topic's metadata, not just the wanted ones
        self._all_topics = False
        self._update_requested = 0
        self._update_completed = 0
        self._update_wakeup = Wakeup()
        self._updated = trio.Event()
        self._last_update_attempt = -math.inf
        #: the last metadata attempt's error when it cannot go away by retrying (a refused
        #: login, an untrusted certificate); None again after a successful update
        self.fatal_error: KafkaError | None = None
        self._nursery: trio.Nursery | None = None
        self._listeners: list[Callable[[], None]] = []
        self.closed = False

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self, nursery: trio.Nursery) -> None:
        """Start the metadata updater; connections' tasks also go into ``nursery``."""
        self._nursery = nursery
        nursery.start_soon(self._metadata_loop)

    def add_listener(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` whenever a connection opens or metadata is updated (so a task
        waiting for a leader or a connection can look again)."""
        self._listeners.append(callback)

    def _notify(self) -> None:
        for callback in self._listeners:
            callback()

    def close(self) -> None:
        """Close every connection (their tasks end); the owner's nursery then finishes."""
        self.closed = True
        for conn in list(self._connections.values()):
            conn.close()
        self._connections.clear()

    # --- nodes and connections ---------------------------------------------------------------

    def address(self, node_id: int) -> tuple[str, int]:
        broker = self.metadata.brokers.get(node_id)
        if broker is not None:
            return broker.host, broker.port
        try:
            return self._extra_nodes[node_id]
        except KeyError:
            raise KafkaConnectionError(f"node {node_id} is not known") from None

    def coordinator_node(self, node_id: int, host: str, port: int) -> int:
        """The node id under which to reach ``node_id`` as a coordinator (its own connection)."""
        coordinator_id = COORDINATOR_ID_BASE - node_id
        if self._extra_nodes.get(coordinator_id) != (host, port):
            self._extra_nodes[coordinator_id] = (host, port)
            old = self._connections.get(coordinator_id)
            if old is not None and (old.host, old.port) != (host, port):
                old.close()
        return coordinator_id

    def ready_connection(self, node_id: int) -> BrokerConnection | None:
        """The open connection to ``node_id``, or None (and start connecting unless backing off).
        """
        conn = self._connections.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        if node_id not in self._pending and self._backoff_remaining(node_id) <= 0:
            self._start_connect(node_id)
        return None

    def connect_delay(self, node_id: int) -> float:
        """Seconds until a connection attempt to ``node_id`` may start (0 if now)."""
        return max(0.0, self._backoff_remaining(node_id))

    def is_connecting(self, node_id: int) -> bool:
        return node_id in self._pending

    async def connection(self, node_id: int) -> BrokerConnection:
        """An open connection to ``node_id``: waits out any backoff, then one attempt.

        Raises ``KafkaConnectionError`` if that attempt fails.
        """
        while True:
            conn = self._connections.get(node_id)
            if conn is not None and not conn.closed:
                return conn
            if self.closed:
                raise KafkaConnectionError("the client is closed")
            attempt = self._pending.get(node_id)
            if attempt is None:
                wait_s = self._backoff_remaining(node_id)
                if wait_s > 0:
                    await trio.sleep(wait_s)
                    continue
                attempt = self._start_connect(node_id)
            await attempt.event.wait()
            if attempt.error is not None:
                raise attempt.error

    def _backoff_remaining(self, node_id: int) -> float:
        return self._backoff_until.get(node_id, -math.inf) - trio.current_time()

    def _start_connect(self, node_id: int) -> _ConnectAttempt:
        assert self._nursery is not None, "NetworkClient.start() was not called"
        attempt = _ConnectAttempt()
        self._pending[node_id] = attempt
        self._nursery.start_soon(self._connect, node_id, attempt)
        return attempt

    async def _connect(self, node_id: int, attempt: _ConnectAttempt) -> None:
        assert self._nursery is not None
        conn: BrokerConnection | None = None
        try:
            host, port = self.address(node_id)
            security = self.security
            with trio.fail_after(self._setup_timeout_s):
                stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
                if security.ssl_context is not None:
                    stream = trio.SSLStream(stream, security.ssl_context, server_hostname=host,
                                            https_compatible=True)
                    await stream.do_handshake()
                conn = BrokerConnection(
                    node_id, host, port, client_id=self.client_id,
                    request_timeout_s=self.request_timeout_s,
                    max_in_flight=self._max_in_flight, idle_timeout_s=self._idle_timeout_s,
                    on_close=self._on_connection_closed)
                await self._nursery.start(conn.run, stream)
                await conn.negotiate_versions()
                if security.sasl is not None:
                    await conn.authenticate(security.sasl)
        except (OSError, trio.TooSlowError, trio.BrokenResourceError, KafkaError) as exc:
            if isinstance(exc, trio.BrokenResourceError) and isinstance(exc.__cause__,
                                                                        ssl.SSLError):
                exc = SslAuthenticationError(f"TLS handshake with node {node_id} failed: "
                                             f"{exc.__cause__.reason or exc.__cause__}")
            failures = self._failures.get(node_id, 0)
            delay_ms = self._reconnect_backoff.backoff_ms(failures)
            self._failures[node_id] = failures + 1
            self._backoff_until[node_id] = trio.current_time() + delay_ms / 1000
            what = "timed out" if isinstance(exc, trio.TooSlowError) else repr(exc)
            LOGGER.info("connection to node %s failed (%s); next attempt in %.0f ms",
                        node_id, what, delay_ms)
            if conn is not None:
                conn.close()
            if isinstance(exc, KafkaConnectionError) or (
                    isinstance(exc, KafkaError) and not exc.retriable):
                attempt.error = exc  # an authentication failure reaches the caller as it is
            else:
                attempt.error = KafkaConnectionError(f"connecting to node {node_id} failed: "
                                                     f"{what}")
        else:
            self._failures.pop(node_id, None)
            self._backoff_until.pop(node_id, None)
            if self.closed:
                conn.close()
                attempt.error = KafkaConnectionError("the client is closed")
            else:
                self._connections[node_id] = conn
                LOGGER.debug("connected to node %s at %s:%s", node_id, conn.host, conn.port)
        finally:
            del self._pending[node_id]
            attempt.event.set()
            self._notify()

    def _on_connection_closed(self, conn: BrokerConnection) -> None:
        if self._connections.get(conn.node_id) is conn:
            del self._connections[conn.node_id]
            if not self.closed:
                # a broker that accepts and then drops us must not be hammered
                delay = self._reconnect_backoff.backoff_ms(0) / 1000
                self._backoff_until[conn.node_id] = trio.current_time() + delay

    def least_loaded_node(self) -> int:
        """The known node with the fewest in-flight requests, preferring open connections."""
        candidates = list(self.metadata.brokers) or list(self._bootstrap)
        CLIENT_RANDOM.shuffle(candidates)
        best, best_load = None, math.inf
        connecting = idle = None
        soonest, soonest_at = candidates[0], math.inf
        for node_id in candidates:
            conn = self._connections.get(node_id)
            if conn is not None and not conn.closed:
                load = len(conn.in_flight)
                if load < best_load:
                    best, best_load = node_id, load
            elif node_id in self._pending:
                connecting = node_id
            else:
                remaining = self._backoff_remaining(node_id)
                if remaining <= 0:
                    idle = node_id
                elif remaining < soonest_at:
                    soonest, soonest_at = node_id, remaining
        for choice in (best, connecting, idle):
            if choice is not None:
                return choice
        return soonest

    async def request(self, node_id: int, api_key: int, body: BodySpec, *,
                      timeout_s: float | None = None, version: int | None = None) -> Any:
        """One request to ``node_id`` and its decoded response (connecting first if needed);
        ``version`` pins the version instead of negotiating it."""
        conn = await self.connection(node_id)
        if version is None:
            return await conn.request(api_key, body, timeout_s=timeout_s)
        sent = await conn.send(api_key, body, timeout_s=timeout_s, version=version)
        assert sent is not None
        return await sent.wait()

    async def request_any(self, api_key: int, body: BodySpec, *,
                          timeout_s: float | None = None) -> Any:
        return await self.request(self.least_loaded_node(), api_key, body, timeout_s=timeout_s)

    # --- metadata ----------------------------------------------------------------------------

    def add_topics(self, topics: Iterable[str]) -> None:
        new = set(topics) - self._wanted_topics
        if new:
            self._wanted_topics |= new
            self.request_update()

    def set_topics(self, topics: Iterable[str]) -> None:
        """Track exactly ``topics`` (a consumer's subscription)."""
        topics = set(topics)
        if topics != self._wanted_topics:
            self._wanted_topics = topics
            self.request_update()

    def track_all_topics(self, on: bool) -> None:
        """Ask Metadata for every topic (a pattern subscription matches against them)."""
        if on != self._all_topics:
            self._all_topics = on
            self.request_update()

    @property
    def wanted_topics(self) -> frozenset[str]:
        return frozenset(self._wanted_topics)

    def request_update(self) -> None:
        """Ask for a metadata refresh soon (after an error saying the cache is stale)."""
        if self._update_requested <= self._update_completed:
            self._update_requested = self._update_completed + 1
        self._update_wakeup.set()

    async def refresh_metadata(self) -> None:
        """Wait for a metadata response requested after this call started."""
        self._update_requested += 1
        target = self._update_requested
        self._update_wakeup.set()
        while self._update_completed < target:
            if self.fatal_error is not None:
                raise self.fatal_error
            await self._updated.wait()

    async def wait_for_topic(self, topic: str, timeout_s: float) -> TopicInfo:
        """Kafka's ``waitOnMetadata``: the topic's partitions, waiting up to ``timeout_s``."""
        info = self.metadata.topics.get(topic)
        if info is not None and info.error == ErrorCode.NONE and info.num_partitions:
            return info
        self.add_topics((topic,))
        with trio.move_on_after(timeout_s):
            while True:
                info = self.metadata.topics.get(topic)
                if info is not None:
                    if info.error == ErrorCode.NONE and info.num_partitions:
                        return info
                    if info.error:
                        error = error_for(info.error, f"topic {topic!r}: "
                                          f"{describe_code(info.error)}")
                        if not error.retriable:
                            raise error
                await self.refresh_metadata()
        raise KafkaTimeoutError(
            f"topic {topic!r} not present in metadata after {timeout_s * 1000:.0f} ms")

    async def _metadata_loop(self) -> None:
        failures = 0
        while True:
            age_deadline = self.metadata.updated_at + self._max_age_s
            while (self._update_requested <= self._update_completed
                   and trio.current_time() < age_deadline):
                with trio.move_on_at(age_deadline):
                    await self._update_wakeup.wait()
            min_next = self._last_update_attempt + self.config["retry.backoff.ms"] / 1000
            if failures:
                min_next = self._last_update_attempt + (
                    self.retry_backoff.backoff_ms(failures - 1) / 1000)
            if trio.current_time() < min_next:
                await trio.sleep_until(min_next)
            target = max(self._update_requested, self._update_completed + 1)
            self._last_update_attempt = trio.current_time()
            try:
                await self._update_metadata()
            except KafkaError as exc:
                failures += 1
                if not self.closed:
                    LOGGER.info("metadata request failed: %r", exc)
                if not exc.retriable:  # waiters raise it; the loop keeps trying, as Java's
                    self.fatal_error = exc
                    self._updated.set()
                    self._updated = trio.Event()
                    self._notify()
                continue
            failures = 0
            self.fatal_error = None
            self._update_completed = target
            self._updated.set()
            self._updated = trio.Event()
            self._notify()

    async def _update_metadata(self) -> None:
        every = self._all_topics
        wanted = sorted(self._wanted_topics)
        node_id = self.least_loaded_node()
        conn = await self.connection(node_id)
        # (v0 reads an empty list as "all topics": acceptable for a broker that old)
        response = await conn.request(ApiKey.Metadata, lambda v: metadata_request(
            v, None if every else wanted,
            allow_auto_create=False if every else self.allow_auto_topic_creation))
        # an all-topics answer lists every topic: the ones known before and absent now are gone
        gone = sorted(set(self.metadata.topics) | self._wanted_topics) if every else wanted
        self.metadata.update(response, trio.current_time(), requested=gone)
