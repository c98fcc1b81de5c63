"""The group coordinator: one broker's consumer groups and committed offsets, behind one face.

Why a face over three managers (Kafka's ``GroupCoordinatorShard`` over ``GroupMetadataManager``
and ``OffsetMetadataManager``): classic membership, consumer-protocol (KIP-848) membership and
offsets are separate jobs with separate rules, but they share the group ids, one timer task and
one lifecycle. This class owns the lifecycle (replay the group metadata and the offsets, run the
timers and the writers, shut down in order), Kafka's rule that a group id belongs to one
protocol at a time, and the requests that need several managers (DeleteGroups, ListGroups);
every other call goes to the manager that owns it.

One group type per group id, as Kafka's ``GroupMetadataManager``: a ConsumerGroupHeartbeat
that joins an empty classic group turns it into a consumer group, a JoinGroup to an empty
consumer group turns it back, offsets included. A group with members changes type online, per
``group.consumer.migration.policy`` (``migration.py``): a consumer group serves the JoinGroup,
SyncGroup, Heartbeat and LeaveGroup of its classic-protocol members (``classic_members.py``).

Everything runs on the event loop and completes synchronously; answers that must wait are
callbacks (see ``membership.py`` and ``offsets.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from .consumer_group import CONSUMER_GROUP_TYPE, ConsumerGroup, GroupSetting, no_group_setting
from .group import Group, JoinCallback, JoinResult, SyncCallback, SyncResult
from .group_store import GroupStore, IoRunner, delete_group_record, materialize
from .internal_topics import InternalTopics
from .membership import (
    GroupMetadataManager,
    GroupSummary,
    JoinRequest,
    LeavingMember,
    ListedGroup,
)
from .offset_log import DEFAULT_COMPACT_BYTES, OffsetAndMetadata, OffsetLog, TopicPartition
from .offsets import CommitCallback, CommitRequest, OffsetCommitEntry, OffsetMetadataManager
from .timers import DeadlineQueue

if TYPE_CHECKING:
    from .classic_members import MixedProtocolGroupManager
    from .consumer_groups import HeartbeatCallback, HeartbeatRequest
    from .reconciliation import TopicsMetadata

#: directory under the broker's state dir (its first log dir) that holds committed offsets
OFFSETS_DIR_NAME = "__consumer_offsets"


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class GroupCoordinator:
    """Consumer groups and committed offsets of one broker.

    ``state_dir`` is the broker's first log dir; offsets live in ``state_dir/__consumer_offsets``.
    ``await nursery.start(coordinator.run)`` loads the offsets and starts the timers; ``close()``
    after ``run`` ends closes the offsets file.
    """

    def __init__(self, config: BrokerConfig, state_dir: Path, *,
                 compact_bytes: int = DEFAULT_COMPACT_BYTES,
                 wall_clock_ms: Callable[[], int] = _wall_ms,
                 io_runner: IoRunner | None = None) -> None:
        self.config = config
        self._timers = DeadlineQueue()
        self._wall_ms = wall_clock_ms
        directory = Path(state_dir) / OFFSETS_DIR_NAME
        self.store = GroupStore(directory, compact_bytes=compact_bytes, io_runner=io_runner)
        self.membership = GroupMetadataManager(config, self._timers, wall_clock_ms, self.store)
        # The consumer-protocol (KIP-848) engine is made by the first consumer group, loaded or
        # new (``consumer``): most brokers never have one, and its modules are a noticeable
        # part of a start. Until then its groups are this empty dict and topic changes counted.
        self._consumer_groups: dict[str, ConsumerGroup] = {}
        self._consumer: MixedProtocolGroupManager | None = None
        self._topics: Callable[[], TopicsMetadata] = dict
        self._topic_version = 0
        self._group_setting: GroupSetting = no_group_setting
        self.offsets = OffsetMetadataManager(
            config, self.membership, self._timers, wall_clock_ms, directory,
            compact_bytes=compact_bytes, consumer_groups=self._consumer_groups)
        self.offsets.remove_consumer_group = self._remove_consumer_group  # type: ignore[method-assign]

    @property
    def groups(self) -> dict[str, Group]:
        return self.membership.groups

    @property
    def consumer_groups(self) -> dict[str, ConsumerGroup]:
        return self._consumer_groups

    @property
    def consumer(self) -> MixedProtocolGroupManager:
        """The consumer-protocol engine, made on first use over ``consumer_groups``."""
        if self._consumer is None:
            from .classic_members import MixedProtocolGroupManager

            engine = MixedProtocolGroupManager(self.config, self._timers, self._wall_ms,
                                               self.store, classic=self.membership)
            engine.groups = self._consumer_groups
            engine.attach_topics(self._topics)
            engine.topic_version = self._topic_version
            engine.group_setting = self._group_setting
            self._consumer = engine
        return self._consumer

    @property
    def offset_log(self) -> OffsetLog:
        return self.offsets.log

    @property
    def loaded(self) -> bool:
        return self.membership.loaded

    @property
    def not_ready_error(self) -> ErrorCode:
        """The answer while not serving: still loading, or closed for shutdown."""
        return self.membership.not_ready_error

    # --- lifecycle --------------------------------------------------------------------------

    def attach_topics(self, topics: Callable[[], TopicsMetadata]) -> None:
        """Where consumer groups read topic names, ids and partition counts (the logs)."""
        self._topics = topics
        if self._consumer is not None:
            self._consumer.attach_topics(topics)

    def attach_group_configs(self, setting: GroupSetting) -> None:
        """Where a group's own configs (the GROUP config resource) are read: ``setting(group
        id, key)``, None where the group has none."""
        self._group_setting = setting
        if self._consumer is not None:
            self._consumer.group_setting = setting

    def attach_internal_topics(self, internal: InternalTopics) -> None:
        """Write Kafka's records of every offset commit and generation to
        ``__consumer_offsets`` too (``internal_topics.py``)."""
        self.store.internal = internal
        self.offsets.internal = internal

    def topics_changed(self, topic: str, previous_partitions: int, partitions: int) -> None:
        """A topic was created, grown or deleted (regexes resolve again, epochs may move)."""
        created_or_deleted = previous_partitions == 0 or partitions == 0
        if self._consumer is not None:
            self._consumer.topics_changed(topic, created_or_deleted)
        elif created_or_deleted:  # no consumer group yet: nothing to move, only the count
            self._topic_version += 1

    def read_files(self) -> None:
        """Open the group metadata and offsets files now, blocking (the broker's start does it
        in the worker thread that loads the logs); ``run`` then replays what they held."""
        self.store.read()
        self.offsets.read()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Replay the group metadata and the committed offsets, restart the members' session
        timers, then serve timers and writes until cancelled."""
        records = await self.store.load()
        for group_id, group in materialize(records, self._wall_ms()).items():
            if isinstance(group, ConsumerGroup):
                self._consumer_groups[group_id] = group
            else:
                self.membership.groups[group_id] = group
        await self.offsets.load()
        for group in self.membership.groups.values():
            for member in group.members.values():
                self.membership.schedule_session(group, member)
        if self._consumer_groups:
            self.consumer.on_loaded()
        self.membership.loaded = True
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._timers.run)
                nursery.start_soon(self.offsets.write_loop)
                nursery.start_soon(self.store.write_loop)
                task_status.started()
        finally:
            self.membership.loaded = False

    def begin_shutdown(self) -> None:
        """Refuse new requests and answer every held JoinGroup/SyncGroup at once."""
        self.membership.begin_shutdown()
        self.offsets.begin_shutdown()
        self.store.begin_shutdown()

    def close(self) -> None:
        """Write what is still queued and close the files; safe while ``run`` is live."""
        self.begin_shutdown()
        try:
            self.offsets.close()
        finally:
            self.store.close()

    # --- membership -------------------------------------------------------------------------

    def _serving_consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group a classic request names (None when not serving, or no such)."""
        if not self.membership.loaded or not group_id:
            return None
        return self._consumer_groups.get(group_id)

    def join_group(self, request: JoinRequest, respond: JoinCallback) -> None:
        """Answer through ``respond``, now or when the join phase completes."""
        group = self._serving_consumer_group(request.group_id)
        if group is not None:
            if not group.is_empty:  # a classic member of a consumer group (online migration)
                cfg, r = self.config, request
                if not (cfg.group_min_session_timeout_ms <= r.session_timeout_ms
                        <= cfg.group_max_session_timeout_ms):
                    return respond(JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, r.member_id))
                if r.rebalance_timeout_ms < 0:
                    r = r._replace(rebalance_timeout_ms=r.session_timeout_ms)
                return self.consumer.classic_join(group, r, respond)
            # An empty consumer group becomes a classic group again, offsets included.
            del self._consumer_groups[group.group_id]
            self.store.write([delete_group_record(group.group_id)])
            classic = self.membership.new_group(group.group_id)
            classic.offsets = group.offsets
            classic.inflight_writes = group.inflight_writes
        return self.membership.join_group(request, respond)

    def sync_group(self, *, group_id: str, generation_id: int, member_id: str,
                   group_instance_id: str | None = None, protocol_type: str | None = None,
                   protocol_name: str | None = None, assignments: list[tuple[str, bytes]],
                   respond: SyncCallback) -> None:
        """Answer through ``respond``, now or when the leader's assignment arrives."""
        group = self._serving_consumer_group(group_id)
        if group is not None:
            if group.is_empty:
                return respond(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return self.consumer.classic_sync(
                group, generation_id=generation_id, member_id=member_id,
                group_instance_id=group_instance_id, protocol_type=protocol_type,
                protocol_name=protocol_name, respond=respond)
        return self.membership.sync_group(group_id=group_id, generation_id=generation_id,
                                   member_id=member_id, group_instance_id=group_instance_id,
                                   protocol_type=protocol_type, protocol_name=protocol_name,
                                   assignments=assignments, respond=respond)

    def heartbeat(self, *, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None = None) -> ErrorCode:
        group = self._serving_consumer_group(group_id)
        if group is not None:
            return self.consumer.classic_heartbeat(group, generation_id=generation_id,
                                                   member_id=member_id,
                                                   group_instance_id=group_instance_id)
        return self.membership.heartbeat(group_id=group_id, generation_id=generation_id,
                                         member_id=member_id,
                                         group_instance_id=group_instance_id)

    def leave_group(self, group_id: str, members: Iterable[LeavingMember],
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """(group error, one error per leaving member, in request order)."""
        group = self._serving_consumer_group(group_id)
        if group is not None:
            return self.consumer.classic_leave(group, members)
        return self.membership.leave_group(group_id, members)

    def describe_group(self, group_id: str) -> GroupSummary | None:
        """DescribeGroups: a classic group (None for a consumer group or an unknown one)."""
        return self.membership.describe_group(group_id)

    def group_not_found_message(self, group_id: str) -> str:
        """Kafka's GROUP_ID_NOT_FOUND message for DescribeGroups v6+."""
        if group_id in self._consumer_groups:
            return f"Group {group_id} is not a classic group."
        return f"Group {group_id} not found."

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = (),
                    ) -> list[ListedGroup]:
        """Every group of both protocols, Empty ones included, filtered as Kafka's ListGroups
        v4/v5: states and types case-insensitively (an unknown type matches none)."""
        states, types = list(states), [t.lower() for t in types]
        out = self.membership.list_groups(states, types)
        wanted = {s.strip().lower() for s in states}
        if not types or CONSUMER_GROUP_TYPE in types:
            out += [ListedGroup(g.group_id, g.protocol_type, g.state, CONSUMER_GROUP_TYPE)
                    for g in self._consumer_groups.values()
                    if not wanted or g.state.value.lower() in wanted]
        return out

    # --- consumer groups (KIP-848) ----------------------------------------------------------

    def consumer_group_heartbeat(self, request: HeartbeatRequest,
                                 respond: HeartbeatCallback) -> None:
        """Answer through ``respond`` once the change it made is durable."""
        if not self.membership.loaded:
            from .consumer_groups import HeartbeatResult

            return respond(HeartbeatResult(self.membership.not_ready_error))
        return self.consumer.heartbeat(request, respond)

    def topic_names(self) -> dict[str, str]:
        """Topic id (as text) -> name, for describing assignments."""
        from .consumer_rebalance import topic_names_by_id

        return {str(tid): name for tid, name in topic_names_by_id(self._topics()).items()}

    def _remove_consumer_group(self, group: ConsumerGroup) -> None:
        self._consumer_groups.pop(group.group_id, None)
        self.store.write([delete_group_record(group.group_id)])

    def delete_groups(self, group_ids: list[str],
                      respond: Callable[[dict[str, ErrorCode]], None]) -> None:
        """Delete empty groups and their offsets; answered once the deletions are durable."""
        results: dict[str, ErrorCode] = {}
        waiting = 0

        def durable(group_id: str, ok: bool) -> None:
            nonlocal waiting
            results[group_id] = ErrorCode.NONE if ok else ErrorCode.COORDINATOR_NOT_AVAILABLE
            waiting -= 1
            if waiting == 0:
                respond(results)

        for group_id in group_ids:
            removed: Group | ConsumerGroup | ErrorCode
            consumer_group = self._serving_consumer_group(group_id)
            if consumer_group is None:
                removed = self.membership.remove_empty_group(group_id)
            elif consumer_group.is_empty:
                removed = consumer_group
                self._remove_consumer_group(consumer_group)
            else:
                removed = ErrorCode.NON_EMPTY_GROUP
            if isinstance(removed, ErrorCode):
                results[group_id] = removed
                continue
            waiting += 1
            self.offsets.delete_group_offsets(
                removed, lambda ok, gid=group_id: durable(gid, ok))  # type: ignore[misc]
        if waiting == 0:
            respond(results)

    # --- offsets ----------------------------------------------------------------------------

    def commit_offsets(self, request: CommitRequest, offsets: Iterable[OffsetCommitEntry],
                       respond: CommitCallback) -> None:
        """Validate, write one fsynced record, then answer through ``respond``."""
        self.offsets.commit_offsets(request, offsets, respond)

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None, *,
                      member_id: str | None = None, member_epoch: int = -1,
                      ) -> tuple[ErrorCode, list[tuple[TopicPartition, OffsetAndMetadata | None]]]:
        """Committed offsets of ``partitions`` (``None``: every committed partition); a
        consumer-group member (OffsetFetch v9+) must name its current epoch."""
        return self.offsets.fetch_offsets(group_id, partitions, member_id=member_id,
                                          member_epoch=member_epoch)

    def after_pending_writes(self, group_id: str, done: Callable[[], None]) -> bool:
        """Call ``done`` once the commits of ``group_id`` accepted so far are applied; False
        (``done`` never called) when none is pending."""
        return self.offsets.after_pending_writes(group_id, done)

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition],
                       respond: Callable[[ErrorCode, dict[TopicPartition, ErrorCode]], None],
                       ) -> None:
        """OffsetDelete: answered through ``respond`` once the deletions are durable."""
        self.offsets.delete_offsets(group_id, partitions, respond)

    def expire_offsets(self, now_ms: int | None = None) -> int:
        """Expire offsets of groups without members (``offsets.retention.minutes``)."""
        return self.offsets.expire_offsets(now_ms)
