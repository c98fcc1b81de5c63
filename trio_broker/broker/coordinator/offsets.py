"""Committed offsets (Kafka's ``OffsetMetadataManager``): OffsetCommit, OffsetFetch, OffsetDelete,
offset retention, and the durable writes behind them.

Why answers wait for the disk: an OffsetCommit answer promises durability, so a commit becomes one
record in the offsets file (``offset_log.py``) and is applied and answered only once the record is
fsynced. Records queue here and one writer task writes them in batches, so commits that arrive
together share one fsync; the handler that called is free at once. Commits are validated against
the group's membership (``GroupMetadataManager``), as Kafka validates them against the group.
Writes are applied in the order they were queued, so a fetch that must see every commit already
accepted (OffsetFetch v7+ ``require_stable``) queues an empty record behind them and is answered
when it is reached.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

import attrs
import trio

from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from ..offload import run_io
from .consumer_group import ConsumerGroup
from .group import Group
from .internal_topics import (
    OFFSETS_TOPIC,
    CoordinatorRecord,
    InternalTopics,
    offset_commit_key,
    offset_commit_value,
)
from .membership import GroupMetadataManager
from .offset_log import (
    DEFAULT_COMPACT_BYTES,
    KIND_DELETE_GROUP,
    OffsetAndMetadata,
    OffsetLog,
    OffsetLogError,
    OffsetState,
    TopicPartition,
    encode_record,
)
from .states import GroupState
from .timers import DeadlineQueue

LOGGER = logging.getLogger(__name__)

_S = GroupState


class OffsetCommitEntry(NamedTuple):
    topic: str
    partition: int
    offset: int
    metadata: str | None
    #: OffsetCommit v6+; -1 = unknown
    leader_epoch: int = -1
    #: OffsetCommit v1 only: the client's commit time; -1 = now
    commit_timestamp_ms: int = -1


class CommitRequest(NamedTuple):
    """The request-level fields of an OffsetCommit, as the coordinator validates them."""

    group_id: str
    #: the generation (the member epoch of a consumer group, v9+); -1 = a simple commit
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    #: v2-4: -1 = the broker's retention; else this offset's own expiry
    retention_time_ms: int = -1
    #: v9+: an unknown group with a generation is GROUP_ID_NOT_FOUND, not ILLEGAL_GENERATION
    group_id_not_found_error: bool = False
    #: v0: offsets stored as Kafka stored them in ZooKeeper, without checking membership
    unchecked: bool = False


CommitCallback = Callable[[dict[TopicPartition, ErrorCode]], None]
#: a group of either protocol holds its committed offsets
AnyGroup = Group | ConsumerGroup
FetchResult = tuple[ErrorCode, list[tuple[TopicPartition, OffsetAndMetadata | None]]]


@attrs.define(eq=False)
class _PendingWrite:
    record: bytes
    group: AnyGroup
    #: called with True once durable (apply and answer), False if the write failed
    done: Callable[[bool], None]
    #: the same change as Kafka's records in ``__consumer_offsets``
    kafka: list[CoordinatorRecord] = attrs.field(factory=list)


class OffsetMetadataManager:
    """The committed offsets of every group, kept in ``Group.offsets`` and in ``offset_log``."""

    def __init__(self, config: BrokerConfig, membership: GroupMetadataManager,
                 timers: DeadlineQueue, wall_clock_ms: Callable[[], int], offsets_dir: Path, *,
                 compact_bytes: int = DEFAULT_COMPACT_BYTES,
                 consumer_groups: dict[str, ConsumerGroup] | None = None) -> None:
        self.config = config
        self._membership = membership
        #: KIP-848 groups (their offsets live in them, as a classic group's do)
        self._consumer_groups: dict[str, ConsumerGroup] = (
            {} if consumer_groups is None else consumer_groups)
        self._timers = timers
        self._wall_ms = wall_clock_ms
        self.log = OffsetLog(offsets_dir, compact_bytes=compact_bytes)
        #: records waiting for the writer; the first ``_writes_in_flight`` are being written
        self._writes: list[_PendingWrite] = []
        self._writes_in_flight = 0
        self._writes_wakeup = trio.Event()
        self._closed = False
        #: what ``read`` found, for ``load`` to take
        self._read: OffsetState | None = None
        #: where Kafka's offset commit records go too (None: nowhere)
        self.internal: InternalTopics | None = None

    def read(self) -> None:
        """Open the offsets file now, blocking (from a worker thread); ``load`` takes it."""
        self._read = self.log.open()

    async def load(self) -> None:
        """Read the offsets file (in a worker thread, unless ``read`` did) into groups without
        members."""
        state, self._read = self._read, None
        if state is None:
            state = await run_io(self.log.open)
        now_ms = self._wall_ms()
        groups = self._membership.groups
        for group_id, offsets in state.items():
            loaded = self._group(group_id)
            if loaded is not None:  # its membership was loaded from the group metadata file
                loaded.offsets.update(offsets)
                continue
            # A group without members; its offsets' retention clock starts now.
            groups[group_id] = Group(group_id, state_since_ms=now_ms, offsets=offsets)
        self._schedule_retention_check()

    def _group(self, group_id: str) -> AnyGroup | None:
        group = self._membership.groups.get(group_id)
        return group if group is not None else self._consumer_groups.get(group_id)

    def begin_shutdown(self) -> None:
        """Queue nothing more: later records are refused, the writer stops after its batch."""
        self._closed = True

    def close(self) -> None:
        """Write what is still queued, answer its requests and close the offsets file.

        Every acknowledged commit is already fsynced. Records queued but not yet handed to the
        writer (expiries, commits not yet answered) are written here and their requests answered;
        a write already running finishes first (the file's lock), and later commits are refused.
        """
        self.begin_shutdown()
        queued = self._writes[self._writes_in_flight:]
        del self._writes[self._writes_in_flight:]
        ok = True
        try:
            self.log.close([w.record for w in queued])
        except (OSError, OffsetLogError) as exc:
            ok = False
            LOGGER.error("writing %d queued offset records at shutdown failed: %s",
                         len(queued), exc)
        if ok and self.internal is not None:
            self.internal.append_if_exists(OFFSETS_TOPIC, _by_group(queued))
        for w in queued:
            w.done(ok)

    def delete_group_offsets(self, group: AnyGroup, done: Callable[[bool], None]) -> None:
        """DeleteGroups' offsets half: a durable tombstone for ``group``, removed already."""
        LOGGER.info("group %s: deleted with %d committed offsets", group.group_id,
                    len(group.offsets))
        self._enqueue(group, encode_record(group.group_id, (), kind=KIND_DELETE_GROUP), done,
                      _tombstones(group.group_id, group.offsets))

    # --- OffsetCommit / OffsetFetch ---------------------------------------------------------

    def commit_offsets(self, request: CommitRequest, offsets: Iterable[OffsetCommitEntry],
                       respond: CommitCallback) -> None:
        """Validate, write one fsynced record, then answer through ``respond``."""
        offsets = list(offsets)
        r = request
        error = self._validate_commit(r)
        if error:
            return respond({(o.topic, o.partition): error for o in offsets})
        membership = self._membership
        group = self._group(r.group_id)
        if group is None:  # a simple (admin) commit creates its group
            group = membership.new_group(r.group_id)
        elif isinstance(group, ConsumerGroup):
            pass
        elif r.member_id in group.members and group.is_in(_S.STABLE, _S.PREPARING_REBALANCE):
            # A commit keeps the session alive, as Kafka's does in these two states.
            membership.schedule_session(group, group.members[r.member_id])
        max_meta = self.config.offset_metadata_max_bytes
        now_ms = self._wall_ms()
        expire_ms = now_ms + r.retention_time_ms if r.retention_time_ms >= 0 else -1
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        for o in offsets:
            tp = (o.topic, o.partition)
            if o.metadata is not None and len(o.metadata.encode("utf-8")) > max_meta:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                committed_ms = o.commit_timestamp_ms if o.commit_timestamp_ms != -1 else now_ms
                accepted[tp] = OffsetAndMetadata(o.offset, o.metadata, committed_ms, expire_ms,
                                                 o.leader_epoch)
                results[tp] = ErrorCode.NONE
        if not accepted:
            return respond(results)

        def durable(ok: bool) -> None:
            if ok:
                group.offsets.update(accepted)
            else:
                for tp in accepted:
                    results[tp] = ErrorCode.COORDINATOR_NOT_AVAILABLE
            respond(results)

        self._enqueue(group, encode_record(r.group_id, accepted.items()), durable,
                      [(offset_commit_key(r.group_id, t, p),
                        offset_commit_value(om.offset, om.leader_epoch, om.metadata,
                                            om.commit_timestamp_ms, om.expire_timestamp_ms))
                       for (t, p), om in accepted.items()])
        return None

    def validate_txn_commit(self, r: CommitRequest) -> ErrorCode:
        """Kafka's ``validateTxnOffsetCommit``: membership is checked only when the request
        names a member or generation (TxnOffsetCommit v3+, KIP-447); older ones are not."""
        membership = self._membership
        if not membership.loaded:
            return membership.not_ready_error
        if not r.group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = membership.groups.get(r.group_id)
        if group is None or (r.generation_id < 0 and not r.member_id
                             and r.group_instance_id is None):
            return ErrorCode.NONE
        error = group.validate_member(r.member_id, r.group_instance_id)
        if error:
            return error
        if r.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def _validate_commit(self, r: CommitRequest) -> ErrorCode:
        """Kafka's ``validateOffsetCommit`` for a classic group."""
        membership = self._membership
        if not membership.loaded:
            return membership.not_ready_error
        if not r.group_id:
            return ErrorCode.INVALID_GROUP_ID
        if r.unchecked:
            return ErrorCode.NONE
        group = self._group(r.group_id)
        if isinstance(group, ConsumerGroup):
            # v9+ carries the member epoch; a consumer-group member must use it
            return group.validate_offset_commit(
                r.member_id, r.generation_id, 9 if r.group_id_not_found_error else 8)
        if group is None:
            if r.generation_id < 0:
                return ErrorCode.NONE
            return (ErrorCode.GROUP_ID_NOT_FOUND if r.group_id_not_found_error
                    else ErrorCode.ILLEGAL_GENERATION)
        if r.generation_id < 0 and group.is_in(_S.EMPTY):
            return ErrorCode.NONE  # a simple commit to a group without members
        if r.generation_id >= 0 or r.member_id or r.group_instance_id is not None:
            error = group.validate_member(r.member_id, r.group_instance_id)
            if error:
                return error
            if r.generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not group.is_in(_S.EMPTY):
            # A simple commit to a group that is managed by the coordinator right now.
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(_S.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None, *,
                      member_id: str | None = None, member_epoch: int = -1) -> FetchResult:
        """Committed offsets of ``partitions`` (``None``: every committed partition); a
        consumer-group member fetching (v9+) must be current."""
        membership = self._membership
        if not membership.loaded:
            return membership.not_ready_error, []
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        group = self._group(group_id)
        if isinstance(group, ConsumerGroup):
            error = group.validate_offset_fetch(member_id, member_epoch)
            if error:
                return error, []
        offsets = {} if group is None else group.offsets
        if partitions is None:
            return ErrorCode.NONE, sorted(offsets.items())
        return ErrorCode.NONE, [(tp, offsets.get(tp)) for tp in partitions]

    def after_pending_writes(self, group_id: str, done: Callable[[], None]) -> bool:
        """Call ``done`` once every offset record of ``group_id`` queued so far is applied.

        Returns False (and never calls ``done``) when nothing is pending: the caller goes on.
        OffsetFetch ``require_stable`` waits here, so it sees every commit already accepted.
        """
        group = self._group(group_id)
        if group is None or not group.inflight_writes or self._closed:
            return False
        self._enqueue(group, b"", lambda ok: done())
        return True

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition],
                       respond: Callable[[ErrorCode, dict[TopicPartition, ErrorCode]], None],
                       ) -> None:
        """OffsetDelete: drop committed offsets of topics the group does not consume.

        Kafka's rules: an unknown group is GROUP_ID_NOT_FOUND; a group with members is
        NON_EMPTY_GROUP unless it uses the consumer protocol, and then each topic it subscribes
        to is GROUP_SUBSCRIBED_TO_TOPIC. Answered once the tombstones are durable.
        """
        membership = self._membership
        if not membership.loaded:
            return respond(membership.not_ready_error, {})
        if not group_id:
            return respond(ErrorCode.INVALID_GROUP_ID, {})
        group = self._group(group_id)
        if group is None:
            return respond(ErrorCode.GROUP_ID_NOT_FOUND, {})
        if not group.is_empty and not group.uses_consumer_protocol:
            return respond(ErrorCode.NON_EMPTY_GROUP, {})
        results: dict[TopicPartition, ErrorCode] = {}
        doomed: list[TopicPartition] = []
        for tp in partitions:
            if group.is_subscribed_to(tp[0]):
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                results[tp] = ErrorCode.NONE
                if tp in group.offsets:
                    doomed.append(tp)
        if not doomed:
            return respond(ErrorCode.NONE, results)

        def durable(ok: bool) -> None:
            if not ok:
                return respond(ErrorCode.COORDINATOR_NOT_AVAILABLE, {})
            for tp in doomed:
                group.offsets.pop(tp, None)
            LOGGER.info("group %s: %d committed offsets deleted", group_id, len(doomed))
            return respond(ErrorCode.NONE, results)

        self._enqueue(group, encode_record(group_id, ((tp, None) for tp in doomed)), durable,
                      _tombstones(group_id, doomed))
        return None

    # --- durable writes ---------------------------------------------------------------------

    def _enqueue(self, group: AnyGroup, record: bytes, done: Callable[[bool], None],
                 kafka: list[CoordinatorRecord] | None = None) -> None:
        if self._closed:
            done(False)
            return
        group.inflight_writes += 1

        def finish(ok: bool) -> None:
            group.inflight_writes -= 1
            done(ok)

        self._writes.append(_PendingWrite(record, group, finish, kafka or []))
        self._writes_wakeup.set()

    async def write_loop(self) -> None:
        """Write queued records in batches; one fsync answers every commit in a batch."""
        while not self._closed:
            if not self._writes:
                self._writes_wakeup = trio.Event()
                await self._writes_wakeup.wait()
                continue
            if self.internal is not None:
                await self.internal.prepare(OFFSETS_TOPIC)
            # The batch stays queued until written: if ``run`` is cancelled before the thread
            # starts, ``close()`` still writes it.
            batch = list(self._writes)
            self._writes_in_flight = len(batch)
            ok = True
            try:
                await run_io(self.log.append, [w.record for w in batch])
            except (OSError, OffsetLogError) as exc:
                ok = False
                LOGGER.error("writing %d offset records to %s failed: %s", len(batch),
                             self.log.path, exc)
            finally:
                self._writes_in_flight = 0
            del self._writes[:len(batch)]
            for w in batch:
                w.done(ok)
            if ok and self.internal is not None:
                self.internal.append_if_exists(OFFSETS_TOPIC, _by_group(batch))
            if ok and not self._closed and self.log.should_compact():
                snapshot = {g.group_id: dict(g.offsets) for g in self._all_groups() if g.offsets}
                try:
                    await run_io(self.log.compact, snapshot)
                except (OSError, OffsetLogError) as exc:
                    LOGGER.error("compacting %s failed, still appending to it: %s",
                                 self.log.path, exc)

    # --- offset retention -------------------------------------------------------------------

    def _schedule_retention_check(self) -> None:
        def check() -> None:
            self.expire_offsets()
            self._schedule_retention_check()

        interval_s = self.config.offsets_retention_check_interval_ms / 1000
        self._timers.schedule(("retention",), trio.current_time() + interval_s, check)

    def expire_offsets(self, now_ms: int | None = None) -> int:
        """Expire offsets of groups without members; remove groups left with nothing.

        An offset expires ``offsets.retention.minutes`` after the later of its commit and the
        moment its group became empty (or at the explicit expiry its commit asked for). Returns
        the number of offsets removed.
        """
        now_ms = self._wall_ms() if now_ms is None else now_ms
        retention_ms = self.config.offsets_retention_minutes * 60_000
        removed = 0
        for group in self._all_groups():
            if not group.is_empty or group.inflight_writes:
                continue
            expired = [tp for tp, om in group.offsets.items()
                       if now_ms >= (om.expire_timestamp_ms if om.expire_timestamp_ms >= 0 else
                                     max(om.commit_timestamp_ms, group.state_since_ms)
                                     + retention_ms)]
            if expired:
                for tp in expired:
                    del group.offsets[tp]
                removed += len(expired)
                LOGGER.info("group %s: %d committed offsets expired", group.group_id,
                            len(expired))
                self._enqueue(group, encode_record(group.group_id,
                                                   ((tp, None) for tp in expired)),
                              lambda ok: None, _tombstones(group.group_id, expired))
            if not group.offsets:
                if isinstance(group, ConsumerGroup):
                    self.remove_consumer_group(group)
                else:
                    self._membership.remove_dead_group(group, now_ms)
        return removed

    def _all_groups(self) -> list[AnyGroup]:
        return [*self._membership.groups.values(), *self._consumer_groups.values()]

    def remove_consumer_group(self, group: ConsumerGroup) -> None:
        """Offset retention's membership half for a consumer group left without offsets; the
        coordinator replaces it to write the deletion too."""
        self._consumer_groups.pop(group.group_id, None)


def _by_group(writes: Iterable[_PendingWrite]) -> dict[str, list[CoordinatorRecord]]:
    by_key: dict[str, list[CoordinatorRecord]] = {}
    for w in writes:
        by_key.setdefault(w.group.group_id, []).extend(w.kafka)
    return by_key


def _tombstones(group_id: str, partitions: Iterable[TopicPartition]) -> list[CoordinatorRecord]:
    """Kafka's OffsetCommitKey tombstones of ``partitions``."""
    return [(offset_commit_key(group_id, t, p), None) for t, p in partitions]
