"""Offsets by time for ListOffsets (Kafka's ``UnifiedLog.fetchOffsetByTimestamp``), over segments.

Why a module of its own: ListOffsets' lookups (the special timestamps: earliest, latest, the
largest timestamp of KIP-734, the local and tiered variants of KIP-405; and v0's offsets by
segment file time) are queries over the segment list, read-only: ``Log`` takes its lock and hands
the segments here, and this module never writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from .leader_epoch import LeaderEpochCache
from .segment import LogSegment

#: ListOffsets' special timestamps (``ListOffsetsRequest``)
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6
NO_TIMESTAMP = -1


class TimestampAndOffset(NamedTuple):
    """One ListOffsets answer: the timestamp found (-1 for the special ones), its offset and the
    leader epoch it was written under (-1 when unknown)."""

    timestamp: int
    offset: int
    leader_epoch: int = -1


def offset_by_timestamp(segments: Sequence[LogSegment], epochs: LeaderEpochCache,
                        target: int, *, log_start: int, log_end: int) -> TimestampAndOffset | None:
    """Kafka's answer for ``target`` (a time or a special timestamp), or None if none exists.

    Without tiered storage the local log is the whole log: EARLIEST_LOCAL is EARLIEST (with the
    epoch of the log start offset), and LATEST_TIERED and EARLIEST_PENDING_UPLOAD have nothing to
    point at (offset -1, epoch -1), as Kafka answers when remote storage is off.
    """
    if target == EARLIEST_TIMESTAMP:
        first = epochs.earliest_entry
        epoch = first.epoch if first is not None and first.start_offset <= log_start else -1
        return TimestampAndOffset(NO_TIMESTAMP, log_start, epoch)
    if target == EARLIEST_LOCAL_TIMESTAMP:
        local = epochs.epoch_for_offset(log_start)
        return TimestampAndOffset(NO_TIMESTAMP, log_start, -1 if local is None else local)
    if target == LATEST_TIMESTAMP:
        latest = epochs.latest_epoch
        return TimestampAndOffset(NO_TIMESTAMP, log_end, -1 if latest is None else latest)
    if target in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
        return TimestampAndOffset(NO_TIMESTAMP, -1, -1)
    if target == MAX_TIMESTAMP:
        # the first segment holding the largest timestamp, then its first such record
        best = max(segments, key=lambda s: s.max_timestamp)
        found = best.find_offset_of_max_timestamp()
    else:
        found = None
        for segment in segments:
            if segment.max_timestamp >= target:
                found = segment.find_offset_by_timestamp(target)
                if found is not None:
                    break
    if found is None:
        return None
    offset, timestamp, epoch = found
    # Records below the log start (DeleteRecords) are gone: with timestamps that never go
    # back, the first one left at or after the time is the log start itself.
    return TimestampAndOffset(timestamp, max(offset, log_start), epoch if epoch >= 0 else -1)


def legacy_offsets_before(segments: Sequence[LogSegment], target: int, max_num_offsets: int, *,
                          log_start: int, log_end: int, now_ms: int) -> list[int]:
    """ListOffsets v0: segment start offsets (and the log end) whose file time is <= ``target``,
    newest first, at most ``max_num_offsets`` (Kafka's ``legacyFetchOffsetsBefore``)."""
    points = [(max(s.base_offset, log_start), s.last_modified_ms) for s in segments]
    if segments[-1].size > 0:
        points.append((log_end, now_ms))
    if target == LATEST_TIMESTAMP:
        start = len(points) - 1
    elif target == EARLIEST_TIMESTAMP:
        start = 0
    else:
        start = len(points) - 1
        while start >= 0 and points[start][1] > target:
            start -= 1
    count = max(0, min(max_num_offsets, start + 1))
    return sorted((points[start - j][0] for j in range(count)), reverse=True)
