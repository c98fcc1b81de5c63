"""Metadata: the request, its parsed answer, and the client's cached picture of the cluster.

Why a snapshot replaced per topic on every response: readers (a producer's hot path, a fetcher,
a blocking client routing to leaders) look leaders up without waiting, and a response describes
the requested topics completely, so swapping in new per-topic entries never shows a
half-updated topic.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from ...protocol.api_keys import ApiKey, request_class
from ...protocol.errors import ErrorCode
from ...protocol.messages import make_request
from .structs import BrokerInfo, PartitionInfo, TopicPartition

_METADATA: Any = request_class(ApiKey.Metadata)


def metadata_request(version: int, topics: Sequence[str] | None, *,
                     allow_auto_create: bool = False) -> Any:
    """Metadata for ``topics`` (None: every topic; ``[]``: brokers only, except v0, where an
    empty list means every topic)."""
    wanted: list[Any] | None
    if topics is None:
        wanted = [] if version == 0 else None
    else:
        wanted = [_METADATA.MetadataRequestTopic(name=name) for name in topics]
    return make_request(ApiKey.Metadata, version, topics=wanted,
                        allow_auto_topic_creation=allow_auto_create)


class TopicInfo:
    """One topic as a Metadata response described it."""

    __slots__ = ("available", "error", "internal", "name", "num_partitions", "partitions",
                 "topic_id")

    def __init__(self, name: str, error: int, internal: bool,
                 partitions: Iterable[PartitionInfo], topic_id: uuid.UUID | None = None) -> None:
        self.name = name
        #: Metadata v10+ (None before, or for a topic without one)
        self.topic_id = topic_id
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


class MetadataResponse(NamedTuple):
    brokers: dict[int, BrokerInfo]
    controller_id: int
    cluster_id: str | None
    #: every topic of the answer, those with an error code included
    topics: dict[str, TopicInfo]


def parse_metadata(response: Any) -> MetadataResponse:
    brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, getattr(b, "rack", None))
               for b in response.brokers}
    controller = getattr(response, "controller_id", -1)
    topics: dict[str, TopicInfo] = {}
    for t in response.topics:
        parts = [PartitionInfo(p.partition_index, p.leader_id, tuple(p.replica_nodes or ()),
                               tuple(p.isr_nodes or ()), p.error_code)
                 for p in (t.partitions or ())]
        topics[t.name] = TopicInfo(t.name, t.error_code, bool(getattr(t, "is_internal", False)),
                                   parts, getattr(t, "topic_id", None))
    return MetadataResponse(brokers, -1 if controller is None else controller,
                            getattr(response, "cluster_id", None), topics)


class ClusterMetadata:
    """Brokers and topics from the latest Metadata responses."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        #: when the last successful response arrived (the caller's clock), -inf before one
        self.updated_at = float("-inf")

    def update(self, response: Any, now: float, *, requested: Iterable[str] | None) -> None:
        """Apply a Metadata response; topics requested but absent are forgotten, and a topic
        answered with an error keeps no partitions."""
        parsed = parse_metadata(response)
        self.brokers = parsed.brokers
        self.cluster_id = parsed.cluster_id
        self.controller_id = parsed.controller_id
        for name, info in parsed.topics.items():
            if info.error == ErrorCode.NONE or not info.partitions:
                self.topics[name] = info
        if requested is not None:
            for name in requested:
                if name not in parsed.topics:
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


__all__ = ["ClusterMetadata", "MetadataResponse", "TopicInfo", "metadata_request",
           "parse_metadata"]
