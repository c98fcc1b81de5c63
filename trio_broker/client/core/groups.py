"""Consumer-group requests: coordinator lookup, the classic join/sync/heartbeat/leave protocol,
and the group admin calls (list, describe, delete).

Member assignments inside DescribeGroups answers are decoded with the one consumer-protocol
codec (``protocol.consumer_protocol``); a member whose bytes do not decode (another protocol
type, a broken client) is shown with no partitions rather than failing the whole description.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ...protocol.api_keys import ApiKey, request_class
from ...protocol.consumer_protocol import PayloadError, decode_assignment
from ...protocol.messages import make_request
from .errors import UnsupportedVersionError
from .structs import TopicPartition

_JOIN: Any = request_class(ApiKey.JoinGroup)
_SYNC: Any = request_class(ApiKey.SyncGroup)
_OFFSET_DELETE: Any = request_class(ApiKey.OffsetDelete)

#: FindCoordinator key types
GROUP_KEY = 0
TRANSACTION_KEY = 1


class Coordinator(NamedTuple):
    error: int
    node_id: int
    host: str
    port: int
    error_message: str | None


class JoinResult(NamedTuple):
    error: int
    generation: int
    protocol: str | None
    leader: str
    member_id: str
    #: (member id, subscription bytes) of every member; only the leader gets them
    members: list[tuple[str, bytes]]


class GroupListing(NamedTuple):
    group_id: str
    protocol_type: str


class MemberDescription(NamedTuple):
    member_id: str
    client_id: str
    client_host: str
    assignment: frozenset[TopicPartition]


class GroupDescription(NamedTuple):
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    #: "classic", or "consumer" for a KIP-848 group (described by ConsumerGroupDescribe)
    group_type: str = "classic"
    #: a consumer group holding members of the classic protocol too (online migration)
    mixed: bool = False


def find_coordinator_request(version: int, key: str, key_type: int = GROUP_KEY) -> Any:
    """v4+ asks for a list of keys (KIP-699); this asks for one."""
    if version >= 4:
        return make_request(ApiKey.FindCoordinator, version, key_type=key_type,
                            coordinator_keys=[key])
    return make_request(ApiKey.FindCoordinator, version, key=key, key_type=key_type)


def parse_find_coordinator(response: Any) -> Coordinator:
    """The coordinator of the one key asked for (a v4+ answer lists it among its keys)."""
    if response.coordinators:
        response = response.coordinators[0]
    return Coordinator(response.error_code, response.node_id, response.host, response.port,
                       getattr(response, "error_message", None))


def join_group_request(version: int, group_id: str, member_id: str, *,
                       session_timeout_ms: int, rebalance_timeout_ms: int,
                       protocols: Sequence[tuple[str, bytes]],
                       protocol_type: str = "consumer",
                       group_instance_id: str | None = None) -> Any:
    """``group_instance_id`` makes the member static (KIP-345), which needs JoinGroup v5."""
    if group_instance_id is not None and version < 5:
        raise UnsupportedVersionError(f"static membership needs JoinGroup v5; the coordinator "
                                      f"speaks up to v{version}")
    return make_request(
        ApiKey.JoinGroup, version, group_id=group_id, session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms, member_id=member_id,
        group_instance_id=group_instance_id,
        protocol_type=protocol_type,
        protocols=[_JOIN.JoinGroupRequestProtocol(name=name, metadata=metadata)
                   for name, metadata in protocols])


def parse_join_group(response: Any) -> JoinResult:
    return JoinResult(response.error_code, response.generation_id, response.protocol_name,
                      response.leader, response.member_id,
                      [(m.member_id, bytes(m.metadata)) for m in response.members or ()])


def sync_group_request(version: int, group_id: str, generation: int, member_id: str, *,
                       protocol_name: str | None, assignments: Mapping[str, bytes],
                       protocol_type: str = "consumer",
                       group_instance_id: str | None = None) -> Any:
    return make_request(
        ApiKey.SyncGroup, version, group_id=group_id, generation_id=generation,
        member_id=member_id, group_instance_id=group_instance_id, protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignments=[_SYNC.SyncGroupRequestAssignment(member_id=m, assignment=a)
                     for m, a in assignments.items()])


def parse_sync_group(response: Any) -> tuple[int, bytes]:
    """(error code, this member's assignment bytes)"""
    return response.error_code, bytes(response.assignment or b"")


def heartbeat_request(version: int, group_id: str, generation: int, member_id: str,
                      group_instance_id: str | None = None) -> Any:
    return make_request(ApiKey.Heartbeat, version, group_id=group_id, generation_id=generation,
                        member_id=member_id, group_instance_id=group_instance_id)


def leave_group_request(version: int, group_id: str, member_id: str) -> Any:
    return make_request(ApiKey.LeaveGroup, version, group_id=group_id, member_id=member_id)


def list_groups_request(version: int) -> Any:
    return make_request(ApiKey.ListGroups, version)


def parse_list_groups(response: Any) -> tuple[int, list[GroupListing]]:
    return response.error_code, [GroupListing(g.group_id, g.protocol_type)
                                 for g in response.groups]


def describe_groups_request(version: int, group_ids: Iterable[str]) -> Any:
    return make_request(ApiKey.DescribeGroups, version, groups=list(group_ids),
                        include_authorized_operations=False)


def _assignment(protocol_type: str, data: bytes | None) -> frozenset[TopicPartition]:
    if protocol_type != "consumer" or not data:
        return frozenset()
    try:
        parsed = decode_assignment(bytes(data)).partitions
    except PayloadError:
        return frozenset()
    return frozenset(TopicPartition(t, p) for t, parts in parsed.items() for p in parts)


def parse_describe_groups(response: Any) -> list[tuple[int, GroupDescription]]:
    """(error code, description) per group asked for, in the broker's order."""
    out = []
    for g in response.groups:
        members = [MemberDescription(m.member_id, m.client_id, m.client_host,
                                     _assignment(g.protocol_type, m.member_assignment))
                   for m in g.members]
        out.append((g.error_code, GroupDescription(g.group_id, g.group_state, g.protocol_type,
                                                   g.protocol_data, members)))
    return out


def consumer_group_describe_request(version: int, group_id: str) -> Any:
    return make_request(ApiKey.ConsumerGroupDescribe, version, group_ids=[group_id],
                        include_authorized_operations=False)


def parse_consumer_group_describe(response: Any) -> tuple[int, GroupDescription]:
    """(error code, description) of the one KIP-848 group asked for: its state, assignor,
    members (client, host, assigned partitions), and whether classic members are in it."""
    g = response.groups[0]
    members = [MemberDescription(m.member_id, m.client_id, m.client_host, frozenset(
        TopicPartition(t.topic_name, p) for t in m.assignment.topic_partitions
        for p in t.partitions)) for m in g.members]
    mixed = any(getattr(m, "member_type", -1) == 0 for m in g.members)
    return g.error_code, GroupDescription(g.group_id, g.group_state, "consumer",
                                          g.assignor_name, members, "consumer", mixed)


def delete_groups_request(version: int, group_ids: Iterable[str]) -> Any:
    return make_request(ApiKey.DeleteGroups, version, groups_names=list(group_ids))


def parse_delete_groups(response: Any) -> dict[str, int]:
    """{group: error code}"""
    return {r.group_id: r.error_code for r in response.results}


def offset_delete_request(version: int, group_id: str,
                          partitions: Iterable[TopicPartition]) -> Any:
    """Delete the group's committed offsets of ``partitions`` (Kafka's OffsetDelete)."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    topic = _OFFSET_DELETE.OffsetDeleteRequestTopic
    return make_request(ApiKey.OffsetDelete, version, group_id=group_id, topics=[
        topic(name=t, partitions=[topic.OffsetDeleteRequestPartition(partition_index=p)
                                  for p in parts])
        for t, parts in by_topic.items()])


def parse_offset_delete(response: Any) -> tuple[int, dict[TopicPartition, int]]:
    """(group error code, {partition: error code})"""
    return response.error_code, {TopicPartition(t.name, p.partition_index): p.error_code
                                 for t in response.topics for p in t.partitions}


__all__ = ["GROUP_KEY", "TRANSACTION_KEY", "Coordinator", "GroupDescription", "GroupListing",
           "JoinResult", "MemberDescription", "delete_groups_request",
           "describe_groups_request", "find_coordinator_request", "heartbeat_request",
           "join_group_request", "leave_group_request", "list_groups_request",
           "offset_delete_request", "parse_delete_groups", "parse_describe_groups",
           "parse_find_coordinator", "parse_join_group", "parse_list_groups",
           "parse_offset_delete", "parse_sync_group", "sync_group_request"]


def range_assign(subscriptions: Mapping[str, Iterable[str]],
                 partitions: Mapping[str, int]) -> dict[str, dict[str, list[int]]]:
    """Kafka's client-side RangeAssignor: per topic, consecutive partition ranges to the
    members subscribed to it, sorted by id, the first ones one longer when it does not divide
    evenly. {member: {topic: partitions}} from {member: topics} and {topic: partition count}."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    for topic in sorted(partitions):
        members = sorted(m for m, topics in subscriptions.items() if topic in set(topics))
        if not members:
            continue
        share, extra = divmod(partitions[topic], len(members))
        start = 0
        for i, member in enumerate(members):
            n = share + (1 if i < extra else 0)
            if n:
                out[member][topic] = list(range(start, start + n))
            start += n
    return out

