"""How consumer groups (KIP-848) move: epochs, target assignments, regular expressions, fencing
and the session and rebalance timers (the group-changing half of Kafka's
``GroupMetadataManager`` for consumer groups; the requests are in ``consumer_groups.py``).

Why apart from the requests: a consumer group changes on a heartbeat, but also on its own, when
a timer fires (a member whose session expired, or that did not revoke its partitions within its
rebalance timeout, is fenced) and when topics appear, grow or disappear (its regular
expressions are resolved again and its subscribed topics' metadata compared). Every change
returns the records that make it durable (``group_store.py``); callers write them.

Timers, as Kafka's:

    session     every heartbeat moves it ``group.consumer.session.timeout.ms`` ahead; when it
                fires the member is fenced (removed) and the group epoch bumped
    rebalance   armed when a member must revoke partitions (UNREVOKED_PARTITIONS), for its
                ``rebalance_timeout_ms``; fires only if the member is still at that epoch

Regular expressions (``subscribed_topic_regex``) use RE2 syntax, as Kafka's RE2/J, through
``security.patterns``: an expression that does not compile (or is over its length bound) is
INVALID_REGULAR_EXPRESSION, matching is linear in the topic name (no backtracking: a hostile
expression cannot stall the broker), a topic matches when the whole name matches. They are
resolved when a member first subscribes and again whenever a topic is created or deleted.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import trio

from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from ..security.patterns import InvalidPattern, compile_pattern
from .assignors import ASSIGNORS, PartitionAssignorError, ServerAssignor
from .consumer_group import (
    ConsumerGroup,
    ConsumerGroupMember,
    GroupSetting,
    MemberState,
    ResolvedRegex,
    no_group_setting,
)
from .group_log import Record
from .group_store import (
    GroupStore,
    epochs_record,
    member_tombstones,
    regex_record,
    target_record,
)
from .internal_topics import is_internal
from .reconciliation import GroupError, TopicsMetadata, build_target
from .timers import DeadlineQueue

if TYPE_CHECKING:
    import re2

LOGGER = logging.getLogger(__name__)


def compile_regex(regex: str) -> re2._Regexp:
    """Compile a subscribed regex as Kafka's ``throwIfRegularExpressionIsInvalid`` does, with
    the broker's one matcher for client-sent expressions (``security.patterns``)."""
    try:
        return compile_pattern(regex)
    except InvalidPattern as exc:
        raise GroupError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                         f"SubscribedTopicRegex `{regex}` is not a valid regular expression: "
                         f"{exc}.") from None


