"""Group membership requests (Kafka's ``GroupMetadataManager`` for classic groups): JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, ListGroups and DeleteGroups' membership half.

Why it is shaped like this: each request is checked in Kafka's order (loaded, group id, session
bounds, group size, protocols, member and instance ids, generation, state) and then hands the
group to the state machine it inherits (``rebalance.RebalanceEngine``), which is the only code
that changes a group's state. Everything is synchronous on the event loop; requests whose answer
must wait (JoinGroup until the join phase ends, SyncGroup until the leader's assignment) hand in
a callback and are answered later.

Static membership (KIP-345, ``group.instance.id``): a member joining with an instance id gets a
member id ``<instance id>-<uuid>`` at once (no MEMBER_ID_REQUIRED round trip). When that instance
id already belongs to a member, the newcomer *replaces* it: the old member id is fenced (its held
requests and every later request with it get FENCED_INSTANCE_ID), and in a Stable group whose
chosen protocol would not change the newcomer simply takes over the old member's assignment in
the current generation, without a rebalance. Committed offsets are in ``offsets.py``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from typing import NamedTuple

import attrs
import trio

from ...protocol.errors import ErrorCode
from .consumer_group import ConsumerGroupState
from .group import Group, JoinCallback, JoinResult, Member, SyncCallback, SyncResult
from .group_store import classic_group_record, delete_group_record
from .rebalance import RebalanceEngine
from .states import GroupState

LOGGER = logging.getLogger(__name__)

_S = GroupState

#: ListGroups v5 group type of every group this coordinator runs
CLASSIC_GROUP_TYPE = "classic"


class MemberSummary(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


class GroupSummary(NamedTuple):
    """What DescribeGroups reports (metadata and assignments only for a Stable group)."""

    group_id: str
    state: GroupState
    protocol_type: str
    protocol_name: str
    members: list[MemberSummary]


class ListedGroup(NamedTuple):
    group_id: str
    protocol_type: str
    #: a classic or a consumer (KIP-848) group's state; ``str()`` is Kafka's name
    state: GroupState | ConsumerGroupState
    group_type: str = CLASSIC_GROUP_TYPE


class LeavingMember(NamedTuple):
    """One entry of a LeaveGroup request (v3+ batches them; v0-2 name one member id)."""

    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


class JoinRequest(NamedTuple):
    """A JoinGroup request as the coordinator needs it."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    #: -1 (JoinGroup v0): the session timeout is used, as Kafka does
    rebalance_timeout_ms: int
    protocol_type: str
    #: (name, metadata) in the member's order of preference
    protocols: list[tuple[str, bytes]]
    #: JoinGroup v4+: a dynamic member first gets its id through MEMBER_ID_REQUIRED
    require_known_member_id: bool = True
    #: JoinGroup v9+: a static leader rejoining a Stable group is told to skip the assignment
    supports_skip_assignment: bool = False
    reason: str | None = None


