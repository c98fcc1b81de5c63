"""Target assignments and incremental reconciliation of consumer-group members (KIP-848).

Why two steps, as Kafka's ``TargetAssignmentBuilder`` and ``CurrentAssignmentBuilder``: the
assignor says where every partition *should* be (the target, at the group's assignment
epoch); each member then moves towards its target one heartbeat at a time, and a partition is
handed to its new owner only after the old owner has stopped reporting it in its owned
partitions. So no partition is ever owned by two members, whatever order the heartbeats come in.

A member's reconciliation state machine (Kafka's ``MemberState``)::

    STABLE                  owns exactly its target at its epoch; a newer target epoch or a
                            subscription change starts the next step
    UNREVOKED_PARTITIONS    must give up ``pending_revocation`` first; stays at its epoch until
                            its heartbeat no longer lists them (the rebalance timeout fences it
                            otherwise)
    UNRELEASED_PARTITIONS   at the target epoch, but some target partitions are still owned by
                            another member; they are added as soon as they are released

Each step computes, per topic: keep = assigned & target, revoke = assigned - keep,
assign = target - keep - (partitions another member still owns).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

import attrs

from ...protocol.errors import ErrorCode
from .assignors import MemberSpec, ServerAssignor
from .consumer_group import (
    EMPTY_ASSIGNMENT,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    assignment_of,
)

#: topic name -> (topic id, partition count) of the topics that exist
TopicsMetadata = Mapping[str, tuple[uuid.UUID, int]]
#: the partitions a member says it owns (``None``: not sent in this heartbeat)
Owned = Mapping[uuid.UUID, frozenset[int]] | None


class GroupError(Exception):
    """A request the coordinator refuses with a Kafka error code (and Kafka's message)."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


def topic_ids(names: frozenset[str], topics: TopicsMetadata) -> frozenset[uuid.UUID]:
    """The ids of the subscribed topics that exist (Kafka's ``TopicIds``)."""
    return frozenset(topics[n][0] for n in names if n in topics)


def owns_any(owned: Owned, partitions: Assignment) -> bool:
    """Whether the member still reports one of ``partitions`` (not reporting counts as yes)."""
    if owned is None:
        return True
    return any(owned_parts & partitions.get(topic_id, frozenset())
               for topic_id, owned_parts in owned.items())


def reconcile(member: ConsumerGroupMember, *, target_epoch: int, target: Assignment,
              subscribed: frozenset[uuid.UUID],
              partition_epoch: Callable[[uuid.UUID, int], int], owned: Owned,
              subscription_changed: bool) -> ConsumerGroupMember:
    """Kafka's ``CurrentAssignmentBuilder.build``: the member's next state (or itself)."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, subscribed,
                         partition_epoch, owned)
        if subscription_changed:
            return _drop_unsubscribed(member, subscribed, owned)
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            return (_drop_unsubscribed(member, subscribed, owned) if subscription_changed
                    else member)
        # Everything pending was revoked: on to the next epoch (never past the target's).
        return _next(member, min(member.member_epoch + 1, target_epoch), target_epoch, target,
                     subscribed, partition_epoch, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, subscribed,
                     partition_epoch, owned)
    if owned is None or owned:  # UNKNOWN: start again from nothing
        raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                         "The consumer group member is in a unknown state. The member must "
                         "abandon all its partitions and rejoin.")
    return _next(member, target_epoch, target_epoch, target, subscribed, partition_epoch, owned)


def _drop_unsubscribed(member: ConsumerGroupMember, subscribed: frozenset[uuid.UUID],
                       owned: Owned) -> ConsumerGroupMember:
    """Kafka's ``updateCurrentAssignment``: topics no longer subscribed go to revocation."""
    dropped = {t: p for t, p in member.assigned.items() if t not in subscribed}
    if not dropped:
        return member
    assigned = {t: p for t, p in member.assigned.items() if t in subscribed}
    pending = dict(member.pending_revocation)
    for topic_id, parts in dropped.items():
        pending[topic_id] = pending.get(topic_id, frozenset()) | parts
    if owns_any(owned, pending):
        return attrs.evolve(member, state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned,
                            pending_revocation=pending)
    return attrs.evolve(member, assigned=assigned)


def _next(member: ConsumerGroupMember, member_epoch: int, target_epoch: int,
          target: Assignment, subscribed: frozenset[uuid.UUID],
          partition_epoch: Callable[[uuid.UUID, int], int],
          owned: Owned) -> ConsumerGroupMember:
    """Kafka's ``computeNextAssignment``."""
    unreleased = False
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoke: dict[uuid.UUID, frozenset[int]] = {}
    add: dict[uuid.UUID, frozenset[int]] = {}
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset()) if topic_id in subscribed else frozenset()
        current = member.assigned.get(topic_id, frozenset())
        keep = current & wanted
        pending_here = member.pending_revocation.get(topic_id, frozenset())
        free = frozenset(p for p in wanted - keep
                         if partition_epoch(topic_id, p) == -1 or p in pending_here)
        unreleased = unreleased or len(free) < len(wanted - keep)
        if keep:
            assigned[topic_id] = keep
        if current - keep:
            revoke[topic_id] = current - keep
        if free:
            add[topic_id] = free
    if revoke and owns_any(owned, revoke):
        # Revoke first, at the current epoch; the new partitions come once it is done.
        return member.with_member_epoch(member_epoch, state=MemberState.UNREVOKED_PARTITIONS,
                                        assigned=assigned, pending_revocation=revoke)
    for topic_id, parts in add.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | parts
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return member.with_member_epoch(target_epoch, state=state, assigned=assigned,
                                    pending_revocation=EMPTY_ASSIGNMENT)


