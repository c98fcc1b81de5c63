"""Online migration between the classic and the consumer group protocols (KIP-848).

Why a group changes protocol with its members in it: a consumer upgrade is rolled one process
at a time, so for a while one group holds members of both protocols. Kafka (and this broker)
lets the group follow its members, per ``group.consumer.migration.policy``:

    upgrade     the first consumer-protocol member to join a classic group whose members speak
                the ``consumer`` embedded protocol turns it into a consumer group: every classic
                member becomes a member of it at the generation it had, keeping the partitions
                its last SyncGroup gave it (and they become its target), so nothing moves until
                the server-side assignor says so
    downgrade   when the last consumer-protocol member leaves (or is fenced) and the members
                left all speak the classic protocol, the group turns back into a classic group,
                Stable at the consumer group's epoch with each member's target assignment, and
                a rebalance starts (the classic members' leader assigns again)

Classic members inside a consumer group are served by the consumer group (``classic_members.py``):
the server-side assignor decides for them too.

This module holds the policy and the two conversions, as data to data (Kafka's
``ConsumerGroup.fromClassicGroup`` and ``ClassicGroup.fromConsumerGroup``); the coordinator
decides when they happen and writes their records.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping

from ...protocol.consumer_protocol import decode_assignment, decode_subscription, encode_assignment
from .consumer_group import (
    CONSUMER_GROUP_TYPE,
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    assignment_of,
)
from .group import Group, Member
from .group_log import Record
from .group_store import epochs_record, member_record, target_record
from .reconciliation import TopicsMetadata
from .states import GroupState


class MigrationPolicy(enum.Enum):
    """``group.consumer.migration.policy`` (Kafka's ``ConsumerGroupMigrationPolicy``)."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @classmethod
    def parse(cls, name: str | None) -> MigrationPolicy:
        """Case-insensitive; an unknown name disables migration, as Kafka's ``parse``."""
        for policy in cls:
            if name is not None and policy.value == name.lower():
                return policy
        return cls.DISABLED

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)


def partitions_by_id(partitions: Mapping[str, list[int]], topics: TopicsMetadata) -> Assignment:
    """Partitions named by topic, as topic ids; topics that do not exist are left out."""
    return assignment_of((topics[name][0], parts) for name, parts in partitions.items()
                         if name in topics)


def partitions_by_name(assignment: Assignment, topics: TopicsMetadata) -> dict[str, list[int]]:
    names: dict[uuid.UUID, str] = {tid: name for name, (tid, _) in topics.items()}
    return {names[tid]: sorted(parts) for tid, parts in assignment.items() if tid in names}


def consumer_group_of(classic: Group, topics: TopicsMetadata, now_ms: int) -> ConsumerGroup:
    """Kafka's ``ConsumerGroup.fromClassicGroup``: every member Stable at the generation, owning
    what its last SyncGroup gave it. Raises ``PayloadError`` for a malformed subscription."""
    group = ConsumerGroup(classic.group_id, now_ms)
    group.group_epoch = group.assignment_epoch = classic.generation_id
    claimed: set[tuple[uuid.UUID, int]] = set()
    for m in classic.members.values():
        protocol = classic.protocol_name
        metadata = (m.metadata(protocol) if protocol in m.protocol_names
                    else m.protocols[0][1])
        subscription = decode_subscription(metadata)
        owned = partitions_by_id(decode_assignment(m.assignment).partitions, topics)
        # A leader may have handed one partition to two members: the first keeps it.
        assigned = assignment_of(
            (tid, [p for p in parts if (tid, p) not in claimed]) for tid, parts in owned.items())
        claimed.update((tid, p) for tid, parts in assigned.items() for p in parts)
        member = ConsumerGroupMember(
            m.member_id, instance_id=m.group_instance_id, rack_id=subscription.rack_id,
            rebalance_timeout_ms=m.rebalance_timeout_ms, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=frozenset(subscription.topics),
            member_epoch=classic.generation_id, previous_member_epoch=classic.generation_id,
            state=MemberState.STABLE, assigned=assigned,
            classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)))
        group.target_assignment[m.member_id] = assigned
        group.update_member(member)
    group.offsets = classic.offsets
    group.inflight_writes = classic.inflight_writes
    group.metadata_expired = True
    return group


def consumer_group_records(group: ConsumerGroup) -> list[Record]:
    """Kafka's ``createConsumerGroupRecords``: members, targets and epochs of a new group."""
    records = [member_record(group.group_id, m) for m in group.members.values()]
    records += [target_record(group.group_id, member_id, target)
                for member_id, target in group.target_assignment.items()]
    records.append(epochs_record(group))
    return records


def classic_group_of(group: ConsumerGroup, leaving_member_id: str, topics: TopicsMetadata,
                     now_ms: int) -> Group:
    """Kafka's ``ClassicGroup.fromConsumerGroup``: Stable at the group epoch, every member but
    ``leaving_member_id`` with its target assignment, encoded at its subscription's version."""
    classic = Group(group.group_id, state=GroupState.STABLE, state_since_ms=now_ms,
                    generation_id=group.group_epoch, protocol_type=CONSUMER_GROUP_TYPE)
    for m in group.members.values():
        if m.member_id == leaving_member_id or m.classic is None:
            continue
        classic.add_member(Member(
            m.member_id, m.instance_id, m.client_id, m.client_host,
            m.classic.session_timeout_ms, m.rebalance_timeout_ms, CONSUMER_GROUP_TYPE,
            list(m.classic.protocols)))
    protocol = classic.select_protocol()
    classic.protocol_name = protocol
    classic.subscribed_topics = classic.compute_subscribed_topics()
    for member in classic.members.values():
        target = group.target_assignment.get(member.member_id, {})
        version = decode_subscription(member.metadata(protocol)).version
        member.assignment = encode_assignment(partitions_by_name(target, topics),
                                              version=version)
    classic.offsets = group.offsets
    classic.inflight_writes = group.inflight_writes
    return classic


__all__ = ["MigrationPolicy", "classic_group_of", "consumer_group_of", "consumer_group_records",
           "partitions_by_id", "partitions_by_name"]
