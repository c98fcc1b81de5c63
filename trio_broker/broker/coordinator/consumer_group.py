"""One KIP-848 consumer group and its members (Kafka's ``ConsumerGroup``, ``ConsumerGroupMember``).

Why plain data with derived counts: the consumer protocol's coordinator is a reconciliation
engine over three views of every member, and each must be cheap to consult on every heartbeat:

    subscription   what the member asked for (topic names and/or a regular expression)
    target         what the assignor computed for it at the group's assignment epoch
    current        what it owns now (``assigned``), what it must give up first
                   (``pending_revocation``), its member epoch and its reconciliation state

The group keeps the counts Kafka keeps (members per subscribed topic, per regex, per server
assignor) and the owner epoch of every assigned partition, so "is this partition still owned by
someone else" is one dict look-up. ``update_member`` and ``remove_member`` are the only ways to
change members, and they keep every count in step.

Epochs: the *group epoch* moves when the subscriptions or the subscribed topics' metadata
change; the *assignment epoch* is the group epoch the target assignment was computed at; a
member's epoch reaches the assignment epoch once it has revoked what it had to. The group's
state follows (Kafka's ``maybeUpdateGroupState``)::

    Empty        no members
    Assigning    group epoch > assignment epoch (a new target is due)
    Reconciling  some member is not yet Stable at the assignment epoch
    Stable       every member owns exactly its target at the assignment epoch
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

import attrs

from ...protocol.errors import ErrorCode
from .offset_log import OffsetAndMetadata, TopicPartition

#: topic id -> partitions; treated as immutable once built
Assignment = Mapping[uuid.UUID, frozenset[int]]
EMPTY_ASSIGNMENT: Assignment = {}

#: ConsumerGroupHeartbeat member epochs with a meaning of their own
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

#: ListGroups v5 type and protocol type of every consumer group
CONSUMER_GROUP_TYPE = "consumer"

#: a group's own config (the GROUP config resource, type 32): (group id, key) -> its value, or
#: None where the group has none and the broker's key applies
GroupSetting = Callable[[str, str], "str | None"]


def no_group_setting(group_id: str, key: str) -> str | None:
    return None


class MemberState(enum.Enum):
    """A member's reconciliation state (Kafka's ``MemberState``, with its stored values)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    """Kafka's names, as ConsumerGroupDescribe and ListGroups report them."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


def assignment_of(pairs: Iterable[tuple[uuid.UUID, Iterable[int]]]) -> Assignment:
    """An assignment from (topic id, partitions) pairs, empty topics dropped."""
    out: dict[uuid.UUID, frozenset[int]] = {}
    for topic_id, partitions in pairs:
        parts = out.get(topic_id, frozenset()) | frozenset(partitions)
        if parts:
            out[topic_id] = parts
    return out


def assignment_size(assignment: Assignment) -> int:
    return sum(len(p) for p in assignment.values())


@attrs.frozen
class ClassicMemberMetadata:
    """A member of a consumer group that speaks the classic protocol (JoinGroup, SyncGroup,
    Heartbeat), as Kafka's ``ClassicMemberMetadata``: its session timeout and the protocols it
    joined with, in its order of preference (the first is the one it is answered with)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        return self.protocols[0][0]

    @property
    def subscription(self) -> bytes:
        return self.protocols[0][1]


class ResolvedRegex(NamedTuple):
    """The topics a subscribed regular expression matched, and when it was resolved."""

    topics: frozenset[str]
    #: the coordinator's topic-change counter at resolution (Kafka: the metadata image version)
    version: int = -1
    timestamp_ms: int = -1


@attrs.frozen
class ConsumerGroupMember:
    """One member, immutable: every change is ``attrs.evolve`` (Kafka's ``Builder``)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    #: "" when the member subscribes by names only
    subscribed_topic_regex: str = ""
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = attrs.field(factory=dict)
    pending_revocation: Assignment = attrs.field(factory=dict)
    #: set for a member that speaks the classic protocol (online migration, KIP-848)
    classic: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def with_member_epoch(self, epoch: int, *, state: MemberState, assigned: Assignment,
                          pending_revocation: Assignment) -> ConsumerGroupMember:
        """Kafka's ``updateMemberEpoch``: the current epoch becomes the previous one."""
        return attrs.evolve(self, member_epoch=epoch, previous_member_epoch=self.member_epoch,
                            state=state, assigned=assigned,
                            pending_revocation=pending_revocation)


