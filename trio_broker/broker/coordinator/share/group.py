"""A share group's membership (Kafka's ``ShareGroup`` and the share part of
``GroupMetadataManager``): members join with epoch 0, heartbeat with their epoch, leave with -1.

Why no reconciliation: a share group's partitions are not owned, so nothing is revoked before it
is given to another member; a member moves to the group epoch at its next heartbeat and gets its
new assignment in the same answer. The assignor is Kafka's ``SimpleAssignor`` in its homogeneous
case taken to its limit: every member gets every partition of the topics it subscribes to, and
the share-partitions (``partition.py``) decide which member gets which record.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

import attrs

from ....protocol.errors import ErrorCode

__all__ = ["HeartbeatAnswer", "ShareGroup", "ShareMember", "TopicsFn"]

#: name -> (topic id, partition count)
TopicsFn = Callable[[], Mapping[str, tuple[uuid.UUID, int]]]
#: topic id -> partitions
Assignment = dict[uuid.UUID, frozenset[int]]
LEAVE_GROUP_MEMBER_EPOCH = -1
JOIN_GROUP_MEMBER_EPOCH = 0


@attrs.define
class ShareMember:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...]
    assignment: Assignment
    #: when the member's session ends without a heartbeat (coordinator clock, seconds)
    session_deadline: float


@attrs.frozen
class HeartbeatAnswer:
    error: int = 0
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    #: None: unchanged since the member's last heartbeat
    assignment: Assignment | None = None


@attrs.define
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    members: dict[str, ShareMember] = attrs.field(factory=dict)

    @property
    def state(self) -> str:
        """Kafka's ``ShareGroupState`` names: Empty or Stable (no reconciliation to wait on)."""
        return "Stable" if self.members else "Empty"

    def heartbeat(self, *, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed: tuple[str, ...] | None, client_id: str, client_host: str,
                  topics: TopicsFn, now: float, session_s: float,
                  max_size: int) -> HeartbeatAnswer:
        """Kafka's ``shareGroupHeartbeat`` after its request checks (``check_request``)."""
        member = self.members.get(member_id)
        if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if member is None:
                return HeartbeatAnswer(ErrorCode.UNKNOWN_MEMBER_ID,
                                       f"Member {member_id} is not a member of group "
                                       f"{self.group_id}.")
            self.remove(member_id)
            return HeartbeatAnswer(member_id=member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH)
        if member is None:
            if member_epoch != JOIN_GROUP_MEMBER_EPOCH:
                return HeartbeatAnswer(ErrorCode.UNKNOWN_MEMBER_ID,
                                       f"Member {member_id} is not a member of group "
                                       f"{self.group_id}.")
            if len(self.members) >= max_size:
                return HeartbeatAnswer(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                       f"The share group has reached its maximum capacity of "
                                       f"{max_size} members.")
            member = ShareMember(member_id, 0, client_id, client_host, rack_id,
                                 subscribed or (), {}, now + session_s)
            self.members[member_id] = member
            self.group_epoch += 1
        elif member_epoch not in (member.member_epoch, JOIN_GROUP_MEMBER_EPOCH):
            return HeartbeatAnswer(ErrorCode.FENCED_MEMBER_EPOCH,
                                   f"The share group member has a smaller member epoch "
                                   f"({member_epoch}) than the one known by the group "
                                   f"coordinator ({member.member_epoch}). The member must "
                                   f"abandon all its partitions and rejoin.")
        member.session_deadline = now + session_s
        if rack_id is not None:
            member.rack_id = rack_id
        if subscribed is not None and tuple(subscribed) != member.subscribed_topic_names:
            member.subscribed_topic_names = tuple(subscribed)
            self.group_epoch += 1
        target = _assign(member.subscribed_topic_names, topics())
        changed = (target != member.assignment or member_epoch == JOIN_GROUP_MEMBER_EPOCH
                   or member.member_epoch != self.group_epoch)
        if target != member.assignment and member.member_epoch == self.group_epoch:
            self.group_epoch += 1  # topics or partitions appeared: a new target assignment
        member.assignment = target
        member.member_epoch = self.group_epoch
        return HeartbeatAnswer(member_id=member_id, member_epoch=member.member_epoch,
                               assignment=target if changed else None)

    def remove(self, member_id: str) -> ShareMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.group_epoch += 1
        return member

    def expired(self, now: float) -> list[str]:
        return [m.member_id for m in self.members.values() if m.session_deadline <= now]

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}


def _assign(subscribed: tuple[str, ...],
            topics: Mapping[str, tuple[uuid.UUID, int]]) -> Assignment:
    return {topics[name][0]: frozenset(range(topics[name][1]))
            for name in subscribed if name in topics and topics[name][1] > 0}
