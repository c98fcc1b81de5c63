"""The group coordinator: one broker's consumer groups and committed offsets, behind one face.

Why a face over two managers (Kafka's ``GroupCoordinatorShard`` over ``GroupMetadataManager``
and ``OffsetMetadataManager``): membership and offsets are separate jobs with separate rules,
but they share the groups, one timer task and one lifecycle. This class owns the lifecycle
(load the offsets, run the timers and the writer, shut down in order) and the one request that
needs both halves (DeleteGroups); every other call goes to the manager that owns it.

Everything runs on the event loop and completes synchronously; answers that must wait are
callbacks (see ``membership.py`` and ``offsets.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

import trio

from ..config import BrokerConfig
from ..protocol.errors import ErrorCode
from .group import Group, JoinCallback, SyncCallback
from .membership import GroupMetadataManager, GroupSummary, JoinRequest, LeavingMember, ListedGroup
from .offset_log import DEFAULT_COMPACT_BYTES, OffsetAndMetadata, OffsetLog, TopicPartition
from .offsets import CommitCallback, CommitRequest, OffsetCommitEntry, OffsetMetadataManager
from .timers import DeadlineQueue

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
                 wall_clock_ms: Callable[[], int] = _wall_ms) -> None:
        self.config = config
        self._timers = DeadlineQueue()
        self.membership = GroupMetadataManager(config, self._timers, wall_clock_ms)
        self.offsets = OffsetMetadataManager(
            config, self.membership, self._timers, wall_clock_ms,
            Path(state_dir) / OFFSETS_DIR_NAME, compact_bytes=compact_bytes)

    @property
    def groups(self) -> dict[str, Group]:
        return self.membership.groups

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

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Load committed offsets, then serve timers and offset writes until cancelled."""
        await self.offsets.load()
        self.membership.loaded = True
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._timers.run)
                nursery.start_soon(self.offsets.write_loop)
                task_status.started()
        finally:
            self.membership.loaded = False

    def begin_shutdown(self) -> None:
        """Refuse new requests and answer every held JoinGroup/SyncGroup at once."""
        self.membership.begin_shutdown()
        self.offsets.begin_shutdown()

    def close(self) -> None:
        """Write what is still queued and close the offsets file; safe while ``run`` is live."""
        self.begin_shutdown()
        self.offsets.close()

    # --- membership -------------------------------------------------------------------------

    def join_group(self, request: JoinRequest, respond: JoinCallback) -> None:
        """Answer through ``respond``, now or when the join phase completes."""
        self.membership.join_group(request, respond)

    def sync_group(self, *, group_id: str, generation_id: int, member_id: str,
                   group_instance_id: str | None = None, protocol_type: str | None = None,
                   protocol_name: str | None = None, assignments: list[tuple[str, bytes]],
                   respond: SyncCallback) -> None:
        """Answer through ``respond``, now or when the leader's assignment arrives."""
        self.membership.sync_group(group_id=group_id, generation_id=generation_id,
                                   member_id=member_id, group_instance_id=group_instance_id,
                                   protocol_type=protocol_type, protocol_name=protocol_name,
                                   assignments=assignments, respond=respond)

    def heartbeat(self, *, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None = None) -> ErrorCode:
        return self.membership.heartbeat(group_id=group_id, generation_id=generation_id,
                                         member_id=member_id,
                                         group_instance_id=group_instance_id)

    def leave_group(self, group_id: str, members: Iterable[LeavingMember],
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """(group error, one error per leaving member, in request order)."""
        return self.membership.leave_group(group_id, members)

    def describe_group(self, group_id: str) -> GroupSummary | None:
        return self.membership.describe_group(group_id)

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = (),
                    ) -> list[ListedGroup]:
        """Every group, Empty ones included, optionally filtered by state and type."""
        return self.membership.list_groups(states, types)

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
            removed = self.membership.remove_empty_group(group_id)
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

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                      ) -> tuple[ErrorCode, list[tuple[TopicPartition, OffsetAndMetadata | None]]]:
        """Committed offsets of ``partitions`` (``None``: every committed partition)."""
        return self.offsets.fetch_offsets(group_id, partitions)

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
