"""Connections to a cluster found through its bootstrap servers: metadata, leaders, retries.

Why leader routing and retries here: the tools and the Spark source talk to any Kafka-protocol
cluster, ours (one broker or an in-process cluster) or Kafka, so Produce, ListOffsets and Fetch
go to each partition's leader as Metadata names it, admin calls to the controller, group calls
to the group's coordinator; a leadership error or a lost connection refreshes the metadata and
retries, ``retries`` times, with Kafka's exponential backoff from ``retry.backoff.ms``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..core.backoff import ExponentialBackoff
from ..core.bootstrap import BrokerAddress, parse_bootstrap
from ..core.errors import (
    ConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    error_for,
    error_name,
)
from ..core.groups import find_coordinator_request, parse_find_coordinator
from ..core.metadata import MetadataResponse, TopicInfo, metadata_request, parse_metadata
from ..core.security import SECURITY_DEFAULTS, Security, resolve_security
from ..core.structs import BrokerInfo, TopicPartition
from .connection import BrokerConnection

LOGGER = logging.getLogger(__name__)

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
#: errors after which the partition's leader is looked up again before a retry
LEADER_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.NOT_ENOUGH_REPLICAS,
})
COORDINATOR_ERRORS = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
#: what ``retrying`` retries besides lost connections and timeouts: errors a new leader or
#: coordinator clears. Other retriable codes (an unknown topic) are answers for a tool.
RETRIED = LEADER_ERRORS | COORDINATOR_ERRORS

T = TypeVar("T")


class Cluster:
    """Connections (one per broker, opened on demand) and the brokers and leaders last seen."""

    def __init__(self, bootstrap_servers: str | Sequence[str] = DEFAULT_BOOTSTRAP, *,
                 timeout_s: float = 30.0, client_id: str = "trio-broker", retries: int = 5,
                 retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 1000,
                 config: Mapping[str, Any] | None = None) -> None:
        unknown = sorted(set(config or {}) - set(SECURITY_DEFAULTS))
        if unknown:
            raise ConfigError(f"unknown client config {unknown[0]!r} (the blocking client "
                              f"takes {', '.join(SECURITY_DEFAULTS)})")
        self.bootstrap: list[BrokerAddress] = parse_bootstrap(bootstrap_servers)
        self.security: Security = resolve_security({**SECURITY_DEFAULTS, **(config or {})},
                                                   bootstrap_servers)
        self.timeout_s = timeout_s
        self.client_id = client_id
        self.retries = retries
        self._backoff = ExponentialBackoff(retry_backoff_ms, retry_backoff_max_ms)
        self._connections: dict[tuple[str, int], BrokerConnection] = {}
        self.brokers: dict[int, BrokerInfo] = {}
        self.controller_id = -1
        self._leaders: dict[str, dict[int, int]] = {}
        self._coordinators: dict[str, tuple[str, int]] = {}

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    @property
    def bootstrap_text(self) -> str:
        return ",".join(str(a) for a in self.bootstrap)

    # --- connections ---------------------------------------------------------------------

    def connect(self, host: str, port: int) -> BrokerConnection:
        """The open connection to ``host:port`` (one per address, made on first use and again
        after it failed: a connection closes itself on any error)."""
        conn = self._connections.get((host, port))
        if conn is None or conn.closed:
            conn = BrokerConnection(host, port, timeout_s=self.timeout_s,
                                    client_id=self.client_id, security=self.security)
            self._connections[(host, port)] = conn
        return conn

    def any_connection(self) -> BrokerConnection:
        """An open connection, else one to a known broker or bootstrap server that answers."""
        for conn in self._connections.values():
            if not conn.closed:
                return conn
        errors = []
        addresses = [(b.host, b.port) for b in self.brokers.values()] + [
            (a.host, a.port) for a in self.bootstrap]
        for host, port in dict.fromkeys(addresses):
            try:
                return self.connect(host, port)
            except KafkaConnectionError as exc:
                errors.append(str(exc))
        raise KafkaConnectionError(f"no broker reachable at {self.bootstrap_text}: "
                                   + "; ".join(errors))

    def connection(self, node_id: int) -> BrokerConnection:
        """A connection to broker ``node_id`` as Metadata advertised it."""
        if node_id not in self.brokers:
            self.metadata([])
        broker = self.brokers.get(node_id)
        if broker is None:
            raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        return self.connect(broker.host, broker.port)

    def controller(self) -> BrokerConnection:
        """The controller (admin calls), or any broker when Metadata names none."""
        self.metadata([])
        if self.controller_id in self.brokers:
            return self.connection(self.controller_id)
        return self.any_connection()

    def leader(self, tp: TopicPartition) -> BrokerConnection:
        """A connection to the leader of ``tp`` (metadata is fetched when it is not known)."""
        leader = self._leaders.get(tp.topic, {}).get(tp.partition)
        if leader is None or leader < 0 or leader not in self.brokers:
            topic = self.metadata([tp.topic]).topics.get(tp.topic)
            if topic is not None and topic.error and topic.error != ErrorCode.LEADER_NOT_AVAILABLE:
                raise topic_error(tp.topic, topic.error)
            leader = self._leaders.get(tp.topic, {}).get(tp.partition)
        if leader is None:
            raise error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            f"partition {tp} does not exist")
        if leader < 0 or leader not in self.brokers:
            raise error_for(ErrorCode.LEADER_NOT_AVAILABLE, f"partition {tp} has no leader")
        return self.connection(leader)

    def coordinator(self, group_id: str) -> BrokerConnection:
        """A connection to ``group_id``'s coordinator (FindCoordinator, remembered)."""
        address = self._coordinators.get(group_id)
        if address is None:
            def find() -> tuple[str, int]:
                found = parse_find_coordinator(self.any_connection().request(
                    ApiKey.FindCoordinator, lambda v: find_coordinator_request(v, group_id)))
                if found.error:
                    raise error_for(found.error, f"FindCoordinator for group {group_id!r}: "
                                    f"{error_name(found.error)}")
                return found.host, found.port

            address = self._coordinators[group_id] = self.retrying(
                f"FindCoordinator for {group_id!r}", find)
        return self.connect(*address)

    def forget_coordinator(self, group_id: str) -> None:
        self._coordinators.pop(group_id, None)

    def invalidate_leaders(self) -> None:
        """Forget every partition's leader: the next call looks them up again (after a
        leadership error or a lost connection)."""
        self._leaders.clear()

    # --- retrying ------------------------------------------------------------------------

    def retrying(self, what: str, call: Callable[[], T], *,
                 on_retry: Callable[[KafkaError], None] | None = None) -> T:
        """``call()``, again after a lost connection, a timeout or an error in ``RETRIED``
        (forgetting leaders), up to ``retries`` times; the last error is raised."""
        attempt = 0
        while True:
            try:
                return call()
            except KafkaError as exc:
                retry = isinstance(exc, KafkaConnectionError | KafkaTimeoutError) or (
                    exc.code in RETRIED)
                if not retry or attempt >= self.retries:
                    raise
                LOGGER.info("%s failed (%s); refreshing metadata and retrying", what, exc)
                if on_retry is not None:
                    on_retry(exc)
                self._leaders.clear()
                time.sleep(self._backoff.backoff_ms(attempt) / 1000)
                attempt += 1

    # --- metadata ------------------------------------------------------------------------

    def metadata(self, topics: Sequence[str] | None = None, *,
                 allow_auto_create: bool = False) -> MetadataResponse:
        """Brokers and topics (None: every topic; ``[]``: brokers only), retrying lost
        connections; topics answered with an error keep their error code."""
        wanted = None if topics is None else sorted(set(topics))

        def ask() -> Any:
            return self.any_connection().request(ApiKey.Metadata, lambda v: metadata_request(
                v, wanted, allow_auto_create=allow_auto_create))

        def forget(_: KafkaError) -> None:
            self.brokers = {}

        parsed = parse_metadata(self.retrying("Metadata", ask, on_retry=forget))
        self.brokers = parsed.brokers
        self.controller_id = parsed.controller_id
        for name, info in parsed.topics.items():
            self._leaders[name] = {p: part.leader for p, part in info.partitions.items()}
        return parsed

    def topic(self, name: str, *, allow_auto_create: bool = False,
              wait_s: float = 5.0) -> TopicInfo:
        """One topic's metadata, waiting out transient errors (a topic being created, a leader
        being elected) for up to ``wait_s``."""
        deadline = time.monotonic() + wait_s
        while True:
            info = self.metadata([name], allow_auto_create=allow_auto_create).topics.get(name)
            code = info.error if info is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if info is not None and code == 0 and info.partitions and not any(
                    p.leader < 0 for p in info.partitions.values()):
                return info
            retriable = code in (ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT,
                                 ErrorCode.NOT_LEADER_OR_FOLLOWER) or (
                code == 0 and info is not None) or (
                allow_auto_create and code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if not retriable or time.monotonic() >= deadline:
                if code == 0:
                    raise error_for(ErrorCode.LEADER_NOT_AVAILABLE,
                                    f"topic {name!r} has partitions without a leader")
                raise topic_error(name, code)
            time.sleep(0.1)

    def partitions_for(self, topics: Iterable[str]) -> list[TopicPartition]:
        """Every partition of ``topics``; a missing topic raises
        ``UnknownTopicOrPartitionError``."""
        wanted = sorted(set(topics))
        md = self.metadata(wanted)
        out: list[TopicPartition] = []
        for name in wanted:
            info = md.topics.get(name)
            if info is None or info.error:
                raise topic_error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if info is None
                                  else info.error)
            out.extend(TopicPartition(name, p) for p in sorted(info.partitions))
        return out

    def by_leader(self, partitions: Iterable[TopicPartition],
                  ) -> dict[tuple[str, int], tuple[BrokerConnection, list[TopicPartition]]]:
        """``partitions`` grouped by the connection to their leader."""
        groups: dict[tuple[str, int], tuple[BrokerConnection, list[TopicPartition]]] = {}
        for tp in partitions:
            conn = self.leader(tp)
            groups.setdefault((conn.host, conn.port), (conn, []))[1].append(tp)
        return groups


def topic_error(topic: str, code: int) -> KafkaError:
    """The error for a topic Metadata answered with ``code``, in words a user reads."""
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return error_for(code, f"topic {topic!r} does not exist")
    if code == ErrorCode.INVALID_TOPIC_EXCEPTION:
        return error_for(code, f"{topic!r} is not a valid topic name")
    return error_for(code, f"Metadata for topic {topic!r}: {error_name(code)}")


__all__ = ["COORDINATOR_ERRORS", "DEFAULT_BOOTSTRAP", "LEADER_ERRORS", "RETRIED", "Cluster",
           "topic_error"]
