"""The server-side assignors of consumer groups (KIP-848): ``uniform`` and ``range``.

Why on the broker: with the consumer protocol the group coordinator computes every member's
target assignment itself (``group.consumer.assignors``; a member may ask for one by name,
``server_assignor``). An assignor sees the members (their subscribed topic ids and current
target) and the partition counts, and returns each member's new target; it never sees member
epochs or who still owns what: reconciliation (``reconciliation.py``) moves partitions safely.

- ``uniform`` (Kafka's ``UniformAssignor``, the default): balance first, then stickiness. When
  every member subscribes to the same topics (homogeneous) it is Kafka's algorithm: each member
  keeps what it had up to its quota (total / members, the first ``total % members`` members in
  iteration order may keep one more), the rest is dealt to members below quota. Otherwise it
  keeps what each member had while still subscribed, deals the rest to the least loaded
  eligible member, then moves partitions from the most to the least loaded eligible member
  until no move improves the balance (Kafka's heterogeneous builder reaches the same kind of
  balance with a longer algorithm; placements may differ).
- ``range`` (Kafka's server-side ``RangeAssignor``): per topic, contiguous ranges in member
  order (static members first by instance id, then by member id); co-partitioned when every
  member subscribes to the same topics of equal size.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Protocol

import attrs

from .consumer_group import Assignment, assignment_of

#: a move loop on an unbalanced heterogeneous group stops after this many moves per partition
_MAX_MOVES_PER_PARTITION = 2


@attrs.frozen
class MemberSpec:
    """What an assignor knows of one member."""

    instance_id: str | None
    #: ids of the existing topics the member subscribes to
    topics: frozenset[uuid.UUID]
    #: its current target assignment
    assignment: Assignment


class PartitionAssignorError(Exception):
    """The assignor cannot compute an assignment (Kafka answers UNKNOWN_SERVER_ERROR)."""


class ServerAssignor(Protocol):
    name: str

    def assign(self, members: Mapping[str, MemberSpec], homogeneous: bool,
               partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]: ...


class UniformAssignor:
    name = "uniform"

    def assign(self, members: Mapping[str, MemberSpec], homogeneous: bool,
               partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
        if not members:
            return {}
        if homogeneous:
            return _uniform_homogeneous(members, partitions)
        return _uniform_heterogeneous(members, partitions)


def _uniform_homogeneous(members: Mapping[str, MemberSpec],
                         partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    """Kafka's ``UniformHomogeneousAssignmentBuilder``."""
    order = sorted(members)
    topics = members[order[0]].topics
    if not topics:
        return {m: {} for m in order}
    held = {(t, p) for spec in members.values() for t, parts in spec.assignment.items()
            for p in parts}
    unassigned: list[tuple[uuid.UUID, int]] = []
    total = 0
    for topic_id in sorted(topics):
        count = partitions[topic_id]
        unassigned += [(topic_id, p) for p in range(count) if (topic_id, p) not in held]
        total += count
    min_quota, extra = divmod(total, len(order))
    kept: dict[str, dict[uuid.UUID, set[int]]] = {}
    unfilled: list[tuple[str, int]] = []
    for index, member_id in enumerate(order):
        quota = min_quota
        has_extra = extra > 0
        if has_extra:
            quota += 1
        mine: dict[uuid.UUID, set[int]] = {}
        for topic_id in sorted(members[member_id].assignment):
            if topic_id not in topics:
                continue  # no member subscribes to it any more: dropped
            for p in sorted(members[member_id].assignment[topic_id]):
                if p >= partitions[topic_id]:
                    continue
                if quota > 0:
                    quota -= 1
                    mine.setdefault(topic_id, set()).add(p)
                else:
                    unassigned.append((topic_id, p))
        if quota > 0 and has_extra and len(order) - index > extra:
            # Leave the extra partition to a later member, unless this one is among the last
            # ``extra`` members and must take it.
            quota -= 1
            has_extra = False
        if quota > 0:
            unfilled.append((member_id, quota))
        if has_extra:
            extra -= 1
        kept[member_id] = mine
    next_index = 0
    for member_id, quota in unfilled:
        for _ in range(quota):
            if next_index >= len(unassigned):
                break
            topic_id, p = unassigned[next_index]
            next_index += 1
            kept[member_id].setdefault(topic_id, set()).add(p)
    if next_index < len(unassigned):
        raise PartitionAssignorError("partitions were left unassigned")
    return {m: assignment_of(kept[m].items()) for m in order}