class ConsumerGroup:
    """A consumer-protocol group: members, target assignment, epochs and the derived counts."""

    group_type = CONSUMER_GROUP_TYPE
    protocol_type = CONSUMER_GROUP_TYPE
    uses_consumer_protocol = True

    def __init__(self, group_id: str, now_ms: int = 0) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        #: instance id -> member id of every static member
        self.static_members: dict[str, str] = {}
        #: member id -> its target assignment at ``assignment_epoch``
        self.target_assignment: dict[str, Assignment] = {}
        self.resolved_regexes: dict[str, ResolvedRegex] = {}
        #: name -> (topic id, partitions) of every subscribed topic at the last epoch bump
        #: (Kafka's metadata hash, kept as the data it hashes)
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        #: a subscribed topic changed since: the next heartbeat recomputes the metadata
        self.metadata_expired = False
        #: the last regular-expression resolution (wall-clock ms) and its topic version
        self.regex_refreshed_ms = -1
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        self.inflight_writes = 0
        #: wall-clock ms when the group last became empty (offset retention counts from it)
        self.state_since_ms = now_ms
        #: (topic id, partition) -> (member id, member epoch) of its current owner
        self._partition_owners: dict[tuple[uuid.UUID, int], tuple[str, int]] = {}
        self._by_name: Counter[str] = Counter()
        self._by_regex: Counter[str] = Counter()
        self._assignors: Counter[str] = Counter()
        #: members speaking the classic protocol, and how many of them support each protocol
        self.num_classic_members = 0
        self._classic_protocols: Counter[str] = Counter()

    # --- members ----------------------------------------------------------------------------

    def update_member(self, new: ConsumerGroupMember) -> None:
        """Add or replace a member, keeping every count and partition epoch in step."""
        old = self.members.get(new.member_id)
        self._forget(old)
        self.members[new.member_id] = new
        self._by_name.update(new.subscribed_topic_names)
        if new.subscribed_topic_regex:
            self._by_regex[new.subscribed_topic_regex] += 1
        if new.server_assignor is not None:
            self._assignors[new.server_assignor] += 1
        if new.classic is not None:
            self.num_classic_members += 1
            self._classic_protocols.update({name for name, _ in new.classic.protocols})
        owner = (new.member_id, new.member_epoch)
        for assignment in (new.assigned, new.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    held = self._partition_owners.setdefault((topic_id, p), owner)
                    if held != owner:  # a coordinator bug, never a client's doing
                        raise ValueError(f"group {self.group_id}: partition {topic_id}-{p} is "
                                         f"still owned by {held[0]} at epoch {held[1]}")
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id

    def remove_member(self, member_id: str, now_ms: int | None = None,
                      ) -> ConsumerGroupMember | None:
        old = self.members.pop(member_id, None)
        self._forget(old)
        if old is not None and old.instance_id is not None and (
                self.static_members.get(old.instance_id) == member_id):
            del self.static_members[old.instance_id]
        if old is not None and not self.members and now_ms is not None:
            self.state_since_ms = now_ms
        return old

    def _forget(self, old: ConsumerGroupMember | None) -> None:
        if old is None:
            return
        self._by_name.subtract(old.subscribed_topic_names)
        self._by_name = +self._by_name
        if old.subscribed_topic_regex:
            self._by_regex[old.subscribed_topic_regex] -= 1
            self._by_regex = +self._by_regex
        if old.server_assignor is not None:
            self._assignors[old.server_assignor] -= 1
            self._assignors = +self._assignors
        if old.classic is not None:
            self.num_classic_members -= 1
            self._classic_protocols.subtract({name for name, _ in old.classic.protocols})
            self._classic_protocols = +self._classic_protocols
        owners = self._partition_owners
        for assignment in (old.assigned, old.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    held = owners.get((topic_id, p))
                    if held is not None and held[0] == old.member_id:
                        del owners[(topic_id, p)]

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the partition's current owner, -1 when nobody owns it."""
        held = self._partition_owners.get((topic_id, partition))
        return -1 if held is None else held[1]

    def partition_owner(self, topic_id: uuid.UUID, partition: int) -> str | None:
        held = self._partition_owners.get((topic_id, partition))
        return None if held is None else held[0]

    def target_of(self, member_id: str, instance_id: str | None) -> Assignment:
        """A member's target; a static member takes over its instance's previous target."""
        if instance_id is not None:
            previous = self.static_members.get(instance_id)
            if previous is not None:
                return self.target_assignment.get(previous, EMPTY_ASSIGNMENT)
            return EMPTY_ASSIGNMENT
        return self.target_assignment.get(member_id, EMPTY_ASSIGNMENT)

    # --- classic members (online migration) ------------------------------------------------

    def supports_classic_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Kafka's ``supportsClassicProtocols``: a classic member may join when it speaks the
        consumer protocol type and one protocol every classic member already supports."""
        if protocol_type != CONSUMER_GROUP_TYPE:
            return False
        names = set(names)
        if not self.members:
            return bool(names)
        return any(self._classic_protocols.get(name, 0) == self.num_classic_members
                   for name in names)

    def all_members_use_classic_protocol_except(self, member_id: str) -> bool:
        """Whether ``member_id`` is the one member left that speaks the consumer protocol."""
        member = self.members.get(member_id)
        return (member is not None and not member.uses_classic_protocol
                and self.num_classic_members == len(self.members) - 1)

    def waiting_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        """Whether a target partition ``member`` still lacks is owned by another member."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, partitions in self.target_assignment.get(member.member_id, {}).items():
            assigned = member.assigned.get(topic_id, frozenset())
            if any(p not in assigned and self.current_partition_epoch(topic_id, p) != -1
                   for p in partitions):
                return True
        return False

    # --- subscriptions ----------------------------------------------------------------------

    @property
    def subscribed_regexes(self) -> Mapping[str, int]:
        """Regular expression -> members subscribed to it."""
        return self._by_regex

    def num_subscribed_members(self, regex: str) -> int:
        return self._by_regex.get(regex, 0)

    def member_topics(self, member: ConsumerGroupMember) -> frozenset[str]:
        """The topic names a member subscribes to: its names and what its regex resolved to."""
        names = member.subscribed_topic_names
        if member.subscribed_topic_regex:
            resolved = self.resolved_regexes.get(member.subscribed_topic_regex)
            if resolved is not None:
                names = names | resolved.topics
        return names

    def subscribed_topics(self) -> frozenset[str]:
        """Every topic some member subscribes to, by name or through a resolved regex."""
        topics = set(self._by_name)
        for regex in self._by_regex:
            resolved = self.resolved_regexes.get(regex)
            if resolved is not None:
                topics |= resolved.topics
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        """Whether OffsetDelete must refuse ``topic`` (GROUP_SUBSCRIBED_TO_TOPIC)."""
        return topic in self.subscribed_topics()

    def preferred_assignor(self) -> str | None:
        """The server assignor most members ask for (None: none asked, the default applies)."""
        if not self._assignors:
            return None
        best = max(self._assignors.values())
        return min(name for name, count in self._assignors.items() if count == best)

    # --- state ------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def is_empty(self) -> bool:
        return not self.members

    # --- offsets (Kafka's ConsumerGroup.validateOffsetCommit / validateOffsetFetch) ---------

    def validate_offset_commit(self, member_id: str, member_epoch: int,
                               api_version: int) -> ErrorCode:
        """An OffsetCommit's member and epoch; an admin commit (-1) needs an empty group."""
        if member_epoch < 0 and not self.members:
            return ErrorCode.NONE
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if api_version < 9 and not member.uses_classic_protocol:
            return ErrorCode.UNSUPPORTED_VERSION  # consumer-protocol members commit with v9+
        return _epoch_error(member, member_epoch)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        """OffsetFetch v9+: a member fetching its offsets must be current."""
        if member_id is None and member_epoch < 0:
            return ErrorCode.NONE
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return _epoch_error(member, member_epoch)


def _epoch_error(member: ConsumerGroupMember, epoch: int) -> ErrorCode:
    """Kafka's ``validateMemberEpoch``: a classic member's generation is its member epoch."""
    if epoch == member.member_epoch:
        return ErrorCode.NONE
    return (ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol
            else ErrorCode.STALE_MEMBER_EPOCH)


__all__ = ["CONSUMER_GROUP_TYPE", "EMPTY_ASSIGNMENT", "LEAVE_GROUP_MEMBER_EPOCH",
           "LEAVE_GROUP_STATIC_MEMBER_EPOCH", "Assignment", "ClassicMemberMetadata",
           "ConsumerGroup", "ConsumerGroupMember", "ConsumerGroupState", "GroupSetting",
           "MemberState", "ResolvedRegex", "assignment_of", "assignment_size", "no_group_setting"]
