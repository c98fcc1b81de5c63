"""Group membership (Kafka's ``GroupMetadataManager`` for classic groups): JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, DescribeGroups, ListGroups, and the rebalance state machine behind them.

Why it is shaped like this: every membership operation is synchronous and runs to completion on
the event loop, so no group is ever seen half-updated and no lock is needed. Requests whose answer
must wait (JoinGroup until the join phase ends, SyncGroup until the leader's assignment) hand in
a callback and are answered later; the API handler that called is free at once. Timers (session,
pending member, join phase, sync phase) are keyed deadlines on Trio's clock in the coordinator's
one ``DeadlineQueue``.

The transitions follow Kafka's classic group coordinator; ``states.VALID_PREVIOUS_STATES`` is the
table every transition is checked against. Committed offsets are the ``OffsetMetadataManager``'s
(``offsets.py``); it reads membership through this manager to validate commits.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

import attrs
import trio

from ..config import BrokerConfig
from ..protocol.errors import ErrorCode
from .group import Group, JoinCallback, JoinResult, Member, SyncCallback, SyncResult
from .states import GroupState
from .timers import DeadlineQueue

LOGGER = logging.getLogger(__name__)

_S = GroupState


@attrs.frozen
class MemberSummary:
    member_id: str
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@attrs.frozen
class GroupSummary:
    """What DescribeGroups reports (metadata and assignments only for a Stable group)."""

    group_id: str
    state: GroupState
    protocol_type: str
    protocol_name: str
    members: list[MemberSummary]


class GroupMetadataManager:
    """The groups of one coordinator, their members and their rebalances.

    ``loaded`` is False until the coordinator has loaded its offsets and again once it begins
    shutting down; until then every request is answered with ``not_ready_error``.
    """

    def __init__(self, config: BrokerConfig, timers: DeadlineQueue,
                 wall_clock_ms: Callable[[], int]) -> None:
        self.config = config
        self.groups: dict[str, Group] = {}
        self._timers = timers
        self._wall_ms = wall_clock_ms
        self.loaded = False
        self.closed = False

    @property
    def not_ready_error(self) -> ErrorCode:
        """The answer while not serving: still loading, or closed for shutdown."""
        return (ErrorCode.COORDINATOR_NOT_AVAILABLE if self.closed
                else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)

    def begin_shutdown(self) -> None:
        """Refuse new requests and answer every held JoinGroup/SyncGroup at once.

        A held join can otherwise wait minutes (the rebalance timeout) and keep a graceful
        shutdown waiting for it; COORDINATOR_NOT_AVAILABLE sends the client to find the
        coordinator again, which is what it must do when this broker comes back.
        """
        self.loaded = False
        self.closed = True
        for group in self.groups.values():
            for member in group.members.values():
                callback, member.awaiting_join = member.awaiting_join, None
                if callback is not None:
                    callback(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member.member_id))
                self._answer_sync(group, member,
                                  SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))

    # --- JoinGroup --------------------------------------------------------------------------

    def join_group(self, *, group_id: str, member_id: str, client_id: str, client_host: str,
                   session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], require_known_member_id: bool,
                   respond: JoinCallback) -> None:
        """Answer through ``respond``, now or when the join phase completes."""
        cfg = self.config
        if not self.loaded:
            return respond(JoinResult(self.not_ready_error, member_id))
        if not group_id:
            return respond(JoinResult(ErrorCode.INVALID_GROUP_ID, member_id))
        if not (cfg.group_min_session_timeout_ms <= session_timeout_ms
                <= cfg.group_max_session_timeout_ms):
            return respond(JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id))
        if rebalance_timeout_ms < 0:  # JoinGroup v0 has no rebalance timeout: Kafka uses session
            rebalance_timeout_ms = session_timeout_ms
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return respond(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
            if not protocol_type or not protocols:
                return respond(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            group = self.new_group(group_id)
        error = group.protocol_error(protocol_type, protocols, member_id or None)
        if error:
            return respond(JoinResult(error, member_id))
        args: dict[str, Any] = {
            "client_id": client_id, "client_host": client_host,
            "session_timeout_ms": session_timeout_ms,
            "rebalance_timeout_ms": rebalance_timeout_ms, "protocol_type": protocol_type,
            "protocols": protocols}
        if not member_id:
            if group.size >= cfg.group_max_size:
                return respond(JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id))
            new_id = f"{client_id}-{uuid.uuid4()}"
            if require_known_member_id:
                group.pending_members.add(new_id)
                self._timers.schedule(("pending", group_id, new_id),
                                      trio.current_time() + session_timeout_ms / 1000,
                                      lambda: self.expire_pending_member(group, new_id))
                return respond(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id))
            return self._add_member_and_rebalance(group, Member(new_id, **args), respond)
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._timers.cancel(("pending", group_id, member_id))
            return self._add_member_and_rebalance(group, Member(member_id, **args), respond)
        member = group.members.get(member_id)
        if member is None:
            return respond(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
        state = group.state
        if state is _S.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, args, respond)
        if state is _S.COMPLETING_REBALANCE:
            if member.matches(protocols):  # a lost join response: send the same one again
                return respond(group.current_join_result(member_id))
            return self._update_member_and_rebalance(group, member, args, respond)
        if state is _S.STABLE:
            if member_id == group.leader_id or not member.matches(protocols):
                return self._update_member_and_rebalance(group, member, args, respond)
            return respond(group.current_join_result(member_id))
        return respond(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def new_group(self, group_id: str) -> Group:
        group = Group(group_id, state_since_ms=self._wall_ms())
        self.groups[group_id] = group
        return group

    def _add_member_and_rebalance(self, group: Group, member: Member,
                                  respond: JoinCallback) -> None:
        member.awaiting_join = respond
        group.add_member(member)
        if group.initial_delay_active:
            group.initial_delay_new_member = True
        LOGGER.info("group %s: member %s (%s) joins", group.group_id, member.member_id,
                    member.client_host)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} joined")
        self._try_complete_join(group)

    def _update_member_and_rebalance(self, group: Group, member: Member, args: dict[str, Any],
                                     respond: JoinCallback) -> None:
        if member.awaiting_join is not None:  # a retried join from a new connection
            old, member.awaiting_join = member.awaiting_join, None
            old(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        for name, value in args.items():
            setattr(member, name, value)
        member.awaiting_join = respond
        self._cancel_session(group, member)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")
        self._try_complete_join(group)

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_in(_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_in(_S.COMPLETING_REBALANCE):
            # Held SyncGroups of the abandoned generation: tell them to rejoin.
            for m in group.members.values():
                m.assignment = b""
                if m.awaiting_sync is not None:
                    self._answer_sync(group, m, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
                    self.schedule_session(group, m)
        self._timers.cancel(("sync", group.group_id))
        group.pending_sync.clear()
        initial_delay_ms = self.config.group_initial_rebalance_delay_ms
        rebalance_ms = group.rebalance_timeout_ms
        if group.is_in(_S.EMPTY) and initial_delay_ms > 0:
            delay_ms = min(initial_delay_ms, rebalance_ms)
            group.initial_delay_active = True
            group.initial_delay_new_member = False
            group.initial_delay_remaining_ms = max(rebalance_ms - delay_ms, 0)
            self._timers.schedule(("join", group.group_id),
                                  trio.current_time() + delay_ms / 1000,
                                  lambda: self._on_initial_delay_expired(group))
        else:
            self._timers.schedule(("join", group.group_id),
                                  trio.current_time() + rebalance_ms / 1000,
                                  lambda: self._on_join_deadline(group))
        group.transition_to(_S.PREPARING_REBALANCE, self._wall_ms())
        LOGGER.info("group %s: preparing to rebalance generation %d (%s)", group.group_id,
                    group.generation_id, reason)
        self._try_complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if (group.is_in(_S.PREPARING_REBALANCE) and not group.initial_delay_active
                and group.has_all_members_joined()):
            self._complete_join(group)

    def _on_initial_delay_expired(self, group: Group) -> None:
        if self.groups.get(group.group_id) is not group or not group.initial_delay_active:
            return
        if group.initial_delay_new_member and group.initial_delay_remaining_ms > 0:
            # Members are still arriving: wait another delay, within the rebalance timeout.
            delay_ms = min(self.config.group_initial_rebalance_delay_ms,
                           group.initial_delay_remaining_ms)
            group.initial_delay_remaining_ms -= delay_ms
            group.initial_delay_new_member = False
            self._timers.schedule(("join", group.group_id),
                                  trio.current_time() + delay_ms / 1000,
                                  lambda: self._on_initial_delay_expired(group))
            return
        group.initial_delay_active = False
        self._complete_join(group)

    def _on_join_deadline(self, group: Group) -> None:
        if self.groups.get(group.group_id) is group and group.is_in(_S.PREPARING_REBALANCE):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """End the join phase: drop members that did not rejoin, start the next generation."""
        self._timers.cancel(("join", group.group_id))
        group.initial_delay_active = False
        for m in group.not_yet_rejoined():
            LOGGER.info("group %s: member %s did not rejoin within the rebalance timeout",
                        group.group_id, m.member_id)
            self._remove_member(group, m)
        group.generation_id += 1
        now_ms = self._wall_ms()
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition_to(_S.EMPTY, now_ms)
            LOGGER.info("group %s: empty at generation %d", group.group_id, group.generation_id)
            return
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.protocol_name = group.select_protocol()
        group.transition_to(_S.COMPLETING_REBALANCE, now_ms)
        group.pending_sync = set(group.members)
        generation = group.generation_id
        self._timers.schedule(("sync", group.group_id),
                              trio.current_time() + group.rebalance_timeout_ms / 1000,
                              lambda: self._on_sync_deadline(group, generation))
        LOGGER.info("group %s: generation %d with %d members, protocol %s, leader %s",
                    group.group_id, generation, len(group.members), group.protocol_name,
                    group.leader_id)
        for m in list(group.members.values()):
            callback, m.awaiting_join = m.awaiting_join, None
            self.schedule_session(group, m)
            if callback is not None:
                callback(group.current_join_result(m.member_id))

    def _on_sync_deadline(self, group: Group, generation: int) -> None:
        """Members that never sent SyncGroup for this generation are dropped (Kafka 2.8+)."""
        if (self.groups.get(group.group_id) is not group or group.generation_id != generation
                or not group.is_in(_S.COMPLETING_REBALANCE, _S.STABLE) or not group.pending_sync):
            return
        for member_id in list(group.pending_sync):
            member = group.members.get(member_id)
            if member is not None:
                LOGGER.info("group %s: member %s sent no SyncGroup within the rebalance timeout",
                            group.group_id, member_id)
                self._remove_member(group, member)
        self._prepare_rebalance(group, "members missed the sync phase")

    # --- SyncGroup --------------------------------------------------------------------------

    def sync_group(self, *, group_id: str, generation_id: int, member_id: str,
                   assignments: list[tuple[str, bytes]], respond: SyncCallback) -> None:
        """Answer through ``respond``, now or when the leader's assignment arrives."""
        if not self.loaded:
            return respond(SyncResult(self.not_ready_error))
        if not group_id:
            return respond(SyncResult(ErrorCode.INVALID_GROUP_ID))
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None:
            return respond(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if generation_id != group.generation_id:
            return respond(SyncResult(ErrorCode.ILLEGAL_GENERATION))
        if group.is_in(_S.PREPARING_REBALANCE):
            return respond(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        if group.is_in(_S.STABLE):
            self._synced(group, member_id)
            self.schedule_session(group, member)
            return respond(SyncResult(ErrorCode.NONE, member.assignment))
        if not group.is_in(_S.COMPLETING_REBALANCE):
            return respond(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        self._answer_sync(group, member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = respond
        self._cancel_session(group, member)
        self._synced(group, member_id)
        if member_id != group.leader_id:
            return None
        given = dict(assignments)
        for m in group.members.values():
            m.assignment = given.get(m.member_id, b"")
        group.transition_to(_S.STABLE, self._wall_ms())
        LOGGER.info("group %s: stable at generation %d", group.group_id, group.generation_id)
        for m in list(group.members.values()):
            if m.awaiting_sync is not None:
                self._answer_sync(group, m, SyncResult(ErrorCode.NONE, m.assignment))
                self.schedule_session(group, m)
        return None

    def _synced(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._timers.cancel(("sync", group.group_id))

    @staticmethod
    def _answer_sync(group: Group, member: Member, result: SyncResult) -> None:
        callback, member.awaiting_sync = member.awaiting_sync, None
        if callback is not None:
            callback(result)

    # --- Heartbeat, LeaveGroup, expiry ------------------------------------------------------

    def heartbeat(self, *, group_id: str, generation_id: int, member_id: str) -> ErrorCode:
        if not self.loaded:
            return self.not_ready_error
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        self.schedule_session(group, member)
        if group.is_in(_S.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(self, *, group_id: str, member_id: str) -> ErrorCode:
        if not self.loaded:
            return self.not_ready_error
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_id in group.pending_members:
            self.expire_pending_member(group, member_id)
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        LOGGER.info("group %s: member %s leaves", group_id, member_id)
        self._remove_member_and_update_group(group, member)
        return ErrorCode.NONE

    def schedule_session(self, group: Group, member: Member) -> None:
        self._timers.schedule(("session", group.group_id, member.member_id),
                              trio.current_time() + member.session_timeout_ms / 1000,
                              lambda: self._on_session_expired(group, member))

    def _cancel_session(self, group: Group, member: Member) -> None:
        self._timers.cancel(("session", group.group_id, member.member_id))

    def _on_session_expired(self, group: Group, member: Member) -> None:
        if (self.groups.get(group.group_id) is not group
                or group.members.get(member.member_id) is not member):
            return
        if member.awaiting_join is not None or member.awaiting_sync is not None:
            return  # held in a join or sync: the phase deadline governs it
        LOGGER.info("group %s: member %s session timed out after %d ms", group.group_id,
                    member.member_id, member.session_timeout_ms)
        self._remove_member_and_update_group(group, member)

    def expire_pending_member(self, group: Group, member_id: str) -> None:
        self._timers.cancel(("pending", group.group_id, member_id))
        if member_id not in group.pending_members:
            return
        group.pending_members.discard(member_id)
        self._try_complete_join(group)

    def _remove_member(self, group: Group, member: Member) -> None:
        """Take ``member`` out of ``group``; its held responses get UNKNOWN_MEMBER_ID."""
        self._cancel_session(group, member)
        group.remove_member(member.member_id)
        callback, member.awaiting_join = member.awaiting_join, None
        if callback is not None:
            callback(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        self._answer_sync(group, member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))

    def _remove_member_and_update_group(self, group: Group, member: Member) -> None:
        self._remove_member(group, member)
        if group.is_in(_S.STABLE, _S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"member {member.member_id} left")
        elif group.is_in(_S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # --- DescribeGroups, ListGroups, DeleteGroups ------------------------------------------

    def describe_group(self, group_id: str) -> GroupSummary | None:
        group = self.groups.get(group_id)
        if group is None:
            return None
        stable = group.is_in(_S.STABLE)
        protocol = (group.protocol_name or "") if stable else ""
        members = [MemberSummary(m.member_id, m.client_id, m.client_host,
                                 m.metadata(protocol) if stable else b"",
                                 m.assignment if stable else b"")
                   for m in group.members.values()]
        return GroupSummary(group.group_id, group.state, group.protocol_type or "", protocol,
                            members)

    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, protocol type) of every group, Empty ones included."""
        return [(g.group_id, g.protocol_type or "") for g in self.groups.values()]

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
        return group

    def remove_dead_group(self, group: Group, now_ms: int) -> None:
        """Offset retention's membership half: an Empty group left without offsets goes."""
        self._timers.cancel(("join", group.group_id))
        group.transition_to(_S.DEAD, now_ms)
        del self.groups[group.group_id]
