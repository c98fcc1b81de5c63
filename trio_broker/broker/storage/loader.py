"""Loading a partition log from its directory (Kafka's ``LogLoader``): recovery lives here.

Why recovery trusts nothing it does not have to: after a clean shutdown the indexes are loaded
(and sanity-checked); otherwise every segment from the last flushed offset (the recovery point)
on is re-read batch by batch, CRC-checked, and cut back to the last whole batch. Data below the
recovery point was fsynced and acknowledged: if it is corrupt the partition stays offline rather
than lose the segments after it. Leftovers of interrupted operations (``.tmp``, ``.deleted``,
``.cleaned``, ``.swap`` files, indexes without a segment) are removed first. The producer state
is then rebuilt from its latest snapshot and the batches after it, markers included, and so are
the aborted-transaction indexes (``.txnindex``) of every segment that was recovered: the rebuild
starts from a snapshot no newer than the first such segment, so it knows which transactions were
open there.

``LogLoader.load`` returns the opened segments and offsets (``LoadedLog``) for ``Log`` to own;
if loading fails, every segment it opened is closed again.
"""

from __future__ import annotations

import logging
import os
import re
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from ...protocol.batch import BatchHeader
from ...protocol.control import read_marker
from ...protocol.errors import CorruptRecordError
from .config import LogConfig
from .index import IndexCorruptError
from .producer_state import ProducerStateManager
from .segment import LogSegment
from .segment_swap import finish_interrupted_swaps
from .txn_index import AbortedTxn

LOGGER = logging.getLogger(__name__)

_SEGMENT_FILE = re.compile(r"([0-9]{20})\.(log|index|timeindex|txnindex)")  # fullmatch


class LoadedLog(NamedTuple):
    """What loading found: the segments (oldest first) and the offsets they imply."""

    segments: list[LogSegment]
    base_offsets: list[int]
    log_start_offset: int
    #: the next offset to assign (the log end offset)
    next_offset: int
    #: every offset below this is known to be on stable storage
    recovery_point: int
    #: an empty directory got its first segment file (the directory needs an fsync)
    created_segment: bool


def new_log(directory: Path, config: LogConfig) -> LoadedLog:
    """A new partition's log, in the directory just made for it: one empty segment (its log
    and index files created), nothing to scan, recover or read."""
    return LoadedLog([LogSegment(directory, 0, config)], [0], 0, 0, 0, created_segment=True)


