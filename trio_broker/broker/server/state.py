"""The broker's parts, as the API handlers see them (``ctx.broker``).

Why one object, built once: handlers need the config, the logs, the group coordinator, the
producer id allocator, the transaction coordinator, the fetch purgatory and the advertised
address. ``serve`` builds this state after storage is loaded, the coordinators run and the
listeners are bound, so every part is present and typed for the broker's whole life: a handler
never checks for a missing part, and mypy follows a request from its handler into the log (the
share coordinator, behind ``shares``, is made at its first use).
``standalone_state`` builds one over real storage without sockets, for driving handlers directly
(tests, tools).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

import attrs
import trio

from ..config import BrokerConfig
from ..config.dynamic import DynamicBrokerConfigs
from ..coordinator import GroupCoordinator
from ..coordinator.group_configs import GROUP_CONFIGS_FILE, GroupConfigs
from ..coordinator.internal_topics import InternalTopics
from ..coordinator.transactions import TransactionCoordinator
from ..metrics import BrokerMetrics
from ..offload import mock_clock
from ..security.acl_store import AclStore, authorizer_from_config
from ..security.client_quotas import QUOTA_FILE, ClientQuotas
from ..storage import LogManager, ProducerIdManager, log_config_from
from ..storage.cleaner_manager import LogCleaner
from ..storage.meta_properties import ensure_meta_properties
from .client_metrics import CLIENT_METRICS_FILE, ClientMetricsStore
from .cluster_model import ClusterModel, Node
from .purgatory import Purgatory
from .telemetry_state import TelemetryState

if TYPE_CHECKING:
    from ..coordinator.share import ShareCoordinator


class TopicChange(NamedTuple):
    """A topic was created, grown or deleted: its partition count before and after."""

    topic: str
    #: partitions before the change (0 for a new topic)
    previous_partitions: int
    #: partitions after the change (0 once deleted)
    partitions: int


@attrs.define
class Attached:
    """Services of the layers above the state, set while they run (typed ``Any``: their
    types live above this layer)."""

    #: the Schema Registry (``schema_registry.registry.SchemaRegistry``) while
    #: ``schema.registry.listener`` serves it: the console's pages and message browser read it
    schema_registry: Any = None


class ShareCoordinatorHolder:
    """The share coordinator, made at its first use (a share request, ListGroups or
    DeleteGroups, a scrape, the console's page): ``coordinator.share`` is imported then, so a
    start does not pay for it. A test cluster's nodes share their base state's holder (as
    ``attrs.evolve`` shares every part), so they share one coordinator. A plain class: attrs'
    generated methods would cost every start more than the class does."""

    __slots__ = ("_coordinator", "make")

    def __init__(self, make: Callable[[], ShareCoordinator]) -> None:
        self.make = make
        self._coordinator: ShareCoordinator | None = None

    def get(self) -> ShareCoordinator:
        if self._coordinator is None:
            self._coordinator = self.make()
        return self._coordinator


@attrs.frozen(eq=False, kw_only=True)
class BrokerState:
    config: BrokerConfig
    metrics: BrokerMetrics
    #: every partition log of the broker (Kafka's ``LogManager`` / ``ReplicaManager`` role)
    logs: LogManager
    #: consumer groups and committed offsets
    groups: GroupCoordinator
    #: allocator of idempotent producer ids
    producer_ids: ProducerIdManager
    #: transactional ids and their transactions (``serve`` runs it)
    transactions: TransactionCoordinator
    #: parked fetches (long-poll), keyed by (topic, partition)
    fetch_purgatory: Purgatory
    #: (host, port) of the first listener, as advertised (``Broker.bootstrap_servers``)
    advertised_host: str
    advertised_port: int
    #: listener name -> the (host, port) that Metadata, FindCoordinator, DescribeCluster and
    #: the leader hints name this broker by to a client connected to that listener (Kafka
    #: answers per listener); empty: (advertised_host, advertised_port) on any listener
    endpoints: dict[str, tuple[str, int]] = attrs.field(factory=dict)
    #: client instances that asked for a telemetry subscription (KIP-714)
    telemetry: TelemetryState = attrs.field(factory=TelemetryState)
    #: client-metrics subscriptions (CLIENT_METRICS config resources), persisted in the first
    #: log dir
    client_metrics: ClientMetricsStore = attrs.field(default=attrs.Factory(
        lambda self: ClientMetricsStore(self.config.log_dir_list[0] / CLIENT_METRICS_FILE),
        takes_self=True))
    #: the log cleaner (``serve`` runs its threads); None where no cleaner runs
    cleaner: LogCleaner | None = None
    #: dynamic broker configs (AlterConfigs on a broker), persisted in the first log dir
    dynamic_configs: DynamicBrokerConfigs = attrs.field(default=attrs.Factory(
        lambda self: DynamicBrokerConfigs.load(self.config), takes_self=True))
    #: the cluster this node answers for (``cluster_model.py``): one node unless a test cluster
    #: built it with more
    cluster: ClusterModel = attrs.field(default=attrs.Factory(
        lambda self: ClusterModel([Node(self.config.node_id, self.advertised_host,
                                        self.advertised_port, endpoints=dict(self.endpoints),
                                        rack=self.config.broker_rack)],
                                  self.logs), takes_self=True))
    #: the HTTP services beside the broker, once started: name -> base URL (the console
    #: links to them)
    services: dict[str, str] = attrs.field(factory=dict)
    #: ASGI applications the console's listener serves under a path prefix (``/kafka``: the
    #: REST proxy with ``kafka.rest.enable``; ``/schema-registry``: the Schema Registry with
    #: ``schema.registry.enable``), added by the services as they start
    http_mounts: dict[str, Any] = attrs.field(factory=dict)
    #: the parts of the layers above that other parts read in process, as they start
    attached: Attached = attrs.field(factory=lambda: Attached())
    #: the cluster id, as stamped in the log dirs' meta.properties (``start_storage``)
    cluster_id: str = attrs.field(default=attrs.Factory(lambda self: self.config.cluster_id,
                                                        takes_self=True))
    #: ACLs and Kafka's decisions over them; None without ``authorizer.class.name``
    authorizer: AclStore | None = attrs.field(default=attrs.Factory(
        lambda self: authorizer_from_config(self.config.log_dir_list[0],
                                            self.config.authorizer_class_name,
                                            self.config.super_users,
                                            self.config.allow_everyone_if_no_acl_found),
        takes_self=True))
    #: client quotas (AlterClientQuotas), persisted in the first log dir, and their sensors
    quotas: ClientQuotas = attrs.field(default=attrs.Factory(
        lambda self: ClientQuotas(self.config.log_dir_list[0] / QUOTA_FILE,
                                  samples=self.config.quota_window_num,
                                  window_s=self.config.quota_window_size_seconds),
        takes_self=True))
    #: each group's own configs (the GROUP config resource), persisted in the first log dir
    group_configs: GroupConfigs = attrs.field(default=attrs.Factory(
        lambda self: _group_configs(self.config), takes_self=True))
    #: share groups (KIP-932), their share-partitions and share sessions: ``shares``
    share_coordinator: ShareCoordinatorHolder = attrs.field(default=attrs.Factory(
        lambda self: ShareCoordinatorHolder(partial(_share_coordinator, self.config, self.logs,
                                                    self.group_configs)), takes_self=True))
    #: parts below the handlers that take a new effective config at once (AlterConfigs on a
    #: broker): the connection quotas
    reconfigurables: list[Callable[[BrokerConfig], None]] = attrs.field(factory=list)
    #: ``__consumer_offsets`` and ``__transaction_state`` (made from the logs below)
    internal_topics: InternalTopics = attrs.field(init=False, default=attrs.Factory(
        lambda self: InternalTopics(self.config, self.logs, on_append=self._internal_appended),
        takes_self=True))

    def __attrs_post_init__(self) -> None:
        # Consumer groups (KIP-848) assign partitions by topic id and resolve regexes over
        # the topic names: they read both from the logs.
        self.groups.attach_topics(partial(topics_by_id, self.logs))
        self.groups.attach_group_configs(self.group_configs.get)
        # what the coordinators make durable, Kafka's records of it in the internal topics
        self.groups.attach_internal_topics(self.internal_topics)
        self.transactions.internal_topics = self.internal_topics

        self.transactions.on_markers = self._markers_written

    def _internal_appended(self, topic: str, partition: int, size: int) -> None:
        self.fetch_purgatory.notify((topic, partition), size)

    def _markers_written(self, partitions: Iterable[tuple[str, int]]) -> None:
        # a marker moves the last stable offset: read_committed fetches parked there wake up
        for tp in partitions:
            self.fetch_purgatory.complete_all(tp)

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def shares(self) -> ShareCoordinator:
        """The share coordinator (made at the first call)."""
        return self.share_coordinator.get()

    def advertised(self, listener: str) -> tuple[str, int]:
        """(host, port) this broker is named by to a client connected to ``listener``."""
        return self.endpoints.get(listener, (self.advertised_host, self.advertised_port))

    @staticmethod
    def now_ms() -> int:
        """Wall-clock milliseconds, for record timestamps and retention; under a test's
        ``trio.testing.MockClock`` ahead by that clock's time, so retention by time follows the
        test's virtual time as the broker's timers do."""
        clock = mock_clock()
        return time.time_ns() // 1_000_000 + (0 if clock is None
                                              else int(clock.current_time() * 1000))

    def topics_changed(self, change: TopicChange) -> None:
        """React to a topic change made by an admin API or by auto-creation.

        Parked fetches of partitions that no longer exist are completed now (Kafka's
        ``DelayedFetch`` completes when a partition it waits on disappears); they answer with
        what they can read, which for a deleted partition is UNKNOWN_TOPIC_OR_PARTITION.
        """
        for partition in range(change.partitions, change.previous_partitions):
            self.fetch_purgatory.complete_all((change.topic, partition))
        self.groups.topics_changed(change.topic, change.previous_partitions, change.partitions)
        self.cluster.topic_changed(change.topic, change.partitions)


def topics_by_id(logs: LogManager) -> dict[str, tuple[uuid.UUID, int]]:
    """{topic: (its id, its partition count)} of the topics that have an id: what consumer and
    share groups assign by."""
    ids = logs.topic_ids()
    return {name: (ids[name], n) for name, n in logs.topics().items() if name in ids}


def _group_configs(config: BrokerConfig) -> GroupConfigs:
    return GroupConfigs(config.log_dir_list[0] / GROUP_CONFIGS_FILE, bounds={
        "consumer.session.timeout.ms": (config.group_consumer_min_session_timeout_ms,
                                        config.group_consumer_max_session_timeout_ms),
        "consumer.heartbeat.interval.ms": (config.group_consumer_min_heartbeat_interval_ms,
                                           config.group_consumer_max_heartbeat_interval_ms)})


def _share_coordinator(config: BrokerConfig, logs: LogManager, group_configs: GroupConfigs,
                       ) -> ShareCoordinator:
    # imported at the first use of share groups: the start does not pay for them
    from ..coordinator.share import ShareConfig, ShareCoordinator
    from ..coordinator.share.store import SHARE_STATE_DIR_NAME, ShareStateStore

    def offsets(topic_id: uuid.UUID, partition: int) -> tuple[int, int] | None:
        name = logs.topic_name(topic_id)
        log = None if name is None else logs.get_log(name, partition)
        return None if log is None else (log.log_start_offset, log.high_watermark)

    return ShareCoordinator(partial(topics_by_id, logs), offsets, ShareConfig(
        record_lock_duration_ms=config.group_share_record_lock_duration_ms,
        delivery_count_limit=config.group_share_delivery_count_limit,
        session_timeout_ms=config.group_share_session_timeout_ms,
        heartbeat_interval_ms=config.group_share_heartbeat_interval_ms,
        max_size=config.group_share_max_size,
        partition_max_record_locks=config.group_share_partition_max_record_locks),
        store=ShareStateStore(config.log_dir_list[0] / SHARE_STATE_DIR_NAME),
        group_configs=group_configs)


def standalone_state(config: BrokerConfig, *, groups: GroupCoordinator, nursery: trio.Nursery,
                     metrics: BrokerMetrics | None = None, advertised_host: str = "127.0.0.1",
                     advertised_port: int = 9092) -> BrokerState:
    """A broker state without sockets over real storage under ``config.log_dirs``.

    Loads the logs in this thread (creating the directories), uses ``groups`` as the coordinator
    (the caller runs it) and parks fetches in ``nursery``. ``serve`` builds its own state, part by
    part, in ``broker.py``.
    """
    for log_dir in config.log_dir_list:
        log_dir.mkdir(parents=True, exist_ok=True)
    cluster_id = ensure_meta_properties(config.log_dir_list, config.node_id, config.cluster_id)
    logs = LogManager(config.log_dir_list, log_config_from(config),
                      producer_id_expiration_ms=config.producer_id_expiration_ms)
    logs.load()
    producer_ids = ProducerIdManager(config.log_dir_list[0])
    transactions = TransactionCoordinator(config, config.log_dir_list[0], logs=logs,
                                          groups=groups, producer_ids=producer_ids)
    return BrokerState(config=config, metrics=metrics or BrokerMetrics(), logs=logs,
                       groups=groups, producer_ids=producer_ids, transactions=transactions,
                       fetch_purgatory=Purgatory(nursery), advertised_host=advertised_host,
                       advertised_port=advertised_port, cluster_id=cluster_id)
