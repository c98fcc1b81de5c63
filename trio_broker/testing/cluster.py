"""A whole test cluster in one process: N broker endpoints over one storage, with controls.

Why this shape: the storage parts (the logs, the group coordinator, the transaction
coordinator, the fetch purgatory) are started once, as ``serve`` starts them for one broker;
each node then gets its own ``SocketServer`` (its own listeners, processors and request queue)
and its own ``RequestHandlerPool`` over a per-node view of the broker state (its node id and
advertised endpoints, one per listener; everything else shared). The handlers answer as that
node would, from the cluster model (``broker/server/cluster_model.py``), and the pool passes each
request through the fault injection of ``faults.py``.

Stopping a node cancels its socket server: the listener closes and its connections drop; its
partitions fail over in the model first, so clients that reconnect elsewhere find new leaders.
Starting it again binds the same port. This is a faithful test double of a cluster for clients,
not a replicated system (docs/testing.md).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import tempfile
import time
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ..broker.apis.registry import HANDLERS
from ..broker.config import BrokerConfig, ConfigError
from ..broker.config.dynamic import DynamicBrokerConfigs
from ..broker.lifecycle import (
    ConfigInput,
    as_config,
    kafka_kwargs,
    log_cleaner,
    start_log_duties,
    start_storage,
)
from ..broker.metrics import BrokerMetrics
from ..broker.network.request_handler import RequestHandlerPool
from ..broker.network.socket_server import SocketServer
from ..broker.offload import run_io
from ..broker.schema_registry import registry_url, serve_schema_registry
from ..broker.server.cluster_model import ClusterModel, Node
from ..broker.server.purgatory import Purgatory
from ..broker.server.state import BrokerState
from .fault_state import Faults, RequestRecord
from .faults import cluster_handlers

if TYPE_CHECKING:
    from ..broker.schema_registry.registry import SchemaRegistry

LOGGER = logging.getLogger(__name__)


@attrs.frozen
class BrokerAddress:
    """One node of a cluster, as ``Cluster.brokers`` lists it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


