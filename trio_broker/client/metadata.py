"""The client's picture of the cluster: brokers, topics, partition leaders.

Why a plain snapshot replaced whole on every Metadata response: readers (the producer's hot
path, the fetcher) look leaders up without awaiting, and a response describes the requested
topics completely, so swapping in new per-topic entries never shows a half-updated topic.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from ..protocol.errors import ErrorCode


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class BrokerInfo(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None


class PartitionInfo(NamedTuple):
    partition: int
    leader: int  # -1 when there is none
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: int


class TopicInfo:
    """One topic as the last Metadata response described it."""

    __slots__ = ("available", "error", "internal", "name", "num_partitions", "partitions")

    def __init__(self, name: str, error: int, internal: bool,
                 partitions: Iterable[PartitionInfo]) -> None:
        self.name = name
        self.error = error
        self.internal = internal
        self.partitions: dict[int, PartitionInfo] = {p.partition: p for p in partitions}
        self.num_partitions = len(self.partitions)
        #: partitions with a leader, the sticky partitioner's choices
        self.available: list[int] = sorted(p.partition for p in self.partitions.values()
                                           if p.leader >= 0)

    def leader(self, partition: int) -> int:
        info = self.partitions.get(partition)
        return -1 if info is None else info.leader

    def __repr__(self) -> str:
        return f"TopicInfo({self.name!r}, error={self.error}, partitions={self.num_partitions})"


class ClusterMetadata:
    """Brokers and topics from the latest Metadata responses."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        #: when the last successful response arrived (trio clock), -inf before the first
        self.updated_at = float("-inf")

    def update(self, response: Any, now: float, *, requested: Iterable[str] | None) -> None:
        """Apply a Metadata response; topics requested but absent are forgotten."""
        self.brokers = {
            b.node_id: BrokerInfo(b.node_id, b.host, b.port, getattr(b, "rack", None))
            for b in response.brokers
        }
        self.cluster_id = getattr(response, "cluster_id", None)
        controller = getattr(response, "controller_id", -1)
        self.controller_id = controller if controller is not None else -1
        seen: set[str] = set()
        for t in response.topics:
            parts = [
                PartitionInfo(p.partition_index, p.leader_id, tuple(p.replica_nodes or ()),
                              tuple(p.isr_nodes or ()), p.error_code)
                for p in (t.partitions or ())
            ]
            info = TopicInfo(t.name, t.error_code, bool(getattr(t, "is_internal", False)), parts)
            if t.error_code == ErrorCode.NONE or not parts:
                self.topics[t.name] = info
            seen.add(t.name)
        if requested is not None:
            for name in requested:
                if name not in seen:
                    self.topics.pop(name, None)
        self.updated_at = now

    def leader_for(self, tp: TopicPartition) -> int:
        info = self.topics.get(tp.topic)
        return -1 if info is None else info.leader(tp.partition)

    def partitions_for(self, topic: str) -> list[int] | None:
        info = self.topics.get(topic)
        if info is None or info.error != ErrorCode.NONE:
            return None
        return sorted(info.partitions)
