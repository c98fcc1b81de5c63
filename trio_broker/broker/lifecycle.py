"""The broker's lifecycle: start every part in one nursery, stop them in Kafka's order.

Why this shape: ``serve`` is a Trio task in the style of ``trio.serve_tcp``: it binds, reports
what it bound through ``task_status.started(broker)``, and runs until cancelled, so an app embeds
it with ``await nursery.start(trio_broker.serve, config)`` and a test binds port 0 and connects to
the returned address. The parts run inside a shielded scope so that cancelling the caller's
nursery starts a *graceful* shutdown (stop accepting, finish in-flight requests within
``shutdown.timeout.ms``, flush logs, close sockets) instead of tearing everything down mid-write.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio
import trio.lowlevel

from .config import BrokerConfig, ConfigError, build_config, parse_http_listener
from .config.broker import normalise
from .config.dynamic import DynamicBrokerConfigs
from .config.keys import NO_EFFECT, no_effect_broker_keys
from .config.listeners import http_url
from .coordinator import GroupCoordinator
from .coordinator.transactions import TransactionCoordinator
from .metrics import RUNNING, SHUTTING_DOWN, BrokerMetrics
from .metrics.collectors.cleaner import cleaner_metrics
from .metrics.collectors.state import register as register_state_metrics
from .network.request_handler import RequestHandlerPool
from .network.socket_server import SocketServer
from .offload import run_io
from .security.client_quotas import CONNECTION_CREATION_RATE
from .server.purgatory import Purgatory
from .server.state import BrokerState
from .storage import Log, LogManager, ProducerIdManager, log_config_from
from .storage.cleaner import CleanerStats
from .storage.cleaner_manager import LogCleaner, cleaner_settings
from .storage.meta_properties import META_PROPERTIES_NAME, plan_meta_properties, write_stamps

if TYPE_CHECKING:
    from .schema_registry.registry import SchemaRegistry

LOGGER = logging.getLogger(__name__)


@attrs.define(eq=False)
class Broker:
    """A running broker: its bound addresses, state and a way to stop it."""

    config: BrokerConfig
    state: BrokerState
    #: (listener name, host, port) actually bound, in listener order
    listeners: list[tuple[str, str, int]]
    metrics_address: tuple[str, int] | None = None
    #: the web console's bound (host, port), when ``http.listener`` is set and it is on
    http_address: tuple[str, int] | None = None
    #: the Schema Registry's bound (host, port) and registry, when ``schema.registry.listener``
    #: is set
    schema_registry: tuple[str, int, SchemaRegistry] | None = None
    #: the REST proxy's bound (host, port), when ``rest.proxy.listener`` is set
    rest_proxy_address: tuple[str, int] | None = None
    _stop: trio.Event = attrs.field(factory=trio.Event)
    #: the log cleaner (compacts ``cleanup.policy=compact`` topics)
    cleaner: LogCleaner | None = None

    @property
    def host(self) -> str:
        """The first listener's advertised host (``advertised_endpoint`` for the others)."""
        return self.state.advertised_host

    @property
    def port(self) -> int:
        """The first listener's advertised port."""
        return self.state.advertised_port

    @property
    def schema_registry_url(self) -> str | None:
        """``http(s)://host:port`` of the Schema Registry, or None when it is off."""
        if self.schema_registry is None:
            return None
        from .schema_registry import registry_url  # the registry is served: already imported

        return registry_url(self.config, self.schema_registry)

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` for clients (the advertised address of the first listener)."""
        return f"{self.host}:{self.port}"

    def advertised_endpoint(self, listener: str) -> tuple[str, int]:
        """(host, port) advertised on the listener named ``listener``, e.g. ``SASL_PLAINTEXT``."""
        return self.state.endpoints[listener.upper()]

    def stop(self) -> None:
        """Ask ``serve`` to shut down gracefully and return."""
        self._stop.set()

    async def compact(self, topic: str) -> CleanerStats:
        """Compact every partition of ``topic`` now, whatever its dirty ratio (what the cleaner
        threads would do once due), in a worker thread; for tests that must not sleep."""
        assert self.cleaner is not None
        logs = self.state.logs
        targets = [(log, d) for log in logs.all_logs() if log.topic == topic
                   and (d := logs.log_dir_of(log.topic, log.partition)) is not None]
        return await run_io(self.cleaner.compact, targets, self.state.now_ms())


ConfigInput = BrokerConfig | Mapping[str, object] | None


def as_config(config: ConfigInput, overrides: Mapping[str, object]) -> BrokerConfig:
    if config is None:
        # the overrides validated once, onto the defaults: what ``BrokerConfig().evolve`` gives,
        # without building and validating the defaults first
        changed = normalise(overrides, "override")
        return build_config(changed, dict.fromkeys(changed, "override"))
    cfg = config if isinstance(config, BrokerConfig) else BrokerConfig().evolve(**config)
    return cfg.evolve(**overrides) if overrides else cfg


async def serve(config: ConfigInput = None, *,
                task_status: trio.TaskStatus[Broker] = trio.TASK_STATUS_IGNORED,
                **overrides: object) -> None:
    """Run a broker until cancelled (or ``Broker.stop()``); ``task_status.started(Broker)``."""
    started_at = time.perf_counter()
    static = as_config(config, overrides)
    # Dynamic broker configs (AlterConfigs, persisted) win over the static ones, as in Kafka.
    dynamic = DynamicBrokerConfigs.load(static)
    cfg = dynamic.effective()
    no_effect = no_effect_broker_keys(cfg.originals)
    if no_effect:
        LOGGER.info("%s: %s", NO_EFFECT, ", ".join(no_effect))
    metrics = BrokerMetrics(node_id=cfg.node_id)
    server = SocketServer(cfg, metrics)
    parts_scope = trio.CancelScope(shield=True)

    async def run_parts(*, task_status: trio.TaskStatus[Broker] = trio.TASK_STATUS_IGNORED,
                        ) -> None:
        with parts_scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(metrics.loop_stalls.run)
                with _names_key(cfg, "log.dirs"):
                    logs, coordinator, producer_ids, transactions, cluster_id = (
                        await start_storage(cfg, nursery))
                with _names_key(cfg, "listeners"):
                    bound = await server.start(nursery)
                endpoints = advertised_endpoints(cfg, bound)
                host, port = next(iter(endpoints.values()))
                # Every part exists from here on: the one place the handlers' state is built.
                state = BrokerState(
                    config=cfg, metrics=metrics, logs=logs, groups=coordinator,
                    producer_ids=producer_ids, transactions=transactions,
                    fetch_purgatory=Purgatory(nursery), advertised_host=host,
                    advertised_port=port, endpoints=endpoints, dynamic_configs=dynamic,
                    cleaner=log_cleaner(cfg, logs), cluster_id=cluster_id)
                register_state_metrics(state)
                _apply_connection_quotas(server, state)
                server.disconnected.append(
                    lambda cid: state.telemetry.connection_closed(cid, state.now_ms()))
                pool = RequestHandlerPool(state, server.request_channel, cfg.num_io_threads)
                pool.start(nursery)
                metrics_addr = None
                if cfg.metrics_listener:
                    from .network.metrics_http import serve_metrics  # only when configured

                    with _names_key(cfg, "metrics.listener"):
                        metrics_addr = await nursery.start(partial(
                            serve_metrics, cfg.metrics_listener, metrics,
                            allowed_hosts=tuple(h for h in cfg.http_allowed_hosts.split(",")
                                                if h)))
                http_addr, registry, rest_addr = await _start_http_faces(cfg, state, bound,
                                                                         nursery)
                cleaner = start_log_duties(state, nursery)
                metrics.add_collector(lambda: cleaner_metrics(cleaner))
                task_status.started(Broker(cfg, state, bound, metrics_addr, http_addr,
                                           cleaner=cleaner, schema_registry=registry,
                                           rest_proxy_address=rest_addr))
                await trio.sleep_forever()

    instrument = metrics.io_wait_instrument()  # the network loop's idle time
    trio.lowlevel.add_instrument(instrument)
    try:
        async with trio.open_nursery() as root:
            # Shielded: a start cancelled (Ctrl-C) half-way would still hand its running parts
            # to ``root`` and leave them there, shielded, forever; finished, it is cancelled at
            # the first wait below and shuts down like any running broker.
            with trio.CancelScope(shield=True):
                broker: Broker = await root.start(run_parts)
            metrics.broker_state = RUNNING
            metrics.readiness = lambda: _readiness(broker)
            for name, host, port in broker.listeners:
                LOGGER.info("listening on %s://%s:%d (advertised %s:%d)", name, host, port,
                            *broker.state.endpoints[name])
            LOGGER.info("broker %d started in %.0f ms", cfg.node_id,
                        (time.perf_counter() - started_at) * 1000)
            task_status.started(broker)
            try:
                await broker._stop.wait()
            finally:
                metrics.broker_state = SHUTTING_DOWN
                with trio.CancelScope(shield=True):
                    await _shutdown(broker.state, server, cfg)
                parts_scope.cancel()
    finally:
        trio.lowlevel.remove_instrument(instrument)


async def _start_http_faces(cfg: BrokerConfig, state: BrokerState,
                            bound: list[tuple[str, str, int]], nursery: trio.Nursery,
                            ) -> tuple[tuple[str, int] | None, tuple[str, int, SchemaRegistry]
                                       | None, tuple[str, int] | None]:
    """Start the web console, the Schema Registry and the REST proxy that are configured;
    their bound (host, port) (the registry's with the registry), None for each one off.

    Each face's module is imported when a key of its own is set: the plain start does not
    pay for them (nor for their web stack, which each imports when it serves)."""
    http_addr: tuple[str, int] | None = None
    registry: tuple[str, int, SchemaRegistry] | None = None
    rest_addr: tuple[str, int] | None = None
    if cfg.http_listener:
        from .http import serve_http

        with _names_key(cfg, "http.listener"):
            http_addr = await nursery.start(serve_http, cfg, state, bound)
    if cfg.schema_registry_listener or cfg.schema_registry_enable:
        from .schema_registry import MOUNT_PREFIX, registry_url, serve_schema_registry

        with _names_key(cfg, "schema.registry.listener"):
            registry = await nursery.start(serve_schema_registry, cfg, state)
        if registry is not None:
            state.services["Schema Registry"] = registry_url(cfg, registry) or ""
        elif http_addr is not None and MOUNT_PREFIX in state.http_mounts:
            scheme = parse_http_listener(cfg.http_listener)[0]
            state.services["Schema Registry"] = http_url(scheme, *http_addr) + MOUNT_PREFIX
    if cfg.rest_proxy_listener or cfg.kafka_rest_enable:
        from .rest_proxy import serve_rest_proxy

        with _names_key(cfg, "rest.proxy.listener"):
            rest_addr = await nursery.start(partial(
                serve_rest_proxy, cfg, state, registry=state.attached.schema_registry))
        if rest_addr is not None:
            scheme = parse_http_listener(cfg.rest_proxy_listener, "rest.proxy.listener")[0]
            state.services["REST Proxy"] = http_url(scheme, *rest_addr)
        elif http_addr is not None and "/kafka" in state.http_mounts:
            scheme = parse_http_listener(cfg.http_listener)[0]
            state.services["REST Proxy"] = http_url(scheme, *http_addr) + "/kafka"
    return http_addr, registry, rest_addr


def _apply_connection_quotas(server: SocketServer, state: BrokerState) -> None:
    """The creation rates from the config (and from AlterConfigs at once), an address's from
    its ``connection_creation_rate`` client quota (read at each connection)."""
    quotas = server.quotas
    quotas.reconfigure(state.config)
    state.reconfigurables.append(quotas.reconfigure)
    quotas.ip_rate = lambda ip: state.quotas.ip_quota(CONNECTION_CREATION_RATE, ip)


def _readiness(broker: Broker) -> tuple[bool, str]:
    """``/ready``: serving, or why not (the group coordinator still loading, shutting down)."""
    if broker._stop.is_set():
        return False, "shutting down"
    if not broker.state.groups.loaded:
        return False, "loading consumer group offsets"
    return True, "ready"


@contextlib.contextmanager
def _names_key(cfg: BrokerConfig, key: str) -> Iterator[None]:
    """An OSError while starting the part ``key`` configures says which key, which value and
    where it was set: ``listeners=PLAINTEXT://127.0.0.1:9092 (--override): Address already in
    use``, instead of the bare ``[Errno 98]``."""
    try:
        yield
    except OSError as exc:
        value = cfg.originals.get(key)
        if value is None:
            value = str(getattr(cfg, key.replace(".", "_"), ""))
        where = cfg.origins.get(key, "the default")
        error = OSError(f"{key}={value} ({where}): {exc.strerror or exc}")
        error.errno = exc.errno
        raise error from exc


async def _shutdown(state: BrokerState, server: SocketServer, cfg: BrokerConfig) -> None:
    LOGGER.info("shutting down: stop accepting, finish in-flight requests")
    state.fetch_purgatory.complete_all()  # parked fetches answer now with what they have
    state.groups.begin_shutdown()  # held joins and syncs answer now
    await server.stop(cfg.shutdown_timeout_ms / 1000)
    try:
        state.groups.close()
    except Exception:
        LOGGER.exception("closing the group coordinator failed")
    try:
        state.transactions.close()
    except Exception:
        LOGGER.exception("closing the transaction coordinator failed")
    try:
        await run_io(state.logs.close)
    except Exception:
        LOGGER.exception("closing the logs failed")
    LOGGER.info("shutdown complete")


async def _retention_loop(state: BrokerState) -> None:
    """Kafka's log retention task: every log.retention.check.interval.ms, off the loop."""
    interval = state.config.log_retention_check_interval_ms / 1000
    logs = state.logs
    while True:
        await trio.sleep(interval)
        try:
            deleted = await run_io(logs.run_retention, state.now_ms())
        except Exception:
            LOGGER.exception("log retention pass failed")
            continue
        if deleted:
            LOGGER.info("retention deleted %d segment(s)", deleted)


#: the logs, the coordinators over them, and the cluster id the log dirs are stamped with
Storage = tuple[LogManager, GroupCoordinator, ProducerIdManager, TransactionCoordinator, str]


async def start_storage(cfg: BrokerConfig, nursery: trio.Nursery) -> Storage:
    """Load the logs, then start the group and transaction coordinators on them (what one
    broker and a test cluster's shared storage both are)."""
    # first: the constructors below read files in the first log dir, and an OSError here
    # names the log dir itself (a path through a file, a directory that cannot be made)
    log_dirs = cfg.log_dir_list
    for d in log_dirs:
        d.mkdir(parents=True, exist_ok=True)
    cluster_id, stamps = plan_meta_properties(log_dirs, cfg.node_id, cfg.cluster_id)
    if stamps:
        # a new dir's stamp is made durable (two fsyncs) in a worker thread while the broker
        # starts: nothing reads it before the next start, and a crash before it lands leaves
        # no stamp, so that start stamps the dir again
        nursery.start_soon(run_io, write_stamps, stamps)
    logs = LogManager(log_dirs, log_config_from(cfg),
                      producer_id_expiration_ms=cfg.producer_id_expiration_ms)
    groups = GroupCoordinator(cfg, log_dirs[0])
    producer_ids = ProducerIdManager(log_dirs[0])
    transactions = TransactionCoordinator(cfg, log_dirs[0], logs=logs, groups=groups,
                                          producer_ids=producer_ids)
    if all(_is_empty(d) for d in log_dirs):
        # nothing to read (a few stat calls, nothing written: the coordinators make their files
        # on first use), so no hand-off to a worker thread and back
        _open_storage_on_loop(logs, groups, transactions)
        # and no group or transaction to restore: both are loaded at their first step, which
        # comes before anything can be asked (the listener's bind is a checkpoint), without
        # the two passes of the event loop each ``nursery.start`` costs
        nursery.start_soon(groups.run)
        nursery.start_soon(transactions.run)
        return logs, groups, producer_ids, transactions, cluster_id
    await run_io(_open_storage, logs, groups, transactions)
    await transactions.load()
    await nursery.start(groups.run)
    # after the logs and the groups: it finishes prepared transactions in both
    await nursery.start(transactions.run)
    return logs, groups, producer_ids, transactions, cluster_id


def _is_empty(log_dir: Path) -> bool:
    """A log dir that holds nothing but its stamp (one that cannot be listed is left to the log
    manager, which takes it offline)."""
    try:
        with os.scandir(log_dir) as entries:
            return all(e.name == META_PROPERTIES_NAME for e in entries)
    except OSError:
        return False


@trio.lowlevel.enable_ki_protection
def _open_storage_on_loop(logs: LogManager, groups: GroupCoordinator,
                          transactions: TransactionCoordinator) -> None:
    """``_open_storage`` on the loop, a Ctrl-C deferred to the next checkpoint: the start
    finishes what it began, as when the files are opened in the thread."""
    _open_storage(logs, groups, transactions)


def _open_storage(logs: LogManager, groups: GroupCoordinator,
                  transactions: TransactionCoordinator) -> None:
    """Every file the start reads, in one worker thread (each hand-off to a thread and back
    costs the start a pass of the event loop): every partition log (recovery included), the
    transaction log and the group coordinator's two files."""
    logs.load()
    transactions.read_log()
    groups.read_files()


def start_log_duties(state: BrokerState, nursery: trio.Nursery) -> LogCleaner:
    """Retention, the flush policy and (when enabled) the log cleaner's threads, over the
    state's logs; returns the cleaner."""
    cleaner = state.cleaner
    assert cleaner is not None
    nursery.start_soon(_retention_loop, state)
    nursery.start_soon(_flush_loop, state)
    if state.config.value_of("log.cleaner.enable"):
        nursery.start_soon(_cleaner_threads, state, cleaner)
    return cleaner


def log_cleaner(cfg: BrokerConfig, logs: LogManager) -> LogCleaner:
    def with_dirs() -> list[tuple[Log, Path]]:
        return [(log, d) for log in logs.all_logs()
                if (d := logs.log_dir_of(log.topic, log.partition)) is not None]

    return LogCleaner(with_dirs, **cleaner_settings(cfg.value_of))


async def _cleaner_threads(state: BrokerState, cleaner: LogCleaner) -> None:
    """Keep ``cleaner.threads`` cleaner tasks running: ``log.cleaner.threads`` is a dynamic
    config (Kafka restarts its cleaner threads on a change); a task stopped by a lower count
    finishes the cleaning it is in first (a worker thread is never abandoned)."""
    async with trio.open_nursery() as nursery:
        scopes: list[trio.CancelScope] = []
        while True:
            while len(scopes) < cleaner.threads:
                scopes.append(await nursery.start(_cleaner_loop, state, cleaner))
            while len(scopes) > cleaner.threads:
                scopes.pop().cancel()
            await trio.sleep(0.5)


async def _cleaner_loop(state: BrokerState, cleaner: LogCleaner, *,
                        task_status: trio.TaskStatus[trio.CancelScope] = trio.TASK_STATUS_IGNORED
                        ) -> None:
    """One of Kafka's log cleaner threads: clean the dirtiest due log, off the event loop, or
    wait log.cleaner.backoff.ms when none is due."""
    with trio.CancelScope() as scope:
        task_status.started(scope)
        cleaner.running_threads += 1
        try:
            while True:
                try:
                    # no log, nothing to clean: no worker thread (a new broker's first pass)
                    stats = (await run_io(cleaner.clean_once, state.now_ms())
                             if state.logs.all_logs() else None)
                except Exception:
                    LOGGER.exception("log cleaning failed")
                    stats = None
                if stats is None:
                    await trio.sleep(cleaner.backoff_ms / 1000)
                else:
                    await trio.lowlevel.checkpoint()
        finally:
            cleaner.running_threads -= 1


async def _flush_loop(state: BrokerState) -> None:
    """Kafka's log flusher: flush.ms-due partitions and recovery-point checkpoints."""
    interval = state.config.log_flush_scheduler_interval_ms / 1000
    checkpoint_every = max(1, round(60 / interval))
    logs = state.logs
    ticks = 0
    while True:
        await trio.sleep(interval)
        ticks += 1
        try:
            if logs.logs_needing_flush():
                await run_io(logs.flush_dirty)
            if ticks % checkpoint_every == 0:
                await run_io(logs.checkpoint_recovery_points)
        except Exception:
            LOGGER.exception("log flush pass failed")


def advertised_endpoints(cfg: BrokerConfig, bound: list[tuple[str, str, int]],
                         ) -> dict[str, tuple[str, int]]:
    """Listener name -> the (host, port) that answers naming this broker give a client connected
    to that listener, in listener order. As in Kafka, ``advertised.listeners`` defaults to
    ``listeners`` per listener name: a listener's advertised entry of its own name, else the
    address it is bound to; a port 0 is the port bound (Kafka's ephemeral port correction)."""
    advertised = {lst.name: lst for lst in cfg.advertised_listener_list}
    out: dict[str, tuple[str, int]] = {}
    for name, host, port in bound:
        if name in out:  # an empty host binds one socket per address family
            continue
        entry = advertised.get(name)
        if entry is not None:
            out[name] = (entry.host, entry.port or port)
        elif host in ("0.0.0.0", "::"):
            raise ConfigError(f"listeners binds {name}://{host}, which clients cannot connect "
                              f"to: set advertised.listeners for {name}")
        else:
            out[name] = (host, port)
    return out


@contextlib.asynccontextmanager
async def open_broker(config: ConfigInput = None, **overrides: object) -> AsyncIterator[Broker]:
    """``async with open_broker(log_dirs=..., listeners="PLAINTEXT://127.0.0.1:0") as b:``.

    Defaults differ from ``serve`` in one way: the listener binds port 0 unless given.
    """
    if config is None and "listeners" not in overrides:
        overrides = {"listeners": "PLAINTEXT://127.0.0.1:0", **overrides}
    async with trio.open_nursery() as nursery:
        cfg = as_config(config, kafka_kwargs(overrides))
        broker: Broker = await nursery.start(serve, cfg)
        try:
            yield broker
        finally:
            broker.stop()


def kafka_kwargs(overrides: Mapping[str, object]) -> dict[str, object]:
    # Kafka dotted names are accepted too: {"log.dirs": ...} -> log_dirs
    return {k.replace(".", "_"): v for k, v in overrides.items()}