class _Node:
    """One broker: a socket server and a handler pool over the node's state view."""

    def __init__(self, node_id: int, config: BrokerConfig, faults: Faults) -> None:
        self.node_id = node_id
        self.config = config
        self.faults = faults
        self.metrics = BrokerMetrics(node_id=node_id)
        self.state: BrokerState | None = None
        #: listener name -> (host, port): as configured until first bound, then as bound (a
        #: restart binds the same ports)
        self.endpoints = {lst.name: (lst.host, lst.port) for lst in config.listener_list}
        self._scope: trio.CancelScope | None = None
        self._done: trio.Event | None = None

    @property
    def host(self) -> str:
        """The first listener's host (``Cluster.bootstrap_servers`` names it)."""
        return next(iter(self.endpoints.values()))[0]

    @property
    def port(self) -> int:
        return next(iter(self.endpoints.values()))[1]

    @property
    def running(self) -> bool:
        return self._scope is not None

    async def start(self, nursery: trio.Nursery, base: BrokerState) -> None:
        # the configured hosts, the ports first bound: a restart binds what the first start did
        at = {x.name: (x.host, self.endpoints[x.name][1]) for x in self.config.listener_list}
        cfg = self.config.evolve(listeners=_listeners_value(self.config, at))
        server = SocketServer(cfg, self.metrics)
        scope = trio.CancelScope()
        done = trio.Event()

        async def run(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                with scope:
                    async with trio.open_nursery() as inner:
                        bound = await server.start(inner)
                        if self.state is None:
                            # each listener advertises itself as bound, as a broker without
                            # advertised.listeners does
                            self.endpoints = {}
                            for name, host, port in bound:
                                self.endpoints.setdefault(name, (host, port))
                            # its own dynamic store: DescribeConfigs of this broker names
                            # its own static config (node id, rack) and per-broker set
                            self.state = attrs.evolve(
                                base, config=cfg, metrics=self.metrics,
                                advertised_host=self.host, advertised_port=self.port,
                                endpoints=dict(self.endpoints),
                                dynamic_configs=base.dynamic_configs.for_node(cfg))
                        state = self.state
                        server.disconnected.append(
                            lambda cid: state.telemetry.connection_closed(cid, state.now_ms()))
                        pool = RequestHandlerPool(
                            self.state, server.request_channel, cfg.num_io_threads,
                            handlers=cluster_handlers(HANDLERS, self.faults))
                        await inner.start(pool.run)
                        task_status.started()
            finally:
                done.set()

        await nursery.start(run)
        self._scope, self._done = scope, done

    async def stop(self) -> None:
        """Close the listener and drop every connection at once (an unclean stop)."""
        scope, done = self._scope, self._done
        if scope is None or done is None:
            return
        self._scope = self._done = None
        scope.cancel()
        await done.wait()


class Cluster:
    """A running test cluster: its brokers and the controls of its faults."""

    def __init__(self, state: BrokerState, nodes: dict[int, _Node], faults: Faults,
                 nursery: trio.Nursery) -> None:
        self.state = state
        self.model: ClusterModel = state.cluster
        #: injected errors, disconnects and latency, and the request log, of every node
        self.faults = faults
        self._nodes = nodes
        self._nursery = nursery
        self._stop = trio.Event()
        #: the bound (host, port) of the HTTP control endpoint, when ``control.listener`` is set
        self.control_address: tuple[str, int] | None = None
        #: what the Schema Registry reported, when ``schema.registry.listener`` is set
        self.schema_registry: tuple[str, int, SchemaRegistry] | None = None

    @property
    def schema_registry_url(self) -> str | None:
        """``http(s)://host:port`` of the cluster's Schema Registry (one for the cluster, as
        a registry serves many brokers), or None when it is off."""
        return registry_url(self.state.config, self.schema_registry)

    @property
    def brokers(self) -> list[BrokerAddress]:
        return [BrokerAddress(n.node_id, n.host, n.port, n.config.broker_rack)
                for n in self._nodes.values()]

    @property
    def bootstrap_servers(self) -> str:
        """Every node's ``host:port`` on the first listener, comma-separated (clients need only
        one that is up)."""
        return ",".join(f"{n.host}:{n.port}" for n in self._nodes.values())

    def bootstrap_servers_for(self, listener: str) -> str:
        """Every node's ``host:port`` on the listener named ``listener``, comma-separated."""
        return ",".join("{}:{}".format(*n.endpoints[listener.upper()])
                        for n in self._nodes.values())

    def _node(self, node_id: int) -> _Node:
        self.model.node(node_id)  # the model's error for an unknown id
        return self._nodes[node_id]

    async def stop_broker(self, node_id: int) -> None:
        """Stop a broker: partitions it led fail over (unless ``auto_failover=False``), then its
        listener closes and its connections drop."""
        node = self._node(node_id)
        if not node.running:
            return
        led = self._led_by(node_id)
        self.model.stop_node(node_id)
        self._wake_fetches(led)
        await node.stop()
        LOGGER.info("broker %d stopped", node_id)

    async def start_broker(self, node_id: int) -> None:
        """Start a stopped broker again, on the same port."""
        node = self._node(node_id)
        if node.running:
            return
        await node.start(self._nursery, self.state)
        self.model.start_node(node_id)
        LOGGER.info("broker %d started on %s:%d", node_id, node.host, node.port)

    def move_leader(self, topic: str, partition: int, node_id: int) -> int:
        """Make ``node_id`` the partition's leader; returns the new leader epoch."""
        epoch = self.model.move_leader(topic, partition, node_id)
        self._wake_fetches([(topic, partition)])
        return epoch

    def inject(self, api: str | int, errors: Iterable[str | int] = (), *,
               node_id: int | None = None, disconnect: bool = False, count: int = 1) -> None:
        """The next requests of ``api`` answer with ``errors`` in order (or drop their
        connection, ``count`` times), on ``node_id`` or on any node."""
        if node_id is not None:
            self._node(node_id)
        self.faults.inject(api, errors, node_id=node_id, disconnect=disconnect,
                                 count=count)

    def set_latency(self, node_id: int, ms: float) -> None:
        """Delay every request to ``node_id`` by ``ms`` (0 removes the delay)."""
        self._node(node_id)
        self.faults.set_latency(node_id, ms)

    def clear_faults(self) -> None:
        """Forget injected errors, disconnects and latencies."""
        self.faults.clear()

    def requests(self) -> list[RequestRecord]:
        """What clients sent, oldest first (the last 10,000 requests)."""
        return self.faults.requests()

    def live(self, node_id: int) -> bool:
        """Whether broker ``node_id`` is running."""
        return self._node(node_id).running

    def node_metrics(self, node_id: int) -> BrokerMetrics:
        """The request metrics of one node (what its ``/metrics`` would show)."""
        return self._node(node_id).metrics

    def stop(self) -> None:
        """Ask the cluster to shut down and return."""
        self._stop.set()

    def _led_by(self, node_id: int) -> list[tuple[str, int]]:
        logs = self.state.logs
        return [(t, p) for t, n in logs.topics().items() for p in range(n)
                if self.model.partition(t, p).leader == node_id]

    def _wake_fetches(self, partitions: Iterable[tuple[str, int]]) -> None:
        # parked fetches of a partition whose leader moved answer now (NOT_LEADER_OR_FOLLOWER)
        for tp in partitions:
            self.state.fetch_purgatory.complete_all(tp)


def cluster_config(config: ConfigInput, brokers: int, overrides: dict[str, Any]) -> BrokerConfig:
    """The config the nodes of a cluster of ``brokers`` share (each then gets its node id)."""
    if brokers < 1:
        raise ConfigError(f"a cluster needs at least 1 broker, not {brokers}")
    cfg = as_config(config, kafka_kwargs(overrides))
    return DynamicBrokerConfigs.load(cfg).effective()


def cluster_racks(racks: str | Iterable[str | None] | None, brokers: int) -> list[str | None]:
    """Each node's ``broker.rack`` from ``racks`` (a list, or its text ``a,b,c``; an empty
    name: no rack), one per node; None: no node has a rack."""
    if racks is None:
        return [None] * brokers
    names = racks.split(",") if isinstance(racks, str) else list(racks)
    if len(names) != brokers:
        raise ConfigError(f"racks names {len(names)} racks for a cluster of {brokers} brokers: "
                          f"give one per broker")
    return [str(r).strip() or None if r is not None else None for r in names]


def _node_configs(cfg: BrokerConfig, brokers: int,
                  racks: list[str | None] | None = None) -> dict[int, BrokerConfig]:
    """Each node's config: its id, its rack (``racks[k]``, else the shared ``broker.rack``),
    and every client listener on that listener's port + k (0 stays 0); the controller's
    listeners are left out, as nothing here is a controller."""
    listeners = cfg.listener_list
    out = {}
    for k in range(brokers):
        ports = {x.name: (x.host, x.port + k if x.port else 0) for x in listeners}
        own: dict[str, Any] = {}
        if racks and racks[k] is not None:
            own["broker.rack"] = racks[k]
        out[k] = cfg.evolve(node_id=k, advertised_listeners="",
                            listeners=_listeners_value(cfg, ports), **own)
    return out


def _listeners_value(cfg: BrokerConfig, endpoints: dict[str, tuple[str, int]]) -> str:
    """``listeners`` binding each of ``cfg``'s client listeners at ``endpoints[name]``."""
    return ",".join(f"{x.name}://{_bracketed(endpoints[x.name][0])}:{endpoints[x.name][1]}"
                    for x in cfg.listener_list)


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def serve_cluster(config: ConfigInput = None, *, brokers: int = 3,
                        auto_failover: bool = True,
                        task_status: trio.TaskStatus[Cluster] = trio.TASK_STATUS_IGNORED,
                        **overrides: Any) -> None:
    """Run a cluster of ``brokers`` nodes until cancelled (or ``Cluster.stop()``); node k
    listens on each listener's port + k (or on its own free port when that is 0). The
    cluster-only setting ``racks`` (``["a", "b", "c"]`` or ``"a,b,c"``) gives node k the
    ``broker.rack`` ``racks[k]``."""
    started_at = time.perf_counter()
    settings: dict[str, Any] = kafka_kwargs(overrides)
    # one broker's config allows 1 only: the cluster's default lives in its model
    replication = int(settings.pop("default_replication_factor", min(3, brokers)))
    racks = cluster_racks(settings.pop("racks", None), brokers)
    cfg = cluster_config(config, brokers, settings)
    node_configs = _node_configs(cfg, brokers, racks)
    parts_scope = trio.CancelScope(shield=True)

    async def run_parts(*, task_status: trio.TaskStatus[Cluster] = trio.TASK_STATUS_IGNORED,
                        ) -> None:
        with parts_scope:
            async with trio.open_nursery() as nursery:
                logs, groups, producer_ids, transactions, cluster_id = await start_storage(
                    cfg, nursery)
                model = ClusterModel(
                    [Node(k, "", 0, rack=c.broker_rack)
                     for k, c in node_configs.items()], logs,
                    default_replication=replication,
                    offsets_partitions=cfg.value_of("offsets.topic.num.partitions"),
                    offsets_replication=cfg.value_of("offsets.topic.replication.factor"),
                    transaction_partitions=cfg.value_of("transaction.state.log.num.partitions"),
                    transaction_replication=cfg.value_of(
                        "transaction.state.log.replication.factor"),
                    auto_failover=auto_failover)
                model.intercepting = True
                state = BrokerState(config=cfg, metrics=BrokerMetrics(node_id=cfg.node_id),
                                    logs=logs, groups=groups, producer_ids=producer_ids,
                                    transactions=transactions,
                                    fetch_purgatory=Purgatory(nursery), advertised_host="",
                                    advertised_port=0, cluster=model,
                                    cleaner=log_cleaner(cfg, logs), cluster_id=cluster_id)
                faults = Faults()
                nodes = {k: _Node(k, c, faults) for k, c in node_configs.items()}
                for node in nodes.values():
                    await node.start(nursery, state)
                    model.nodes[node.node_id] = Node(node.node_id, node.host, node.port,
                                                     endpoints=dict(node.endpoints),
                                                     rack=node.config.broker_rack)
                start_log_duties(state, nursery)
                cluster = Cluster(state, nodes, faults, nursery)
                if cfg.schema_registry_listener:
                    cluster.schema_registry = await nursery.start(serve_schema_registry, cfg,
                                                                  state)
                if cfg.control_listener:
                    from .control import serve_control

                    cluster.control_address = await nursery.start(
                        functools.partial(serve_control, cfg.control_listener, cluster,
                                          token=cfg.control_listener_token or "",
                                          allowed_hosts=tuple(
                                              cfg.http_allowed_hosts.split(","))))
                task_status.started(cluster)
                try:
                    await cluster._stop.wait()
                finally:
                    with trio.CancelScope(shield=True):
                        await _shutdown(cluster, cfg)
                nursery.cancel_scope.cancel()

    async with trio.open_nursery() as root:
        cluster: Cluster = await root.start(run_parts)
        LOGGER.info("cluster of %d brokers started in %.0f ms (%s)", brokers,
                    (time.perf_counter() - started_at) * 1000, cluster.bootstrap_servers)
        task_status.started(cluster)
        try:
            await cluster._stop.wait()
        finally:
            cluster.stop()


async def _shutdown(cluster: Cluster, cfg: BrokerConfig) -> None:
    state = cluster.state
    state.fetch_purgatory.complete_all()
    state.groups.begin_shutdown()
    for node in cluster._nodes.values():
        await node.stop()
    for close in (state.groups.close, state.transactions.close):
        try:
            close()
        except Exception:
            LOGGER.exception("closing %r failed", close)
    try:
        await run_io(state.logs.close)
    except Exception:
        LOGGER.exception("closing the logs failed")


@contextlib.asynccontextmanager
async def open_cluster(brokers: int = 3, *, auto_failover: bool = True,
                       **overrides: Any) -> AsyncIterator[Cluster]:
    """``async with open_cluster(3) as cluster:``: a cluster on free loopback ports, its data in
    a temporary directory unless ``log_dirs`` is given, topics replicated on up to 3 nodes."""
    settings: dict[str, Any] = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        **kafka_kwargs(overrides)}
    with contextlib.ExitStack() as stack:
        if "log_dirs" not in settings:
            settings["log_dirs"] = stack.enter_context(
                tempfile.TemporaryDirectory(prefix="trio-broker-cluster-"))
        async with trio.open_nursery() as nursery:
            cluster: Cluster = await nursery.start(
                lambda task_status: serve_cluster(None, brokers=brokers,
                                                  auto_failover=auto_failover,
                                                  task_status=task_status, **settings))
            try:
                yield cluster
            finally:
                cluster.stop()