class LogLoader:
    """Opens the segments of one partition directory, recovering what may be torn."""

    def __init__(self, directory: Path, config: LogConfig,
                 producer_state: ProducerStateManager) -> None:
        self.directory = directory
        self.config = config
        self._producer_state = producer_state
        self._segments: list[LogSegment] = []
        self._base_offsets: list[int] = []
        self._next_offset = 0
        self._log_start_offset = 0
        self._recovery_point = 0
        self.created_segment = False
        #: the first segment whose aborted-transaction index must be rebuilt (None: none)
        self._rebuild_txn_from: int | None = None

    def load(self, recovery_point: int, clean_shutdown: bool, now_ms: int) -> LoadedLog:
        try:
            self._load(recovery_point, clean_shutdown)
            self._load_producer_state(now_ms)
        except BaseException:
            for segment in self._segments:
                segment.close()
            raise
        return LoadedLog(self._segments, self._base_offsets, self._log_start_offset,
                         self._next_offset, self._recovery_point, self.created_segment)

    def _load(self, recovery_point: int, clean_shutdown: bool) -> None:
        base_offsets = self._scan_directory()
        if not base_offsets:
            base_offsets = [0]
            self.created_segment = True
        for base in base_offsets:
            self._add_segment(LogSegment(self.directory, base, self.config))
        if clean_shutdown:
            first_to_recover = len(self._segments)
        else:
            first_to_recover = max(0, bisect_right(self._base_offsets, recovery_point) - 1)
        truncated_early = False
        last = len(self._segments) - 1
        for i, segment in enumerate(self._segments[:first_to_recover]):
            try:
                segment.load_trusted()
            except IndexCorruptError as exc:
                if i < last:
                    _refuse_if_corrupt(segment)
                LOGGER.warning("Rebuilding the indexes of %s: %s", segment.log_path, exc)
                self._txn_index_lost(i)
                truncated, reason = segment.recover()
                if reason is not None:
                    self._truncated_at(i, truncated, reason)
                    truncated_early = True
                    break
            except CorruptRecordError as exc:
                if i < last:
                    raise _below_recovery_point(segment, exc) from exc
                LOGGER.warning("Recovering %s and later segments: %s", segment.log_path, exc)
                first_to_recover = i
                break
        if not truncated_early:
            self._recover_segments(first_to_recover)
        active = self._segments[-1]
        self._next_offset = active.next_offset
        self._log_start_offset = self._segments[0].base_offset
        self._recovery_point = (
            self._next_offset if clean_shutdown else min(recovery_point, self._next_offset)
        )

    def _scan_directory(self) -> list[int]:
        """Base offsets of the segments on disk; removes leftovers of interrupted operations."""
        logs: set[int] = set()
        indexes: dict[int, list[Path]] = {}
        finish_interrupted_swaps(self.directory)
        for path in self.directory.iterdir():
            if path.name.endswith((".tmp", ".deleted", ".cleaned", ".swap")):
                path.unlink()
                continue
            match = _SEGMENT_FILE.fullmatch(path.name)
            if match is None:
                continue
            base = int(match.group(1))
            if match.group(2) == "log":
                logs.add(base)
            else:
                indexes.setdefault(base, []).append(path)
        for base, paths in indexes.items():
            if base not in logs:
                for path in paths:
                    LOGGER.warning("Deleting index %s, which has no log segment", path)
                    path.unlink()
        return sorted(logs)

    def _txn_index_lost(self, i: int) -> None:
        if self._rebuild_txn_from is None or i < self._rebuild_txn_from:
            self._rebuild_txn_from = i

    def _recover_segments(self, first: int) -> None:
        if first < len(self._segments):
            self._txn_index_lost(first)
        for i in range(first, len(self._segments)):
            truncated, reason = self._segments[i].recover()
            if reason is not None:
                self._truncated_at(i, truncated, reason)
                return

    def _truncated_at(self, i: int, truncated: int, reason: str) -> None:
        """Report a truncation of segment ``i`` and drop the segments after it."""
        segment = self._segments[i]
        LOGGER.warning(
            "Truncated %d bytes of torn or corrupt data from %s at position %d (%s); "
            "kept offsets %d..%d",
            truncated,
            segment.log_path,
            segment.size,
            reason,
            segment.base_offset,
            segment.next_offset - 1,
        )
        for later in self._segments[i + 1 :]:
            LOGGER.warning(
                "Deleting %s (%d bytes, from offset %d): it follows corrupt data",
                later.log_path,
                later.size,
                later.base_offset,
            )
            later.delete()
        del self._segments[i + 1 :]
        del self._base_offsets[i + 1 :]

    def _load_producer_state(self, now_ms: int) -> None:
        state = self._producer_state
        rebuild = self._rebuild_txn_from
        limit = self._next_offset
        if rebuild is not None:  # replay from no later than the first index to rebuild
            limit = min(limit, self._segments[rebuild].base_offset)
        snapshot = state.load_latest_snapshot(limit)
        start = self._log_start_offset
        if snapshot is not None:
            start = max(snapshot, start)
        rebuilt = set()
        for index, segment, pos, header in self._iter_headers_from(start):
            if header.producer_id < 0:
                continue
            if not header.is_control:
                state.update(header, header.base_offset, header.last_offset,
                             header.max_timestamp, header.max_timestamp)
                continue
            marker = read_marker(os.pread(segment.fd, header.size, pos), 0, header)
            if marker is None:
                continue
            completed = state.apply_marker(header.producer_id, header.producer_epoch,
                                           marker.coordinator_epoch, header.base_offset,
                                           header.max_timestamp, committed=marker.committed)
            if completed is not None and completed.aborted and rebuild is not None and (
                    index >= rebuild):
                segment.txn_index.append(AbortedTxn(
                    completed.producer_id, completed.first_offset, completed.last_offset,
                    state.last_stable_offset_after(completed)), persist=False)
                rebuilt.add(index)
        for index in sorted(rebuilt):
            self._segments[index].txn_index.persist_all()
        state.truncate_head(self._log_start_offset)
        state.remove_expired(now_ms)

    def _iter_headers_from(self, offset: int,
                           ) -> Iterator[tuple[int, LogSegment, int, BatchHeader]]:
        """(segment index, segment, position, header) of every batch from ``offset`` on."""
        first = max(0, bisect_right(self._base_offsets, offset) - 1)
        for index in range(first, len(self._segments)):
            segment = self._segments[index]
            start = 0
            if segment.base_offset < offset:
                found = segment.find_batch(offset)
                if found is None:
                    continue
                start = found[0]
            for pos, header in segment.scan(start):
                yield index, segment, pos, header

    def _add_segment(self, segment: LogSegment) -> None:
        self._segments.append(segment)
        self._base_offsets.append(segment.base_offset)


def _below_recovery_point(segment: LogSegment, exc: Exception) -> CorruptRecordError:
    # Data below the recovery point was fsynced and acknowledged, and later segments hold more
    # of it: truncating here would delete them. The partition stays offline for an operator.
    return CorruptRecordError(
        f"{segment.log_path} is corrupt below the recovery point ({exc}); not truncating, "
        "which would delete the valid segments after it"
    )


def _refuse_if_corrupt(segment: LogSegment) -> None:
    """Raise CorruptRecordError unless every batch of a flushed segment is whole and valid."""
    next_offset = segment.base_offset
    try:
        for pos, header in segment.scan(verify=True):
            if header.base_offset < next_offset or header.last_offset_delta < 0:
                raise CorruptRecordError(
                    f"batch at position {pos} has offsets {header.base_offset}.."
                    f"{header.last_offset}, expected {next_offset} or later"
                )
            next_offset = header.next_offset
    except CorruptRecordError as exc:
        raise _below_recovery_point(segment, exc) from exc
