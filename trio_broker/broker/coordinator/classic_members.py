"""Classic-protocol members inside a consumer group: Kafka's ``classicGroup*ToConsumerGroup``,
and the downgrade back to a classic group (``migration.py`` has the policy and conversions).

Why the consumer group serves them: during a rolling upgrade one group holds members of both
protocols, and only one side can decide who owns what. That is the server-side assignor; a
classic member learns its share the classic way, with nothing to assign itself:

    JoinGroup   updates the member as a heartbeat would (its subscription and owned partitions
                come from its embedded ConsumerProtocolSubscription), reconciles it and answers
                at once: the generation is its member epoch, no leader, no member list
    SyncGroup   answers the partitions it owns now (a revocation first shrinks them; what it
                gains comes at a later join, once the previous owner released it)
    Heartbeat   REBALANCE_IN_PROGRESS when the group moved past its epoch, when it must revoke
                partitions, or when partitions it waits for have been released: it rejoins,
                and that JoinGroup reconciles it one step further
    LeaveGroup  removes it and bumps the group epoch

Timers, as Kafka's: the session (its own ``session.timeout.ms`` from JoinGroup), the join
timeout (its rebalance timeout, from the first REBALANCE_IN_PROGRESS until it rejoins) and the
sync timeout (its rebalance timeout, from its JoinGroup answer until its SyncGroup). Classic
members have no reconciliation (rebalance) timer: the join and sync timeouts stand for it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable

from ...protocol.consumer_protocol import PayloadError, decode_subscription, encode_assignment
from ...protocol.errors import ErrorCode
from .consumer_group import (
    CONSUMER_GROUP_TYPE,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from .consumer_groups import ConsumerGroupManager, HeartbeatRequest
from .group import JoinCallback, JoinResult, SyncCallback, SyncResult
from .group_log import Record
from .group_store import classic_group_record, delete_group_record
from .membership import JoinRequest, LeavingMember
from .migration import classic_group_of, partitions_by_id, partitions_by_name
from .reconciliation import GroupError

LOGGER = logging.getLogger(__name__)


class MixedProtocolGroupManager(ConsumerGroupManager):
    """Consumer groups whose members may speak either protocol."""

    # --- JoinGroup --------------------------------------------------------------------------

    def classic_join(self, group: ConsumerGroup, r: JoinRequest, respond: JoinCallback) -> None:
        """Answer through ``respond`` once the member's change is durable."""
        try:
            result, records = self._classic_join(group, r)
        except GroupError as exc:
            return respond(JoinResult(exc.code, r.member_id))
        if result.error:
            return respond(result)
        group_id, member_id = group.group_id, result.member_id

        def durable(ok: bool) -> None:
            if not ok:
                return respond(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            self._timers.cancel(("cg-join", group_id, member_id))
            current = self.groups.get(group_id)
            if current is not None and member_id in current.members:
                self.schedule_session(group_id, member_id)
                self.schedule_sync_timeout(group_id, member_id, r.rebalance_timeout_ms)
            return respond(result)

        self.store.write(records, durable)
        return None

    def _classic_join(self, group: ConsumerGroup, r: JoinRequest,
                      ) -> tuple[JoinResult, list[Record]]:
        """Kafka's ``classicGroupJoinToConsumerGroup``, checks first."""
        unknown = not r.member_id
        member_id = r.member_id or str(uuid.uuid4())
        self._check_size(group, member_id)
        if not group.supports_classic_protocols(r.protocol_type,
                                                (name for name, _ in r.protocols)):
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                             f"Member {member_id}'s protocols are not supported.")
        if unknown and r.group_instance_id is None and r.require_known_member_id:
            LOGGER.info("group %s: a dynamic member with unknown member id joins the consumer "
                        "group; it is given id %s and asked to rejoin with it",
                        group.group_id, member_id)
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id), []
        member, replacing = self._classic_member_to_join(group, member_id, r, unknown)
        try:
            subscription = decode_subscription(r.protocols[0][1])
        except PayloadError as exc:
            LOGGER.warning("group %s: member %s sent a malformed embedded consumer protocol "
                           "subscription: %s", group.group_id, member_id, exc)
            raise GroupError(ErrorCode.UNKNOWN_SERVER_ERROR) from None
        heartbeat = HeartbeatRequest(
            group.group_id, member_id, -1, r.client_id, r.client_host,
            instance_id=r.group_instance_id, rack_id=subscription.rack_id,
            rebalance_timeout_ms=r.rebalance_timeout_ms,
            subscribed_topic_names=tuple(subscription.topics),
            owned=partitions_by_id(subscription.owned_partitions, self.topics()))
        classic = ClassicMemberMetadata(r.session_timeout_ms, tuple(r.protocols))
        records: list[Record] = []
        final = self.update_member(group, member, member_id, replacing, heartbeat, records,
                                   classic)
        return JoinResult(ErrorCode.NONE, member_id=member_id,
                          generation_id=final.member_epoch, protocol_type=CONSUMER_GROUP_TYPE,
                          protocol_name=classic.protocol_name), records

    def _classic_member_to_join(self, group: ConsumerGroup, member_id: str, r: JoinRequest,
                                unknown: bool,
                                ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """(the member, the static member it replaces): a static member that rejoins without
        its member id (a restart) takes over its instance."""
        if r.group_instance_id is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id), None
        existing = group.static_member(r.group_instance_id)
        if existing is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id), None
        if unknown:
            return existing, existing
        if existing.member_id != member_id:
            raise GroupError(ErrorCode.FENCED_INSTANCE_ID,
                             f"Static member {member_id} with instance id "
                             f"{r.group_instance_id} was fenced by member {existing.member_id}.")
        return existing, None

    # --- SyncGroup, Heartbeat, LeaveGroup ---------------------------------------------------

    def _classic_member(self, group: ConsumerGroup, member_id: str,
                        instance_id: str | None) -> ConsumerGroupMember:
        """Kafka's ``validateConsumerGroupMember``; a member speaking the consumer protocol is
        unknown to classic requests."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
            if member.member_id != member_id:
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
        if not member.uses_classic_protocol:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        return member

    @staticmethod
    def _static_member_id(group: ConsumerGroup, instance_id: str | None) -> str:
        """The member id of ``instance_id`` (a LeaveGroup may name only the instance: an
        administrative removal); "" when unknown."""
        member = None if instance_id is None else group.static_member(instance_id)
        return "" if member is None else member.member_id

    def _must_rejoin(self, group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
        return (member.member_epoch < group.group_epoch
                or member.state is MemberState.UNREVOKED_PARTITIONS
                or (member.state is MemberState.UNRELEASED_PARTITIONS
                    and not group.waiting_on_unreleased_partition(member)))

    def classic_sync(self, group: ConsumerGroup, *, generation_id: int, member_id: str,
                     group_instance_id: str | None, protocol_type: str | None,
                     protocol_name: str | None, respond: SyncCallback) -> None:
        """Kafka's ``classicGroupSyncToConsumerGroup``: the member's current partitions."""
        try:
            member = self._classic_member(group, member_id, group_instance_id)
        except GroupError as exc:
            return respond(SyncResult(exc.code))
        assert member.classic is not None
        if generation_id != member.member_epoch:
            return respond(SyncResult(ErrorCode.ILLEGAL_GENERATION))
        if ((protocol_type is not None and protocol_type != CONSUMER_GROUP_TYPE)
                or (protocol_name is not None
                    and protocol_name != member.classic.protocol_name)):
            return respond(SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        if (group.group_epoch > member.member_epoch
                and member.state is not MemberState.UNREVOKED_PARTITIONS):
            self.schedule_join_timeout(group.group_id, member)
            return respond(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        try:
            version = decode_subscription(member.classic.subscription).version
        except PayloadError:
            version = 0
        assignment = encode_assignment(partitions_by_name(member.assigned, self.topics()),
                                       version=version)
        group_id = group.group_id

        def durable(ok: bool) -> None:
            if not ok:
                return respond(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            self._timers.cancel(("cg-sync", group_id, member_id))
            self.schedule_session(group_id, member_id)
            return respond(SyncResult(ErrorCode.NONE, assignment, protocol_type, protocol_name))

        self.store.write([], durable)  # after every change it may have heard of is durable
        return None

    def classic_heartbeat(self, group: ConsumerGroup, *, generation_id: int, member_id: str,
                          group_instance_id: str | None) -> ErrorCode:
        """Kafka's ``classicGroupHeartbeatToConsumerGroup``."""
        try:
            member = self._classic_member(group, member_id, group_instance_id)
        except GroupError as exc:
            return exc.code
        if generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self.schedule_session(group.group_id, member_id)
        if self._must_rejoin(group, member):
            self.schedule_join_timeout(group.group_id, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def classic_leave(self, group: ConsumerGroup, members: Iterable[LeavingMember],
                      ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Kafka's ``classicGroupLeaveToConsumerGroup``: (group error, one error per member);
        the removal is queued for writing (the caller waits for it)."""
        errors: list[ErrorCode] = []
        leaving: dict[str, ConsumerGroupMember] = {}
        for m in members:
            try:
                member = self._classic_member(group, m.member_id or self._static_member_id(
                    group, m.group_instance_id), m.group_instance_id)
            except GroupError as exc:
                errors.append(exc.code)
                continue
            LOGGER.info("group %s: classic member %s left through LeaveGroup; reason: %s",
                        group.group_id, member.member_id, m.reason or "not provided")
            leaving[member.member_id] = member
            errors.append(ErrorCode.NONE)
        if leaving:
            self.store.write(self.fence(group, leaving.values()))
        return ErrorCode.NONE, errors

    # --- downgrade --------------------------------------------------------------------------

    def fence_member(self, group: ConsumerGroup, member: ConsumerGroupMember) -> list[Record]:
        """The last consumer-protocol member leaving turns the group classic, when allowed."""
        if not self._downgradable(group, member.member_id):
            return super().fence_member(group, member)
        classic = classic_group_of(group, member.member_id, self.topics(), self._wall_ms())
        for member_id in group.members:
            self.cancel_timers(group.group_id, member_id)
        del self.groups[group.group_id]
        reason = f"Downgrade group {group.group_id} from consumer to classic."
        LOGGER.info("group %s: member %s left and the %d members left speak the classic "
                    "protocol: the group becomes a classic group at generation %d",
                    group.group_id, member.member_id, len(classic.members),
                    classic.generation_id)
        records = [delete_group_record(group.group_id), classic_group_record(classic)]
        self.classic.adopt_group(classic, reason)
        return records

    def _downgradable(self, group: ConsumerGroup, leaving_member_id: str) -> bool:
        """Kafka's ``validateOnlineDowngradeWithFencedMember``."""
        if (not group.all_members_use_classic_protocol_except(leaving_member_id)
                or len(group.members) <= 1):
            return False
        why = None
        if not self.policy.downgrade_enabled:
            why = "the online downgrade is disabled"
        elif len(group.members) - 1 > self.config.group_max_size:
            why = "its group size is greater than the classic group max size"
        if why is not None:
            LOGGER.info("group %s: cannot downgrade the consumer group to a classic group "
                        "because %s", group.group_id, why)
        return why is None


__all__ = ["MixedProtocolGroupManager"]
