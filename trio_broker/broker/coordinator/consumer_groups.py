"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848): Kafka's ``GroupMetadataManager``
for consumer groups, over the group-changing engine of ``consumer_rebalance.py``.

Why one request does everything: in the consumer protocol a member joins, heartbeats, changes
its subscription, acknowledges revocations and leaves with the same request; the coordinator
answers with the member's epoch and, when it changed, its assignment. Each heartbeat runs
Kafka's steps in Kafka's order:

    0. validate the request (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR) and its epoch: -1 leaves,
       -2 is a static member leaving for a restart, 0 joins
    1. find or create the group (an empty classic group of the same id becomes a consumer
       group; any other is GROUP_ID_NOT_FOUND) and the member (UNKNOWN_MEMBER_ID,
       FENCED_MEMBER_EPOCH, and for static members UNRELEASED_INSTANCE_ID and
       FENCED_INSTANCE_ID); a full group is GROUP_MAX_SIZE_REACHED
    2. apply the subscription; a new regular expression is compiled (INVALID_REGULAR_EXPRESSION)
       and resolved; bump the group epoch when the subscriptions or their topics changed
    3. compute a new target assignment when the group epoch is ahead of the assignment epoch
    4. reconcile the member towards its target (``reconciliation.py``)
    5. answer once the records of the change are durable

Nothing changes before every check that can refuse the request has passed.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

import attrs

from ...protocol.consumer_protocol import PayloadError
from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from .consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from .consumer_rebalance import ConsumerGroupEngine, compile_regex
from .group import Group
from .group_log import Record
from .group_store import (
    GroupStore,
    delete_group_record,
    member_record,
    member_tombstones,
    regex_record,
    target_record,
)
from .membership import GroupMetadataManager
from .migration import MigrationPolicy, consumer_group_of, consumer_group_records
from .reconciliation import GroupError, Owned, reconcile, topic_ids
from .states import GroupState
from .timers import DeadlineQueue

LOGGER = logging.getLogger(__name__)

#: ConsumerGroupHeartbeat v1+: the client generates its member id (KIP-1082)
CLIENT_MEMBER_ID_VERSION = 1


@attrs.frozen
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat as the coordinator needs it (None: not sent / unchanged)."""

    group_id: str
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    version: int = 1
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Owned = None


@attrs.frozen
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    #: the member's assignment, when the answer carries one
    assignment: Assignment | None = None


HeartbeatCallback = Callable[[HeartbeatResult], None]


def _blank(value: str) -> bool:
    """Java's ``trim().isEmpty()``: only characters up to U+0020."""
    return not value.lstrip("".join(map(chr, range(33))))


