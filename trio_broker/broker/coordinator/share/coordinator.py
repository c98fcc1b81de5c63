"""The share coordinator: share groups, their share-partitions and the members' share sessions
(Kafka's ``GroupCoordinator`` share part, ``SharePartitionManager`` and ``ShareSessionCache``).

Why one object: a heartbeat that assigns a partition initializes its share-partition (at the
log end, or its start with the group's ``share.auto.offset.reset`` earliest), a member that
leaves or whose session times out gives its acquired records back, and a ShareFetch names
the member whose session it continues: the three tables change together. Time comes in as
``now`` (seconds of the caller's clock).

Share sessions (KIP-932): ShareSessionEpoch 0 opens a session with the partitions the request
names, each next request carries the epoch after the last one (1, 2, ...) and adds partitions
or forgets some, -1 closes it. A session of another epoch is INVALID_SHARE_SESSION_EPOCH, none
at all SHARE_SESSION_NOT_FOUND.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

import attrs
import trio

from ....protocol.errors import ErrorCode
from ...offload import run_io
from ..group_configs import GroupConfigs
from .group import HeartbeatAnswer, ShareGroup, TopicsFn
from .partition import SharePartition
from .store import ShareStateStore, snapshot

__all__ = ["ShareConfig", "ShareCoordinator", "ShareSession"]

INITIAL_SESSION_EPOCH = 0
FINAL_SESSION_EPOCH = -1
#: (topic id, partition)
TopicIdPartition = tuple[uuid.UUID, int]
#: (topic id, partition) -> (log start offset, high watermark), None for an unknown partition
OffsetsFn = Callable[[uuid.UUID, int], tuple[int, int] | None]


@attrs.frozen
class ShareConfig:
    """The ``group.share.*`` broker keys the coordinator reads."""

    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 200
    partition_max_record_locks: int = 2000


@attrs.define
class ShareSession:
    epoch: int
    partitions: set[TopicIdPartition]


@attrs.define
class ShareCoordinator:
    topics: TopicsFn
    offsets: OffsetsFn
    config: ShareConfig = attrs.field(factory=ShareConfig)
    groups: dict[str, ShareGroup] = attrs.field(factory=dict)
    #: (group id, topic id, partition) -> delivery state
    partitions: dict[tuple[str, uuid.UUID, int], SharePartition] = attrs.field(factory=dict)
    #: (node id, group id, member id) -> share session: each broker keeps its own (Kafka's
    #: ``ShareSessionCache``), and a test cluster's nodes share this coordinator
    sessions: dict[tuple[int, str, str], ShareSession] = attrs.field(factory=dict)
    #: where share-partition state is kept (None: in memory only)
    store: ShareStateStore | None = None
    #: the GROUP config resource: each group's own share settings
    group_configs: GroupConfigs = attrs.field(factory=lambda: GroupConfigs(None))
    _write_locks: dict[tuple[str, uuid.UUID, int], trio.Lock] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        # a group whose share-partitions are stored exists after a restart, without members:
        # a member that heartbeats there is UNKNOWN_MEMBER_ID and rejoins
        for group_id in self.store.group_ids() if self.store is not None else ():
            self.groups.setdefault(group_id, ShareGroup(group_id))

    # --- per-group settings (the group's config, else the broker's) -------------------------
    def record_lock_duration_ms(self, group_id: str) -> int:
        return self.group_configs.get_int(group_id, "share.record.lock.duration.ms",
                                          self.config.record_lock_duration_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.group_configs.get_int(group_id, "share.heartbeat.interval.ms",
                                          self.config.heartbeat_interval_ms)

    def session_timeout_ms(self, group_id: str) -> int:
        return self.group_configs.get_int(group_id, "share.session.timeout.ms",
                                          self.config.session_timeout_ms)

    def auto_offset_reset(self, group_id: str) -> str:
        return self.group_configs.get(group_id, "share.auto.offset.reset") or "latest"

    def isolation_level(self, group_id: str) -> str:
        return self.group_configs.get(group_id, "share.isolation.level") or "read_uncommitted"

    # --- membership ---------------------------------------------------------------------------
    def heartbeat(self, group_id: str, *, member_id: str, member_epoch: int,
                  rack_id: str | None, subscribed: tuple[str, ...] | None, client_id: str,
                  client_host: str, now: float) -> HeartbeatAnswer:
        self.expire_members(now)
        group = self.groups.get(group_id)
        if group is None:
            if member_epoch != 0:  # Kafka's getOrMaybeCreatePersistedShareGroup
                return HeartbeatAnswer(ErrorCode.GROUP_ID_NOT_FOUND,
                                       f"Share group {group_id} not found.")
            group = self.groups[group_id] = ShareGroup(group_id)
        answer = group.heartbeat(
            member_id=member_id, member_epoch=member_epoch, rack_id=rack_id,
            subscribed=subscribed, client_id=client_id, client_host=client_host,
            topics=self.topics, now=now, session_s=self.session_timeout_ms(group_id) / 1000,
            max_size=self.config.max_size)
        if member_epoch == -1 and not answer.error:
            self._member_gone(group_id, member_id)
        if answer.assignment:
            for topic_id, parts in answer.assignment.items():
                for p in parts:
                    self.share_partition(group_id, topic_id, p)
        return answer

    def expire_members(self, now: float) -> None:
        """Members whose session ended without a heartbeat leave (Kafka's session timer)."""
        for group in self.groups.values():
            for member_id in group.expired(now):
                group.remove(member_id)
                self._member_gone(group.group_id, member_id)

    def _member_gone(self, group_id: str, member_id: str) -> None:
        for key in [k for k in self.sessions if k[1:] == (group_id, member_id)]:
            del self.sessions[key]
        for (gid, _, _), sp in self.partitions.items():
            if gid == group_id:
                sp.release_member(member_id)

    def delete_group(self, group_id: str) -> bool:
        """DeleteGroups of a share group: only an empty one (else NON_EMPTY_GROUP), with its
        share-partitions' state and stored files."""
        group = self.groups.get(group_id)
        if group is None or group.members:
            return False
        del self.groups[group_id]
        for key in [k for k in self.partitions if k[0] == group_id]:
            del self.partitions[key]
        if self.store is not None:
            self.store.delete_group(group_id)
        return True

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    # --- share-partitions ---------------------------------------------------------------------
    def share_partition(self, group_id: str, topic_id: uuid.UUID,
                        partition: int) -> SharePartition | None:
        """The group's state of a partition, initialized at the log end on first use."""
        key = (group_id, topic_id, partition)
        sp = self.partitions.get(key)
        offsets = self.offsets(topic_id, partition)
        if offsets is None:
            return sp
        log_start, high_watermark = offsets
        if sp is None and self.store is not None:
            sp = self.store.load(group_id, topic_id, partition,
                                 delivery_count_limit=self.config.delivery_count_limit,
                                 max_record_locks=self.config.partition_max_record_locks)
            if sp is not None:
                self.partitions[key] = sp
        if sp is None:
            start = log_start if self.auto_offset_reset(group_id) == "earliest" else (
                high_watermark)
            sp = self.partitions[key] = SharePartition(
                start, start, self.config.delivery_count_limit,
                self.config.partition_max_record_locks)
        sp.skip_to(log_start)
        return sp

    async def persist(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        """Write the share-partition's current state (after acknowledgements, before they are
        answered); writes of one share-partition run one at a time, each of the latest state."""
        sp = self.partitions.get((group_id, topic_id, partition))
        if self.store is None or sp is None:
            return
        lock = self._write_locks.setdefault((group_id, topic_id, partition), trio.Lock())
        async with lock:
            await run_io(self.store.save, group_id, topic_id, partition, snapshot(sp))

    # --- share group offsets (DescribeShareGroupOffsets, Alter..., Delete...) -------------------
    def stored_partition(self, group_id: str, topic_id: uuid.UUID,
                         partition: int) -> SharePartition | None:
        """The group's share-partition if it was initialized (in memory or stored), without
        initializing it: Kafka's start offset -1 for the others."""
        key = (group_id, topic_id, partition)
        sp = self.partitions.get(key)
        if sp is None and self.store is not None:
            sp = self.store.load(group_id, topic_id, partition,
                                 delivery_count_limit=self.config.delivery_count_limit,
                                 max_record_locks=self.config.partition_max_record_locks)
            if sp is not None:
                self.partitions[key] = sp
        if sp is not None and (offsets := self.offsets(topic_id, partition)) is not None:
            sp.skip_to(offsets[0])
        return sp

    def initialized_partitions(self, group_id: str) -> set[TopicIdPartition]:
        stored = self.store.partitions(group_id) if self.store is not None else set()
        return stored | {(tid, p) for gid, tid, p in self.partitions if gid == group_id}

    def lag(self, sp: SharePartition, topic_id: uuid.UUID, partition: int) -> int:
        """KIP-1226: the partition's end offset minus the start offset minus the records after
        the start offset whose delivery is complete (acknowledged or archived)."""
        offsets = self.offsets(topic_id, partition)
        if offsets is None:
            return -1
        return offsets[1] - sp.start_offset - sp.delivery_complete_count()

    async def alter_start_offset(self, group_id: str, topic_id: uuid.UUID, partition: int,
                                 start_offset: int) -> None:
        """AlterShareGroupOffsets: the share-partition starts again at ``start_offset`` with
        nothing in flight (Kafka initializes its state anew), written before it is answered."""
        sp = self.partitions[(group_id, topic_id, partition)] = SharePartition(
            start_offset, start_offset, self.config.delivery_count_limit,
            self.config.partition_max_record_locks)
        offsets = self.offsets(topic_id, partition)
        if offsets is not None:
            sp.skip_to(offsets[0])
        await self.persist(group_id, topic_id, partition)

    def delete_offsets(self, group_id: str, topic_id: uuid.UUID) -> bool:
        """DeleteShareGroupOffsets of one topic: its share-partitions are forgotten (the next
        assignment initializes them by ``share.auto.offset.reset``); False if it had none."""
        found = {p for tid, p in self.initialized_partitions(group_id) if tid == topic_id}
        for partition in found:
            self.partitions.pop((group_id, topic_id, partition), None)
            if self.store is not None:
                self.store.delete(group_id, topic_id, partition)
        return bool(found)

    def next_lock_deadline(self, group_id: str, keys: Iterable[TopicIdPartition]) -> float | None:
        deadlines = [d for tid, p in keys
                     if (sp := self.partitions.get((group_id, tid, p))) is not None
                     and (d := sp.next_deadline()) is not None]
        return min(deadlines, default=None)

    # --- share sessions -----------------------------------------------------------------------
    def session(self, group_id: str, member_id: str, epoch: int,
                named: Iterable[TopicIdPartition],
                forgotten: Iterable[TopicIdPartition] = (), *,
                node_id: int = 0) -> ShareSession | ErrorCode:
        """The share session a ShareFetch / ShareAcknowledge of ``epoch`` continues on broker
        ``node_id`` (opened at epoch 0, closed at -1: returned one last time), or the error
        Kafka answers."""
        key = (node_id, group_id, member_id)
        if epoch == INITIAL_SESSION_EPOCH:
            opened = self.sessions[key] = ShareSession(1, set(named))
            return opened
        session = self.sessions.get(key)
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND
        if epoch == FINAL_SESSION_EPOCH:
            del self.sessions[key]
            return session
        if epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH
        session.partitions |= set(named)
        session.partitions -= set(forgotten)
        session.epoch = 1 if epoch == 0x7FFFFFFF else epoch + 1
        return session
