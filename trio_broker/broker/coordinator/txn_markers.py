"""Ending a decided transaction: its markers in every partition, a commit's offsets in its
groups (Kafka's ``TransactionMarkerChannelManager`` and the group coordinator's
``completeTransaction``, on one node).

Why it may be repeated: the coordinator calls these after the PrepareCommit/PrepareAbort record is
durable, and again after a crash or a failed write, until both succeed. A second marker for a
transaction already ended in a partition ends nothing (``ProducerStateManager.apply_marker``);
committing the same offsets twice stores the same values.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import trio

from ...protocol.errors import ErrorCode
from ..offload import run_io
from ..storage import LogManager, StorageError
from .coordinator import GroupCoordinator
from .offsets import CommitRequest, OffsetCommitEntry
from .txn_metadata import TopicPartition, TransactionMetadata

LOGGER = logging.getLogger(__name__)

#: one node is the only coordinator there ever was
COORDINATOR_EPOCH = 0


async def write_markers(logs: LogManager, meta: TransactionMetadata, committed: bool,
                        now_ms: int,
                        on_markers: Callable[[Iterable[TopicPartition]], None]) -> bool:
    """A commit or abort marker in each of the transaction's partitions, flushed as the flush
    policy wants; False if the disk failed (the caller retries later)."""
    to_flush = []
    written = []
    for topic, partition in sorted(meta.partitions):
        log = logs.get_log(topic, partition)
        if log is None:
            if (topic, partition) in logs.offline_partitions:
                LOGGER.error("marker for %s-%d: the partition is offline", topic, partition)
                return False  # retried later: after a restart the partition is back
            continue  # deleted since: nothing left to end
        try:
            log.append_marker(meta.producer_id, meta.producer_epoch, committed=committed,
                              coordinator_epoch=COORDINATOR_EPOCH, now_ms=now_ms)
        except StorageError as exc:
            if exc.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
                LOGGER.error("marker for %s-%d failed: %s", topic, partition, exc)
                return False
            # a newer producer epoch already ended it here
            LOGGER.warning("marker for %s-%d refused: %s", topic, partition, exc)
            continue
        written.append((topic, partition))
        if log.needs_flush():
            to_flush.append(log)
    for log in to_flush:
        try:
            await run_io(logs.flush, log)
        except StorageError as exc:
            LOGGER.error("flushing markers of %s failed: %s", log.name, exc)
            return False
    on_markers(written)
    return True


async def commit_offsets(groups: GroupCoordinator, meta: TransactionMetadata) -> bool:
    """Store a committed transaction's offsets (fsynced by the offsets writer); False if not."""
    ok = True
    for group_id, pending in meta.offsets.items():
        if not pending:
            continue
        done = trio.Event()
        results: dict[TopicPartition, ErrorCode] = {}

        def respond(r: dict[TopicPartition, ErrorCode], done: trio.Event = done,
                    results: dict[TopicPartition, ErrorCode] = results) -> None:
            results.update(r)
            done.set()

        entries = [OffsetCommitEntry(t, p, o.offset, o.metadata, o.leader_epoch)
                   for (t, p), o in pending.items()]
        groups.commit_offsets(CommitRequest(group_id, unchecked=True), entries, respond)
        await done.wait()
        if any(results.values()):
            LOGGER.error("committing transactional offsets of group %r failed: %s",
                         group_id, results)
            ok = False
    return ok


__all__ = ["COORDINATOR_EPOCH", "commit_offsets", "write_markers"]
