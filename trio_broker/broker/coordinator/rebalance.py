"""The classic group's rebalance state machine (the timer-driven half of Kafka's
``GroupMetadataManager`` for classic groups): join phase, sync phase, sessions, removals.

Why apart from the request handling (``membership.py``): requests decide *whether* something
happens to a group; this module is *how* a group moves between its states when it does, and the
only place that moves it. Every step runs to completion on the event loop, so no group is seen
half-updated; held JoinGroup/SyncGroup answers are callbacks; timers (session, pending member,
join phase, sync phase) are keyed deadlines on Trio's clock in the coordinator's one
``DeadlineQueue``. Each transition is checked against ``states.VALID_PREVIOUS_STATES``.

Static members (KIP-345) differ from dynamic ones in two places, as in Kafka: the join phase
does not drop a static member that did not rejoin (its session timeout does), and a join phase
in which nobody rejoined waits another rebalance timeout instead of forming an empty generation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from .group import Group, JoinCallback, JoinResult, Member, SyncResult
from .group_store import GroupStore, classic_group_record, delete_group_record
from .states import GroupState
from .timers import DeadlineQueue

LOGGER = logging.getLogger(__name__)

_S = GroupState


class RebalanceEngine:
    """The groups of one coordinator and the transitions between their states.

    ``loaded`` is False until the coordinator has loaded its offsets and again once it begins
    shutting down; until then every request is answered with ``not_ready_error``.
    """

    def __init__(self, config: BrokerConfig, timers: DeadlineQueue,
                 wall_clock_ms: Callable[[], int], store: GroupStore) -> None:
        self.config = config
        self.groups: dict[str, Group] = {}
        #: where a generation's assignment, a replaced static member and an empty group are
        #: made durable (Kafka's GroupMetadata records)
        self.store = store
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

    def new_group(self, group_id: str) -> Group:
        group = Group(group_id, state_since_ms=self._wall_ms())
        self.groups[group_id] = group
        return group

    # --- join phase -------------------------------------------------------------------------

    def _add_member_and_rebalance(self, group: Group, member: Member,
                                  respond: JoinCallback) -> None:
        member.awaiting_join = respond
        group.add_member(member)
        if group.initial_delay_active:
            group.initial_delay_new_member = True
        LOGGER.info("group %s: member %s (%s%s) joins", group.group_id, member.member_id,
                    member.client_host, "" if member.group_instance_id is None
                    else f", instance {member.group_instance_id}")
        self._maybe_prepare_rebalance(group, f"member {member.member_id} joined")
        self._try_complete_join(group)

    def _await_rejoin(self, group: Group, member: Member, respond: JoinCallback) -> None:
        """Hold ``member``'s JoinGroup until the join phase ends (a retried join replaces the
        held one, which is told to rejoin)."""
        if member.awaiting_join is not None:  # a retried join from a new connection
            old, member.awaiting_join = member.awaiting_join, None
            old(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.awaiting_join = respond
        self._cancel_session(group, member)

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
            self._schedule_join_deadline(group)
        group.transition_to(_S.PREPARING_REBALANCE, self._wall_ms())
        LOGGER.info("group %s: preparing to rebalance generation %d (%s)", group.group_id,
                    group.generation_id, reason)
        self._try_complete_join(group)

    def _schedule_join_deadline(self, group: Group) -> None:
        self._timers.schedule(("join", group.group_id),
                              trio.current_time() + group.rebalance_timeout_ms / 1000,
                              lambda: self._on_join_deadline(group))

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
        """End the join phase: drop dynamic members that did not rejoin, start the next
        generation (or wait longer when only static members that did not rejoin remain)."""
        self._timers.cancel(("join", group.group_id))
        group.initial_delay_active = False
        for m in group.not_yet_rejoined():
            if not m.is_static:
                LOGGER.info("group %s: member %s did not rejoin within the rebalance timeout",
                            group.group_id, m.member_id)
                self._remove_member(group, m)
        if group.members and not group.elect_joined_leader():
            LOGGER.warning("group %s: no member rejoined; waiting another rebalance timeout "
                           "for the static members", group.group_id)
            self._schedule_join_deadline(group)
            return
        group.generation_id += 1
        now_ms = self._wall_ms()
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.subscribed_topics = group.compute_subscribed_topics()
            group.transition_to(_S.EMPTY, now_ms)
            LOGGER.info("group %s: empty at generation %d", group.group_id, group.generation_id)
            self.store.write([classic_group_record(group)])
            return
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
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

    # --- sync phase -------------------------------------------------------------------------

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

    def _synced(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._timers.cancel(("sync", group.group_id))

    @staticmethod
    def _answer_sync(group: Group, member: Member, result: SyncResult) -> None:
        callback, member.awaiting_sync = member.awaiting_sync, None
        if callback is not None:
            callback(result)

    def _complete_sync(self, group: Group, assignments: dict[str, bytes]) -> None:
        """The leader's assignment arrived: write it, then go Stable and answer every held
        sync (Kafka keeps the group CompletingRebalance until the record is durable)."""
        generation = group.generation_id
        wanted = {m: assignments.get(m, b"") for m in group.members}

        def durable(ok: bool) -> None:
            if (self.groups.get(group.group_id) is not group or group.generation_id != generation
                    or not group.is_in(_S.COMPLETING_REBALANCE)):
                return  # the generation moved on while the record was written
            if not ok:
                for m in list(group.members.values()):
                    self._answer_sync(group, m, SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
                    self.schedule_session(group, m)
                return self._prepare_rebalance(group, "storing the assignment failed")
            return self._assignment_stored(group, wanted)

        self.store.write([classic_group_record(group, wanted)], durable)

    def _assignment_stored(self, group: Group, assignments: dict[str, bytes]) -> None:
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        group.transition_to(_S.STABLE, self._wall_ms())
        LOGGER.info("group %s: stable at generation %d", group.group_id, group.generation_id)
        for m in list(group.members.values()):
            if m.awaiting_sync is not None:
                self._answer_sync(group, m, SyncResult(
                    ErrorCode.NONE, m.assignment, group.protocol_type, group.protocol_name))
                self.schedule_session(group, m)

    # --- sessions and removals --------------------------------------------------------------

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

    def _members_left(self, group: Group, reason: str) -> None:
        """After members left: rebalance a formed generation, or end a join phase they held."""
        if group.is_in(_S.STABLE, _S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        elif group.is_in(_S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_member_and_update_group(self, group: Group, member: Member) -> None:
        self._remove_member(group, member)
        self._members_left(group, f"member {member.member_id} left")

    # --- online migration (``migration.py``) ------------------------------------------------

    def release_group(self, group: Group) -> None:
        """The group becomes a consumer group: it leaves this registry, its held JoinGroup and
        SyncGroup answers are told to rejoin (the consumer group will serve them), its timers
        stop."""
        for member in group.members.values():
            callback, member.awaiting_join = member.awaiting_join, None
            if callback is not None:
                callback(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
            self._answer_sync(group, member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            self._cancel_session(group, member)
        for member_id in group.pending_members:
            self._timers.cancel(("pending", group.group_id, member_id))
        self._timers.cancel(("join", group.group_id))
        self._timers.cancel(("sync", group.group_id))
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    def adopt_group(self, group: Group, reason: str) -> None:
        """A consumer group became this classic group (Stable, with its members' assignments):
        register it, start the members' sessions and a rebalance, as Kafka's
        ``convertToClassicGroup``."""
        self.groups[group.group_id] = group
        for member in group.members.values():
            self.schedule_session(group, member)
        self._prepare_rebalance(group, reason)

    def remove_dead_group(self, group: Group, now_ms: int) -> None:
        """Offset retention's membership half: an Empty group left without offsets goes."""
        self._timers.cancel(("join", group.group_id))
        group.transition_to(_S.DEAD, now_ms)
        self.store.write([delete_group_record(group.group_id)])
        del self.groups[group.group_id]