class ConsumerGroupEngine:
    """The consumer groups of one coordinator and everything that changes them."""

    def __init__(self, config: BrokerConfig, timers: DeadlineQueue,
                 wall_clock_ms: Callable[[], int], store: GroupStore) -> None:
        self.config = config
        self.groups: dict[str, ConsumerGroup] = {}
        self.store = store
        self._timers = timers
        self._wall_ms = wall_clock_ms
        self.assignors: dict[str, ServerAssignor] = {
            name: ASSIGNORS[name] for name in config.consumer_assignor_names}
        self.default_assignor = config.consumer_assignor_names[0]
        self._topics: Callable[[], TopicsMetadata] = dict
        #: counts topic creations and deletions (Kafka's metadata image version)
        self.topic_version = 0
        self.group_setting: GroupSetting = no_group_setting

    def attach_topics(self, topics: Callable[[], TopicsMetadata]) -> None:
        """Where topic names, ids and partition counts come from (the broker's logs)."""
        self._topics = topics

    def topics(self) -> TopicsMetadata:
        return self._topics()

    # --- timers -----------------------------------------------------------------------------

    def on_loaded(self) -> None:
        """Session timers start again for every loaded member, as Kafka's ``onLoaded``."""
        for group in self.groups.values():
            for member in group.members.values():
                self.schedule_session(group.group_id, member.member_id)
                if (member.state is MemberState.UNREVOKED_PARTITIONS
                        and not member.uses_classic_protocol):
                    self.schedule_rebalance(group.group_id, member)

    # --- per-group settings (the group's config, else the broker's), as Kafka's GroupConfig ---

    def session_timeout_ms(self, group_id: str) -> int:
        value = self.group_setting(group_id, "consumer.session.timeout.ms")
        return self.config.group_consumer_session_timeout_ms if value is None else int(value)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        value = self.group_setting(group_id, "consumer.heartbeat.interval.ms")
        return self.config.group_consumer_heartbeat_interval_ms if value is None else int(value)

    def schedule_session(self, group_id: str, member_id: str) -> None:
        """A classic-protocol member keeps the session timeout of its JoinGroup."""
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        timeout_ms = (member.classic.session_timeout_ms
                      if member is not None and member.classic is not None
                      else self.session_timeout_ms(group_id))
        self._timers.schedule(("cg-session", group_id, member_id),
                              trio.current_time() + timeout_ms / 1000,
                              lambda: self._expire(group_id, member_id, None,
                                                   "the member session expired"))

    def schedule_join_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        """A classic member told to rejoin must do so within its rebalance timeout (armed once:
        every heartbeat until it rejoins says the same)."""
        key = ("cg-join", group_id, member.member_id)
        if key not in self._timers:
            self._timers.schedule(key, trio.current_time() + member.rebalance_timeout_ms / 1000,
                                  lambda: self._expire(group_id, member.member_id, None,
                                                       "the classic member failed to join "
                                                       "within the rebalance timeout"))

    def schedule_sync_timeout(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        """A classic member that joined must send SyncGroup within its rebalance timeout."""
        self._timers.schedule(("cg-sync", group_id, member_id),
                              trio.current_time() + timeout_ms / 1000,
                              lambda: self._expire(group_id, member_id, None,
                                                   "the member failed to sync within timeout"))

    def schedule_rebalance(self, group_id: str, member: ConsumerGroupMember) -> None:
        epoch, timeout_ms = member.member_epoch, member.rebalance_timeout_ms
        self._timers.schedule(
            ("cg-rebalance", group_id, member.member_id),
            trio.current_time() + max(timeout_ms, 0) / 1000,
            lambda: self._expire(group_id, member.member_id, epoch,
                                 f"it failed to transition from epoch {epoch} within "
                                 f"{timeout_ms}ms"))

    def cancel_rebalance(self, group_id: str, member_id: str) -> None:
        self._timers.cancel(("cg-rebalance", group_id, member_id))

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        for kind in ("cg-session", "cg-join", "cg-sync"):
            self._timers.cancel((kind, group_id, member_id))
        self.cancel_rebalance(group_id, member_id)

    def _expire(self, group_id: str, member_id: str, epoch: int | None, reason: str) -> None:
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None or (epoch is not None and
                                               member.member_epoch != epoch):
            return
        LOGGER.info("group %s: member %s fenced because %s", group_id, member_id, reason)
        self.store.write(self.fence_member(group, member))

    def fence_member(self, group: ConsumerGroup, member: ConsumerGroupMember) -> list[Record]:
        """Remove one member (the coordinator may turn the group classic instead)."""
        return self.fence(group, [member])

    # --- fencing ----------------------------------------------------------------------------

    def fence(self, group: ConsumerGroup, members: Iterable[ConsumerGroupMember]) -> list[Record]:
        """Kafka's ``consumerGroupFenceMembers``: remove the members, drop regexes nobody
        uses any more, bump the group epoch so the others get a new target."""
        records: list[Record] = []
        now_ms = self._wall_ms()
        for member in members:
            group.remove_member(member.member_id, now_ms)
            group.target_assignment.pop(member.member_id, None)
            records += member_tombstones(group.group_id, member.member_id)
            self.cancel_timers(group.group_id, member.member_id)
        for regex in [r for r in group.resolved_regexes if not group.num_subscribed_members(r)]:
            del group.resolved_regexes[regex]
            records.append(regex_record(group.group_id, regex, None))
        group.group_epoch += 1
        group.subscription_metadata = self.subscription_metadata(group.subscribed_topics())
        records.append(epochs_record(group))
        LOGGER.info("group %s: epoch %d, %d members", group.group_id, group.group_epoch,
                    len(group.members))
        return records

    # --- epochs and targets -----------------------------------------------------------------

    def subscription_metadata(self, names: Iterable[str]) -> dict[str, tuple[uuid.UUID, int]]:
        """Id and partition count of each subscribed topic that exists (Kafka hashes this)."""
        topics = self.topics()
        return {name: topics[name] for name in sorted(names) if name in topics}

    def compute_target(self, group: ConsumerGroup, updated: ConsumerGroupMember | None,
                       records: list[Record]) -> None:
        """A new target at the group epoch (Kafka's ``updateTargetAssignment``)."""
        wanted = group.preferred_assignor() if updated is None else _preferred(group, updated)
        assignor = self.assignors.get(wanted or self.default_assignor,
                                      self.assignors[self.default_assignor])
        try:
            target = build_target(group, assignor, self.topics(), updated=updated)
        except PartitionAssignorError as exc:
            message = (f"Failed to compute a new target assignment for epoch "
                       f"{group.group_epoch}: {exc}")
            LOGGER.error("group %s: %s", group.group_id, message)
            raise GroupError(ErrorCode.UNKNOWN_SERVER_ERROR, message) from exc
        for member_id, assignment in sorted(target.changed.items()):
            records.append(target_record(group.group_id, member_id, assignment))
        group.target_assignment = dict(target.members)
        group.assignment_epoch = group.group_epoch
        records.append(epochs_record(group))
        LOGGER.info("group %s: target assignment for epoch %d computed with the %s assignor",
                    group.group_id, group.group_epoch, assignor.name)

    # --- regular expressions ----------------------------------------------------------------

    def resolve(self, regexes: Iterable[str]) -> dict[str, ResolvedRegex]:
        """Kafka's ``refreshRegularExpressions``: the topics each expression matches whole.

        Internal topics never match, as a consumer's own ``exclude.internal.topics=true`` keeps
        them out of a classic pattern subscription: ``.*`` must not hand out partitions of
        ``__consumer_offsets`` (Kafka's resolution does not filter them; a consumer still
        reaches them by name)."""
        names = [n for n in self.topics() if not is_internal(n)]
        now_ms = self._wall_ms()
        out = {}
        for regex in regexes:
            pattern = compile_regex(regex)
            out[regex] = ResolvedRegex(frozenset(n for n in names if pattern.fullmatch(n)),
                                       self.topic_version, now_ms)
        return out

    def topics_changed(self, topic: str, created_or_deleted: bool) -> None:
        """A topic was created, grown or deleted: resolve regexes again, compare metadata, and
        bump the epoch of every group whose subscribed topics changed."""
        if created_or_deleted:
            self.topic_version += 1
        for group in list(self.groups.values()):
            if not group.members:
                continue
            records: list[Record] = []
            bump = False
            if created_or_deleted and group.subscribed_regexes:
                for regex, resolved in self.resolve(group.subscribed_regexes).items():
                    old = group.resolved_regexes.get(regex)
                    if old is None or old.topics != resolved.topics:
                        bump = True
                    group.resolved_regexes[regex] = resolved
                    records.append(regex_record(group.group_id, regex, resolved))
            metadata = self.subscription_metadata(group.subscribed_topics())
            if bump or metadata != group.subscription_metadata:
                group.group_epoch += 1
                group.subscription_metadata = metadata
                records.append(epochs_record(group))
                LOGGER.info("group %s: epoch %d after topic %s changed", group.group_id,
                            group.group_epoch, topic)
            if records:
                self.store.write(records)


def _preferred(group: ConsumerGroup, updated: ConsumerGroupMember) -> str | None:
    """Kafka's ``computePreferredServerAssignor`` with ``updated`` counted instead of the member
    it replaces."""
    counts: dict[str, int] = {}
    for member in group.members.values():
        if member.member_id != updated.member_id and member.server_assignor is not None:
            counts[member.server_assignor] = counts.get(member.server_assignor, 0) + 1
    if updated.server_assignor is not None:
        counts[updated.server_assignor] = counts.get(updated.server_assignor, 0) + 1
    if not counts:
        return None
    best = max(counts.values())
    return min(name for name, count in counts.items() if count == best)


def topic_names_by_id(topics: TopicsMetadata) -> Mapping[uuid.UUID, str]:
    return {tid: name for name, (tid, _) in topics.items()}


__all__ = ["ConsumerGroupEngine", "compile_regex", "topic_names_by_id"]