class ConsumerGroupManager(ConsumerGroupEngine):
    """The consumer-protocol requests; ``classic`` is the classic groups' manager, consulted
    for the one-protocol-per-group-id rule and the online upgrade of a classic group."""

    def __init__(self, config: BrokerConfig, timers: DeadlineQueue,
                 wall_clock_ms: Callable[[], int], store: GroupStore,
                 classic: GroupMetadataManager) -> None:
        super().__init__(config, timers, wall_clock_ms, store)
        self.classic = classic
        self.policy = MigrationPolicy.parse(config.group_consumer_migration_policy)

    # --- ConsumerGroupHeartbeat -------------------------------------------------------------

    def heartbeat(self, r: HeartbeatRequest, respond: HeartbeatCallback) -> None:
        try:
            self._validate(r)
            if r.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                result, records = self._leave(r)
            else:
                result, records = self._heartbeat(r)
        except GroupError as exc:
            return respond(HeartbeatResult(exc.code, exc.message))
        if not records:
            return respond(result)

        def durable(ok: bool) -> None:
            respond(result if ok else HeartbeatResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))

        self.store.write(records, durable)
        return None

    def _validate(self, r: HeartbeatRequest) -> None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
        def invalid(message: str) -> GroupError:
            return GroupError(ErrorCode.INVALID_REQUEST, message)

        if (r.version >= CLIENT_MEMBER_ID_VERSION or r.member_epoch > 0
                or r.member_epoch == LEAVE_GROUP_MEMBER_EPOCH) and _blank(r.member_id):
            raise invalid("MemberId can't be empty.")
        if _blank(r.group_id):
            raise invalid("GroupId can't be empty.")
        if r.instance_id is not None and _blank(r.instance_id):
            raise invalid("InstanceId can't be empty.")
        if r.rack_id is not None and _blank(r.rack_id):
            raise invalid("RackId can't be empty.")
        if r.member_epoch == 0:
            if r.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if r.owned is None or r.owned:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if r.subscribed_topic_names is None and r.subscribed_topic_regex is None:
                raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be "
                              "non-null when (re-)joining.")
        elif r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if r.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif r.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise invalid("MemberEpoch is invalid.")
        if r.server_assignor is not None and r.server_assignor not in self.assignors:
            raise GroupError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                             f"ServerAssignor {r.server_assignor} is not supported. Supported "
                             f"assignors: {', '.join(self.assignors)}.")

    def _group(self, group_id: str, *, create: bool) -> tuple[ConsumerGroup, Group | None]:
        """Kafka's ``getOrMaybeCreateConsumerGroup``: (group, the classic group it replaces:
        an empty one, or one whose members move over, per the migration policy). Nothing is
        registered yet."""
        group = self.groups.get(group_id)
        if group is not None:
            return group, None
        classic = self.classic.groups.get(group_id)
        if classic is None:
            if not create:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND,
                                 f"Consumer group {group_id} not found.")
            return ConsumerGroup(group_id, self._wall_ms()), None
        if create and classic.is_in(GroupState.EMPTY) and not classic.pending_members:
            return ConsumerGroup(group_id, self._wall_ms()), classic
        if create and self._upgradable(classic):
            try:
                return consumer_group_of(classic, self.topics(), self._wall_ms()), classic
            except (PayloadError, KeyError) as exc:
                LOGGER.warning("group %s: cannot upgrade the classic group: %s", group_id, exc)
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, (
                    f"Cannot upgrade the classic group {group_id} to consumer group because the "
                    "embedded consumer protocol is malformed.")) from None
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    def _upgradable(self, classic: Group) -> bool:
        """Kafka's ``validateOnlineUpgrade``."""
        why = None
        if not self.policy.upgrade_enabled:
            why = "the online upgrade is disabled"
        elif not classic.uses_consumer_protocol:
            why = "the group does not use the consumer embedded protocol"
        elif len(classic.members) > self.config.group_consumer_max_size:
            why = "the group size exceeds the consumer group maximum size"
        if why is not None:
            LOGGER.info("group %s: cannot upgrade the classic group to a consumer group "
                        "because %s", classic.group_id, why)
        return why is None

    def _take_over(self, group: ConsumerGroup, classic: Group, records: list[Record]) -> None:
        """The classic group ``group`` replaces goes; its members (if any) are now ``group``'s."""
        self.classic.release_group(classic)
        group.offsets = classic.offsets
        group.inflight_writes = classic.inflight_writes
        records.append(delete_group_record(group.group_id))
        if not group.members:
            LOGGER.info("group %s: the empty classic group becomes a consumer group",
                        group.group_id)
            return
        records += consumer_group_records(group)
        self.groups[group.group_id] = group
        for member_id in group.members:
            self.schedule_session(group.group_id, member_id)
        LOGGER.info("group %s: the classic group with %d members becomes a consumer group at "
                    "epoch %d", group.group_id, len(group.members), group.group_epoch)

    def _heartbeat(self, r: HeartbeatRequest) -> tuple[HeartbeatResult, list[Record]]:
        joining = r.member_epoch == 0
        group, replaced_classic = self._group(r.group_id, create=joining)
        member_id = r.member_id or str(uuid.uuid4())  # v0 joins may leave the id to us
        self._check_size(group, r.member_id or None)
        member, replacing = self._member(group, member_id, r, joining)
        if (r.subscribed_topic_regex and r.subscribed_topic_regex != member.subscribed_topic_regex
                and not group.num_subscribed_members(r.subscribed_topic_regex)):
            compile_regex(r.subscribed_topic_regex)
        # Every check passed: from here on the group changes.
        records: list[Record] = []
        if replaced_classic is not None:
            self._take_over(group, replaced_classic, records)
        final = self.update_member(group, member, member_id, replacing, r, records)
        full = (r.rebalance_timeout_ms != -1 and r.owned is not None and (
            r.subscribed_topic_names is not None or r.subscribed_topic_regex is not None))
        send = joining or full or final.assigned != member.assigned
        return HeartbeatResult(ErrorCode.NONE, None, member_id, final.member_epoch,
                               self.heartbeat_interval_ms(group.group_id),
                               final.assigned if send else None), records

    def _check_size(self, group: ConsumerGroup, member_id: str | None) -> None:
        max_size = self.config.group_consumer_max_size
        if len(group.members) >= max_size and (member_id is None
                                               or member_id not in group.members):
            raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                             f"The consumer group has reached its maximum capacity of "
                             f"{max_size} members.")

    def update_member(self, group: ConsumerGroup, member: ConsumerGroupMember, member_id: str,
                      replacing: ConsumerGroupMember | None, r: HeartbeatRequest,
                      records: list[Record], classic: ClassicMemberMetadata | None = None,
                      ) -> ConsumerGroupMember:
        """Steps 2 to 4 of a heartbeat (or of a classic member's JoinGroup): apply the
        subscription, bump the epoch, compute a target, reconcile the member; returns it."""
        self.groups[group.group_id] = group
        if replacing is not None:
            member = self._replace_static(group, replacing, member_id, records)
        elif member.member_id not in group.members:
            LOGGER.info("group %s: member %s joins (client %s, %s%s)", group.group_id,
                        member_id, r.client_id, r.client_host,
                        ", classic protocol" if classic is not None else "")
        updated = attrs.evolve(
            member, client_id=r.client_id, client_host=r.client_host,
            instance_id=member.instance_id if r.instance_id is None else r.instance_id,
            rack_id=member.rack_id if r.rack_id is None else r.rack_id,
            rebalance_timeout_ms=(member.rebalance_timeout_ms if r.rebalance_timeout_ms == -1
                                  else r.rebalance_timeout_ms),
            server_assignor=(member.server_assignor if r.server_assignor is None
                             else r.server_assignor),
            subscribed_topic_names=(member.subscribed_topic_names
                                    if r.subscribed_topic_names is None
                                    else frozenset(r.subscribed_topic_names)),
            subscribed_topic_regex=(member.subscribed_topic_regex
                                    if r.subscribed_topic_regex is None
                                    else r.subscribed_topic_regex),
            classic=member.classic if classic is None else classic)
        names_changed = updated.subscribed_topic_names != member.subscribed_topic_names
        regex_changed = self._update_regex(group, member, updated, records)
        subscription_changed = names_changed or regex_changed
        bump = group.group_epoch == 0 or subscription_changed
        if bump or group.metadata_expired:
            group.metadata_expired = False
            names = {n for m in group.members.values() if m.member_id != member.member_id
                     for n in group.member_topics(m)} | group.member_topics(updated)
            metadata = self.subscription_metadata(names)
            if bump or metadata != group.subscription_metadata:
                group.group_epoch += 1
                group.subscription_metadata = metadata
                LOGGER.info("group %s: epoch %d (member %s)", group.group_id,
                            group.group_epoch, member_id)
        if group.group_epoch > group.assignment_epoch:
            self.compute_target(group, updated, records)
        final = updated
        if subscription_changed or not updated.is_reconciled_to(group.assignment_epoch):
            final = reconcile(
                updated, target_epoch=group.assignment_epoch,
                target=group.target_assignment.get(member_id, {}),
                subscribed=topic_ids(group.member_topics(updated), self.topics()),
                partition_epoch=group.current_partition_epoch, owned=r.owned,
                subscription_changed=subscription_changed)
        if final != member or replacing is not None:
            records.append(member_record(group.group_id, final))
        if ((final.state is not member.state or final.member_epoch != member.member_epoch)
                and not final.uses_classic_protocol):  # classic members have join/sync timers
            if final.state is MemberState.UNREVOKED_PARTITIONS:
                self.schedule_rebalance(group.group_id, final)
            else:
                self.cancel_rebalance(group.group_id, final.member_id)
        group.update_member(final)
        self.schedule_session(group.group_id, member_id)
        return final

    def _member(self, group: ConsumerGroup, member_id: str, r: HeartbeatRequest,
                joining: bool) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """(the member, the static member it replaces): Kafka's
        ``getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember``, checks only."""
        if r.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not "
                                     f"a member of group {group.group_id}.")
                member = ConsumerGroupMember(member_id)
            _check_epoch(member, r.member_epoch, r.owned)
            return member, None
        existing = group.static_member(r.instance_id)
        if joining:
            if existing is None:
                return group.members.get(member_id) or ConsumerGroupMember(member_id), None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise GroupError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                 f"Static member {member_id} with instance id {r.instance_id} "
                                 f"cannot join the group because the instance id is owned by "
                                 f"{existing.member_id} member.")
            return existing, existing
        if existing is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Instance id {r.instance_id} is unknown.")
        if existing.member_id != member_id:
            raise GroupError(ErrorCode.FENCED_INSTANCE_ID,
                             f"Static member {member_id} with instance id {r.instance_id} was "
                             f"fenced by member {existing.member_id}.")
        _check_epoch(existing, r.member_epoch, r.owned)
        return existing, None

    def _replace_static(self, group: ConsumerGroup, old: ConsumerGroupMember, member_id: str,
                        records: list[Record]) -> ConsumerGroupMember:
        """A restarted static member takes over its instance: same partitions, epoch 0."""
        new = attrs.evolve(old, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        target = group.target_assignment.pop(old.member_id, {})
        group.remove_member(old.member_id)
        self.cancel_timers(group.group_id, old.member_id)
        records += member_tombstones(group.group_id, old.member_id)
        group.target_assignment[member_id] = target
        records.append(target_record(group.group_id, member_id, target))
        group.update_member(new)
        LOGGER.info("group %s: static member %s rejoins as %s, replacing %s", group.group_id,
                    old.instance_id, member_id, old.member_id)
        return new

    def _update_regex(self, group: ConsumerGroup, member: ConsumerGroupMember,
                      updated: ConsumerGroupMember, records: list[Record]) -> bool:
        """Kafka's ``maybeUpdateRegularExpressions``, resolving a new expression at once."""
        old, new = member.subscribed_topic_regex, updated.subscribed_topic_regex
        if old == new:
            return False
        if old and group.num_subscribed_members(old) == 1 and old in group.resolved_regexes:
            del group.resolved_regexes[old]
            records.append(regex_record(group.group_id, old, None))
        if new and new not in group.resolved_regexes:
            resolved = self.resolve([new])[new]
            group.resolved_regexes[new] = resolved
            records.append(regex_record(group.group_id, new, resolved))
        return True

    # --- leaving ------------------------------------------------------------------------------

    def _leave(self, r: HeartbeatRequest) -> tuple[HeartbeatResult, list[Record]]:
        """Kafka's ``consumerGroupLeave``: -1 removes the member; -2 keeps a static member's
        place (and partitions) for its restart, until its session times out."""
        group = self.groups.get(r.group_id)
        if group is None:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, (
                f"Group {r.group_id} is not a consumer group."
                if r.group_id in self.classic.groups else f"Group {r.group_id} not found."))
        if r.instance_id is None:
            member = group.members.get(r.member_id)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {r.member_id} is not a "
                                 f"member of group {r.group_id}.")
            LOGGER.info("group %s: member %s left", r.group_id, r.member_id)
            return (HeartbeatResult(ErrorCode.NONE, None, r.member_id, r.member_epoch),
                    self.fence_member(group, member))
        member = group.static_member(r.instance_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Instance id {r.instance_id} is unknown.")
        if member.member_id != r.member_id:
            raise GroupError(ErrorCode.FENCED_INSTANCE_ID,
                             f"Static member {r.member_id} with instance id {r.instance_id} "
                             f"was fenced by member {member.member_id}.")
        if r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            LOGGER.info("group %s: static member %s (%s) left for a restart", r.group_id,
                        r.member_id, r.instance_id)
            away = attrs.evolve(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                pending_revocation={})
            self.cancel_rebalance(group.group_id, member.member_id)
            group.update_member(away)
            return (HeartbeatResult(ErrorCode.NONE, None, member.member_id,
                                    LEAVE_GROUP_STATIC_MEMBER_EPOCH),
                    [member_record(group.group_id, away)])
        LOGGER.info("group %s: static member %s (%s) left", r.group_id, r.member_id,
                    r.instance_id)
        return (HeartbeatResult(ErrorCode.NONE, None, r.member_id, r.member_epoch),
                self.fence_member(group, member))


def _check_epoch(member: ConsumerGroupMember, received: int, owned: Owned) -> None:
    """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``: an epoch ahead of the member's is
    fenced; one behind is accepted only as the previous epoch with a subset of the current
    partitions (the answer that moved the member on may have been lost)."""
    if received > member.member_epoch:
        raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                         f"The consumer group member has a greater member epoch ({received}) "
                         f"than the one known by the group coordinator ({member.member_epoch})."
                         " The member must abandon all its partitions and rejoin.")
    if received < member.member_epoch and (
            received != member.previous_member_epoch or owned is None
            or not _subset(owned, member.assigned)):
        raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                         f"The consumer group member has a smaller member epoch ({received}) "
                         f"than the one known by the group coordinator ({member.member_epoch})."
                         " The member must abandon all its partitions and rejoin.")


def _subset(owned: Owned, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(topic_id in assigned and parts <= assigned[topic_id]
               for topic_id, parts in owned.items())


__all__ = ["ConsumerGroupManager", "HeartbeatCallback", "HeartbeatRequest", "HeartbeatResult"]