class GroupMetadataManager(RebalanceEngine):
    """The requests of the classic group protocol, over the rebalance state machine."""

    # --- JoinGroup --------------------------------------------------------------------------

    def join_group(self, request: JoinRequest, respond: JoinCallback) -> None:
        """Answer through ``respond``, now or when the join phase completes."""
        cfg = self.config
        r = request
        member_id = r.member_id
        if not self.loaded:
            return respond(JoinResult(self.not_ready_error, member_id))
        if not r.group_id:
            return respond(JoinResult(ErrorCode.INVALID_GROUP_ID, member_id))
        if not (cfg.group_min_session_timeout_ms <= r.session_timeout_ms
                <= cfg.group_max_session_timeout_ms):
            return respond(JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id))
        if r.rebalance_timeout_ms < 0:
            r = r._replace(rebalance_timeout_ms=r.session_timeout_ms)
        group = self.groups.get(r.group_id)
        if group is None:
            if member_id:
                return respond(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
            if not r.protocol_type or not r.protocols:
                return respond(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            group = self.new_group(r.group_id)
        if not group.accepts_joining_member(member_id, cfg.group_max_size):
            # Kafka turns the member away for good: the last to rejoin an oversized group go.
            if member_id in group.members:
                self._remove_member_and_update_group(group, group.members[member_id])
            elif member_id in group.pending_members:
                self.expire_pending_member(group, member_id)
            return respond(JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED))
        error = group.protocol_error(r.protocol_type, r.protocols, member_id or None)
        if error:
            return respond(JoinResult(error, member_id))
        if not member_id:
            return self._join_new_member(group, r, respond)
        return self._join_known_member(group, r, respond)

    def _join_new_member(self, group: Group, r: JoinRequest, respond: JoinCallback) -> None:
        new_id = f"{r.group_instance_id or r.client_id}-{uuid.uuid4()}"
        if r.group_instance_id is not None:
            existing = group.static_member_id(r.group_instance_id)
            if existing is not None:
                LOGGER.info("group %s: static member %s rejoins as %s, replacing %s",
                            group.group_id, r.group_instance_id, new_id, existing)
                return self._replace_static_member(group, r, existing, new_id, respond)
            return self._add_member_and_rebalance(group, _new_member(new_id, r), respond)
        if r.require_known_member_id:
            group.pending_members.add(new_id)
            self._timers.schedule(("pending", group.group_id, new_id),
                                  trio.current_time() + r.session_timeout_ms / 1000,
                                  lambda: self.expire_pending_member(group, new_id))
            return respond(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id))
        return self._add_member_and_rebalance(group, _new_member(new_id, r), respond)

    def _join_known_member(self, group: Group, r: JoinRequest, respond: JoinCallback) -> None:
        member_id = r.member_id
        if member_id in group.pending_members:
            if r.group_instance_id is not None:
                # Kafka: a pending member is never static; the request fails, nothing changes.
                return respond(JoinResult(ErrorCode.UNKNOWN_SERVER_ERROR, member_id))
            group.pending_members.discard(member_id)
            self._timers.cancel(("pending", group.group_id, member_id))
            return self._add_member_and_rebalance(group, _new_member(member_id, r), respond)
        error = group.validate_member(member_id, r.group_instance_id)
        if error:
            return respond(JoinResult(error, member_id))
        member = group.members[member_id]
        state = group.state
        reason = f"member {member_id} rejoined" + (f" ({r.reason})" if r.reason else "")
        if state is _S.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, r, respond, reason)
        if state is _S.COMPLETING_REBALANCE:
            if member.matches(r.protocols):  # a lost join response: send the same one again
                return respond(group.current_join_result(member_id))
            return self._update_member_and_rebalance(group, member, r, respond, reason)
        if state is _S.STABLE:
            if member_id == group.leader_id or not member.matches(r.protocols):
                return self._update_member_and_rebalance(group, member, r, respond, reason)
            return respond(group.current_join_result(member_id))
        return respond(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _update_member_and_rebalance(self, group: Group, member: Member, r: JoinRequest,
                                     respond: JoinCallback, reason: str) -> None:
        _update_member(member, r)
        self._await_rejoin(group, member, respond)
        self._maybe_prepare_rebalance(group, reason)
        self._try_complete_join(group)

    def _replace_static_member(self, group: Group, r: JoinRequest, old_id: str, new_id: str,
                               respond: JoinCallback) -> None:
        """Kafka's ``updateStaticMemberThenRebalanceOrCompleteJoin``."""
        assert r.group_instance_id is not None
        previous_leader = group.leader_id or ""
        old = group.members[old_id]
        self._cancel_session(group, old)
        callback, old.awaiting_join = old.awaiting_join, None
        if callback is not None:
            callback(JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
        self._answer_sync(group, old, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member = group.replace_static_member(r.group_instance_id, old_id, new_id)
        member.protocols = r.protocols
        member.rebalance_timeout_ms = r.rebalance_timeout_ms
        member.session_timeout_ms = r.session_timeout_ms
        self.schedule_session(group, member)
        reason = f"static member {r.group_instance_id} rejoined as {new_id}"
        if group.is_in(_S.STABLE):
            if group.protocol_name == group.select_protocol():
                # Same generation, same assignment: the newcomer syncs and carries on, once the
                # new member id is durable (else a restart would not know it).
                LOGGER.info("group %s: %s without a rebalance", group.group_id, reason)
                if r.supports_skip_assignment:
                    leader = new_id == group.leader_id
                    result = group.current_join_result(new_id, with_members=leader,
                                                       skip_assignment=leader)
                else:
                    # Before v9 a static leader must not learn it leads (it would reassign).
                    result = attrs.evolve(group.current_join_result(new_id, with_members=False),
                                          leader_id=previous_leader)
                self.store.write([classic_group_record(group)], lambda ok: respond(
                    result if ok else JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, new_id)))
                return None
            self._await_rejoin(group, member, respond)
            return self._prepare_rebalance(group, reason + " with another protocol")
        self._await_rejoin(group, member, respond)
        if group.is_in(_S.COMPLETING_REBALANCE):
            # The leader may be assigning to the old member id: start over.
            return self._prepare_rebalance(group, reason)
        return self._try_complete_join(group)

    # --- SyncGroup --------------------------------------------------------------------------

    def sync_group(self, *, group_id: str, generation_id: int, member_id: str,
                   group_instance_id: str | None = None, protocol_type: str | None = None,
                   protocol_name: str | None = None, assignments: list[tuple[str, bytes]],
                   respond: SyncCallback) -> None:
        """Answer through ``respond``, now or when the leader's assignment arrives."""
        if not self.loaded:
            return respond(SyncResult(self.not_ready_error))
        if not group_id:
            return respond(SyncResult(ErrorCode.INVALID_GROUP_ID))
        group = self.groups.get(group_id)
        if group is None or group.is_in(_S.EMPTY):
            return respond(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        error = group.validate_member(member_id, group_instance_id)
        if error:
            return respond(SyncResult(error))
        if generation_id != group.generation_id:
            return respond(SyncResult(ErrorCode.ILLEGAL_GENERATION))
        if (_inconsistent(protocol_type, group.protocol_type)
                or _inconsistent(protocol_name, group.protocol_name)):
            return respond(SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        if group.is_in(_S.PREPARING_REBALANCE):
            return respond(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member = group.members[member_id]
        if group.is_in(_S.STABLE):
            self._synced(group, member_id)
            self.schedule_session(group, member)
            return respond(SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type,
                                      group.protocol_name))
        self._answer_sync(group, member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = respond
        self._cancel_session(group, member)
        self._synced(group, member_id)
        if member_id == group.leader_id:
            self._complete_sync(group, dict(assignments))
        return None

    # --- Heartbeat, LeaveGroup --------------------------------------------------------------

    def heartbeat(self, *, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None = None) -> ErrorCode:
        if not self.loaded:
            return self.not_ready_error
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = group.validate_member(member_id, group_instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        self.schedule_session(group, group.members[member_id])
        if group.is_in(_S.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(self, group_id: str, members: Iterable[LeavingMember],
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """(group error, one error per member in request order): Kafka's classicGroupLeave.

        A member named only by its instance id (empty member id) is an admin removal.
        """
        members = list(members)
        if not self.loaded:
            return self.not_ready_error, []
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        errors = []
        left = []
        for m in members:
            error = self._leave_one(group, m)
            errors.append(error)
            if not error:
                left.append(m.member_id or m.group_instance_id or "")
        if left:
            self._members_left(group, f"members {', '.join(left)} left")
        return ErrorCode.NONE, errors

    def _leave_one(self, group: Group, m: LeavingMember) -> ErrorCode:
        reason = m.reason or "not provided"
        if not m.member_id:
            current = (group.static_member_id(m.group_instance_id)
                       if m.group_instance_id is not None else None)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            LOGGER.info("group %s: static member %s (%s) removed; reason: %s", group.group_id,
                        m.group_instance_id, current, reason)
            self._remove_member(group, group.members[current])
            return ErrorCode.NONE
        if m.member_id in group.pending_members:
            self._timers.cancel(("pending", group.group_id, m.member_id))
            group.pending_members.discard(m.member_id)
            return ErrorCode.NONE
        error = group.validate_member(m.member_id, m.group_instance_id)
        if error:
            return error
        LOGGER.info("group %s: member %s leaves; reason: %s", group.group_id, m.member_id,
                    reason)
        self._remove_member(group, group.members[m.member_id])
        return ErrorCode.NONE

    # --- DescribeGroups, ListGroups, DeleteGroups ------------------------------------------

    def describe_group(self, group_id: str) -> GroupSummary | None:
        group = self.groups.get(group_id)
        if group is None:
            return None
        stable = group.is_in(_S.STABLE)
        protocol = (group.protocol_name or "") if stable else ""
        members = [MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                 m.metadata(protocol) if stable else b"",
                                 m.assignment if stable else b"")
                   for m in group.members.values()]
        return GroupSummary(group.group_id, group.state, group.protocol_type or "", protocol,
                            members)

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = (),
                    ) -> list[ListedGroup]:
        """Every group, Empty ones included, filtered as Kafka's ListGroups v4/v5 filter:
        states case-insensitively, types case-insensitively (an unknown type matches none)."""
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and CLASSIC_GROUP_TYPE not in wanted_types:
            return []
        return [ListedGroup(g.group_id, g.protocol_type or "", g.state)
                for g in self.groups.values()
                if not wanted_states or g.state.value.lower() in wanted_states]

    def remove_empty_group(self, group_id: str) -> Group | ErrorCode:
        """DeleteGroups' membership half: drop an Empty group, or say why it cannot go."""
        if not self.loaded:
            return self.not_ready_error
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if not group.is_in(_S.EMPTY):
            return ErrorCode.NON_EMPTY_GROUP
        for member_id in list(group.pending_members):
            self.expire_pending_member(group, member_id)
        self._timers.cancel(("join", group_id))
        group.transition_to(_S.DEAD, self._wall_ms())
        del self.groups[group_id]
        self.store.write([delete_group_record(group_id)])
        return group


def _new_member(member_id: str, r: JoinRequest) -> Member:
    return Member(member_id, r.group_instance_id, r.client_id, r.client_host,
                  r.session_timeout_ms, r.rebalance_timeout_ms, r.protocol_type, r.protocols)


def _update_member(member: Member, r: JoinRequest) -> None:
    member.client_id = r.client_id
    member.client_host = r.client_host
    member.session_timeout_ms = r.session_timeout_ms
    member.rebalance_timeout_ms = r.rebalance_timeout_ms
    member.protocol_type = r.protocol_type
    member.protocols = r.protocols


def _inconsistent(requested: str | None, current: str | None) -> bool:
    """SyncGroup v5: a protocol type or name that contradicts the group's."""
    return requested is not None and current is not None and requested != current


__all__ = ["CLASSIC_GROUP_TYPE", "GroupMetadataManager", "GroupSummary", "JoinRequest",
           "LeavingMember", "ListedGroup", "MemberSummary"]