# --- target assignment -----------------------------------------------------------------------

@attrs.frozen
class TargetAssignment:
    """A new target: every member's assignment, and the members whose target changed."""

    members: dict[str, Assignment]
    changed: dict[str, Assignment]


def build_target(group: ConsumerGroup, assignor: ServerAssignor, topics: TopicsMetadata, *,
                 updated: ConsumerGroupMember | None = None,
                 removed: frozenset[str] = frozenset()) -> TargetAssignment:
    """Kafka's ``TargetAssignmentBuilder.build`` for the group with ``updated`` in it (a static
    member replacing another takes over its target) and without ``removed``."""
    current = dict(group.members)
    for member_id in removed:
        current.pop(member_id, None)
    targets = {m: group.target_assignment.get(m, EMPTY_ASSIGNMENT) for m in current}
    if updated is not None:
        targets[updated.member_id] = group.target_of(updated.member_id, updated.instance_id)
        previous = (group.static_members.get(updated.instance_id)
                    if updated.instance_id is not None else None)
        if previous is not None and previous != updated.member_id:
            current.pop(previous, None)
            targets.pop(previous, None)
        current[updated.member_id] = updated
    names: dict[str, frozenset[str]] = {m: group.member_topics(member)
                                        for m, member in current.items()}
    specs = {m: MemberSpec(member.instance_id, topic_ids(names[m], topics), targets[m])
             for m, member in current.items()}
    # Kafka's subscription type: homogeneous when every member subscribes to the same topics.
    homogeneous = len(set(names.values())) <= 1
    partitions = {topic_id: count for topic_id, count in topics.values()}
    result = assignor.assign(specs, homogeneous, partitions)
    members = {m: assignment_of(result.get(m, EMPTY_ASSIGNMENT).items()) for m in current}
    changed = {m: a for m, a in members.items() if a != group.target_assignment.get(m)}
    return TargetAssignment(members, changed)


__all__ = ["GroupError", "Owned", "TargetAssignment", "TopicsMetadata", "build_target",
           "owns_any", "reconcile", "topic_ids"]