def _uniform_heterogeneous(members: Mapping[str, MemberSpec],
                           partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    """Balanced and sticky under per-member eligibility (see the module docstring)."""
    order = sorted(members)
    eligible: dict[uuid.UUID, list[str]] = {}
    for member_id in order:
        for topic_id in members[member_id].topics:
            eligible.setdefault(topic_id, []).append(member_id)
    owned: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in order}
    taken: set[tuple[uuid.UUID, int]] = set()
    for member_id in order:
        spec = members[member_id]
        for topic_id, parts in spec.assignment.items():
            if topic_id not in spec.topics:
                continue
            for p in parts:
                tp = (topic_id, p)
                if p < partitions[topic_id] and tp not in taken:
                    taken.add(tp)
                    owned[member_id].add(tp)
    # Deal the rest, the most constrained topics first, to the least loaded eligible member.
    for topic_id in sorted(eligible, key=lambda t: (len(eligible[t]), str(t))):
        for p in range(partitions[topic_id]):
            if (topic_id, p) in taken:
                continue
            target = min(eligible[topic_id], key=lambda m: (len(owned[m]), m))
            owned[target].add((topic_id, p))
            taken.add((topic_id, p))
    # Then move partitions from heavy to light members while that narrows the gap.
    budget = _MAX_MOVES_PER_PARTITION * max(len(taken), 1)
    while budget > 0:
        move = _best_move(owned, eligible)
        if move is None:
            break
        source, target, tp = move
        owned[source].discard(tp)
        owned[target].add(tp)
        budget -= 1
    return {m: assignment_of(_by_topic(owned[m]).items()) for m in order}


def _best_move(owned: Mapping[str, set[tuple[uuid.UUID, int]]],
               eligible: Mapping[uuid.UUID, list[str]],
               ) -> tuple[str, str, tuple[uuid.UUID, int]] | None:
    """One partition from the most loaded member to an eligible member two or more lighter."""
    for source in sorted(owned, key=lambda m: (-len(owned[m]), m)):
        for tp in sorted(owned[source], key=lambda x: (str(x[0]), x[1]), reverse=True):
            lighter = [m for m in eligible[tp[0]] if len(owned[m]) + 1 < len(owned[source])]
            if lighter:
                return source, min(lighter, key=lambda m: (len(owned[m]), m)), tp
    return None


def _by_topic(tps: set[tuple[uuid.UUID, int]]) -> dict[uuid.UUID, set[int]]:
    out: dict[uuid.UUID, set[int]] = {}
    for topic_id, p in tps:
        out.setdefault(topic_id, set()).add(p)
    return out


class RangeAssignor:
    name = "range"

    def assign(self, members: Mapping[str, MemberSpec], homogeneous: bool,
               partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
        """Kafka's server-side ``RangeAssignor``."""
        if not members:
            return {}
        order = sorted(members, key=lambda m: (
            (0, members[m].instance_id or "", "") if members[m].instance_id is not None
            else (1, "", m)))
        subscribers: dict[uuid.UUID, int] = {}
        for spec in members.values():
            for topic_id in spec.topics:
                subscribers[topic_id] = subscribers.get(topic_id, 0) + 1
        # per topic: [next range start, members still to serve an extra partition]
        state = {t: [0, partitions[t] % n] for t, n in subscribers.items()}
        out: dict[str, Assignment] = {}
        for member_id in order:
            mine: dict[uuid.UUID, range] = {}
            for topic_id in sorted(members[member_id].topics):
                count = partitions[topic_id]
                quota = count // subscribers[topic_id]
                start, extra = state[topic_id]
                if extra > 0:
                    quota += 1
                    state[topic_id][1] = extra - 1
                end = min(start + quota, count)
                state[topic_id][0] = end
                if start < end:
                    mine[topic_id] = range(start, end)
            out[member_id] = assignment_of(mine.items())
        return out


#: built-in assignors by name
ASSIGNORS: dict[str, ServerAssignor] = {"uniform": UniformAssignor(), "range": RangeAssignor()}

__all__ = ["ASSIGNORS", "MemberSpec", "PartitionAssignorError", "RangeAssignor",
           "ServerAssignor", "UniformAssignor"]
