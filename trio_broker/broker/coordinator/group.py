"""One classic consumer group and its members, as plain data plus the rules that only read it.

Why separate from the coordinator: membership bookkeeping (who is in, who has rejoined, which
protocol wins the vote, who leads) is pure and easy to test; the coordinator owns the timers, the
held responses and the state transitions that act on it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

import attrs

from ...protocol.consumer_protocol import PayloadError, decode_subscription
from ...protocol.errors import ErrorCode
from .offset_log import OffsetAndMetadata, TopicPartition
from .states import GroupState, check_transition


@attrs.frozen
class JoinResult:
    """What one member's JoinGroup response carries (``members`` only for the leader).

    ``members`` holds (member id, group instance id, metadata); ``skip_assignment`` tells a
    static leader that rejoined a Stable group (JoinGroup v9+) not to compute an assignment.
    """

    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[tuple[str, str | None, bytes]] = attrs.field(factory=list)
    skip_assignment: bool = False


class SyncResult(NamedTuple):
    """A SyncGroup answer; protocol type and name only on success (Kafka's, SyncGroup v5+)."""

    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


@attrs.define(eq=False)
class Member:
    member_id: str
    #: ``group.instance.id`` of a static member (KIP-345); None for a dynamic member
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    #: (name, metadata) in the member's order of preference
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    #: a held JoinGroup response, answered when the join phase completes
    awaiting_join: JoinCallback | None = None
    #: a held SyncGroup response, answered when the leader's assignment arrives
    awaiting_sync: SyncCallback | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, same metadata: a rejoin that changes nothing."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


@attrs.define(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    #: wall-clock ms when the group entered ``state`` (offset retention counts from Empty)
    state_since_ms: int = 0
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = attrs.field(factory=dict)
    #: member ids handed out by MEMBER_ID_REQUIRED and not yet used in a JoinGroup
    pending_members: set[str] = attrs.field(factory=set)
    #: members of the current generation that have not sent SyncGroup yet
    pending_sync: set[str] = attrs.field(factory=set)
    #: group.instance.id -> member id of every static member
    static_members: dict[str, str] = attrs.field(factory=dict)
    #: topics the members subscribe to (protocol type "consumer"), computed per generation;
    #: None when unknown (another protocol type, or a subscription that does not parse)
    subscribed_topics: frozenset[str] | None = None
    offsets: dict[TopicPartition, OffsetAndMetadata] = attrs.field(factory=dict)
    #: initial rebalance delay of a new group: still waiting, a member arrived, ms left
    initial_delay_active: bool = False
    initial_delay_new_member: bool = False
    initial_delay_remaining_ms: int = 0
    #: offset records of this group written but not yet durable (retention skips the group)
    inflight_writes: int = 0

    # --- state ------------------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def is_empty(self) -> bool:
        """Empty, with no member id handed out either (offset retention may run)."""
        return self.state is GroupState.EMPTY and not self.pending_members

    group_type = "classic"

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        check_transition(self.group_id, self.state, target)
        self.state = target
        self.state_since_ms = now_ms

    # --- membership -------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Members plus pending members: both count against ``group.max.size``."""
        return len(self.members) + len(self.pending_members)

    def add_member(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove_member(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        instance_id = None if member is None else member.group_instance_id
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]
        if member is not None and self.leader_id == member_id:
            # Prefer a member already waiting in the join phase: it will hear about it soonest.
            waiting = [m for m in self.members.values() if m.awaiting_join is not None]
            pick = waiting or list(self.members.values())
            self.leader_id = pick[0].member_id if pick else None
        return member

    def static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def replace_static_member(self, group_instance_id: str, old_id: str, new_id: str) -> Member:
        """A static member restarted: the same member (assignment included) under ``new_id``.

        The old member's held responses are the caller's to answer (FENCED_INSTANCE_ID).
        """
        old = self.members.pop(old_id)
        new = attrs.evolve(old, member_id=new_id, awaiting_join=None, awaiting_sync=None)
        self.members[new_id] = new
        self.static_members[group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:  # the new member owes the old one's SyncGroup
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return new

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """Kafka's ``validateMember``: the instance id maps to this member id, which exists."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def accepts_joining_member(self, member_id: str, max_size: int) -> bool:
        """Kafka's ``acceptJoiningMember``: may this JoinGroup proceed under ``group.max.size``?

        While rebalancing the members already waiting are counted (so the last to rejoin of an
        oversized group are the ones turned away); otherwise the members.
        """
        member = self.members.get(member_id)
        if self.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        if self.is_in(GroupState.PREPARING_REBALANCE):
            return ((member is not None and member.awaiting_join is not None)
                    or self.awaiting_join_count() < max_size)
        return member is not None or len(self.members) < max_size

    @property
    def rebalance_timeout_ms(self) -> int:
        """The join phase waits for the slowest member's ``rebalance_timeout_ms``."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def elect_joined_leader(self) -> bool:
        """Kafka's ``maybeElectNewJoinedLeader``: keep a leader that rejoined, else pick a member
        that did; False when nobody rejoined (the join phase must wait longer)."""
        leader = self.members.get(self.leader_id or "")
        if leader is None:
            joined = [m for m in self.members.values() if m.awaiting_join is not None]
            self.leader_id = joined[0].member_id if joined else None
            return bool(joined)
        if leader.awaiting_join is not None:
            return True
        for m in self.members.values():
            if m.awaiting_join is not None:
                self.leader_id = m.member_id
                return True
        return False

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(
            m.awaiting_join is not None for m in self.members.values())

    # --- protocols --------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """Protocol names every member supports."""
        members = iter(self.members.values())
        first = next(members, None)
        if first is None:
            return set()
        names = set(first.protocol_names)
        for m in members:
            names &= set(m.protocol_names)
        return names

    def protocol_error(self, protocol_type: str, protocols: list[tuple[str, bytes]],
                       member_id: str | None = None) -> ErrorCode:
        """INCONSISTENT_GROUP_PROTOCOL unless a member with these protocols fits the group.

        ``member_id`` is left out of the "every member supports" set: a member changing its own
        protocols is judged against the others only.
        """
        if not protocol_type or not protocols:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        others = [m for mid, m in self.members.items() if mid != member_id]
        if not others:
            return ErrorCode.NONE
        if protocol_type != self.protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        common = set(others[0].protocol_names)
        for m in others[1:]:
            common &= set(m.protocol_names)
        if not any(name in common for name, _ in protocols):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return ErrorCode.NONE

    def select_protocol(self) -> str:
        """Each member votes for its first choice among the common protocols; most votes wins.

        Ties go to the protocol the leader prefers, so the choice is deterministic.
        """
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id!r}: members share no protocol")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        leader = self.members.get(self.leader_id or "")
        order = leader.protocol_names if leader else sorted(candidates)
        for name in order:
            if votes.get(name) == best:
                return name
        return sorted(n for n, v in votes.items() if v == best)[0]

    def current_join_result(self, member_id: str, *, with_members: bool | None = None,
                            skip_assignment: bool = False) -> JoinResult:
        """The current generation as ``member_id`` should see it (the member list only for the
        leader, unless ``with_members`` says otherwise)."""
        protocol = self.protocol_name or ""
        if with_members is None:
            with_members = member_id == self.leader_id
        members: list[tuple[str, str | None, bytes]] = []
        if with_members:
            members = [(m.member_id, m.group_instance_id, m.metadata(protocol))
                       for m in self.members.values()]
        return JoinResult(ErrorCode.NONE, member_id=member_id, generation_id=self.generation_id,
                          protocol_type=self.protocol_type, protocol_name=self.protocol_name,
                          leader_id=self.leader_id or "", members=members,
                          skip_assignment=skip_assignment)

    # --- subscriptions (OffsetDelete) -------------------------------------------------------

    @property
    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == "consumer"

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """Kafka's ``computeSubscribedTopics``: the topics of every member's subscription to
        the chosen protocol, read as ConsumerProtocolSubscription v0 (the prefix of all)."""
        if not self.uses_consumer_protocol:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics.update(decode_subscription(m.metadata(self.protocol_name)).topics)
        except (PayloadError, KeyError):
            return None
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        """Whether OffsetDelete must refuse ``topic`` (GROUP_SUBSCRIBED_TO_TOPIC). Unknown
        subscriptions count as subscribed for a group using the consumer protocol."""
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol
        return topic in self.subscribed_topics
