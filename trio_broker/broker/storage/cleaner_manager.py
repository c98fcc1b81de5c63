"""Which log to compact next, and where each cleaning got to (Kafka's ``LogCleanerManager``).

Why apart from ``cleaner.py``: choosing is bookkeeping over the broker's logs (dirty ratios,
compaction lags, the cleaner checkpoint), cleaning is file work on one log. Methods here are
blocking and meant for worker threads (``log.cleaner.threads`` of them, one partition each at a
time: a partition being cleaned is skipped by the others).

A log is cleanable when its ``cleanup.policy`` contains ``compact`` and its *dirty ratio*
(bytes after the cleaner checkpoint / all bytes of the inactive segments, Kafka's
``cleanableRatio``) exceeds ``min.cleanable.dirty.ratio``, or its oldest uncleaned record is
older than ``max.compaction.lag.ms``. The dirty section ends at the first uncleanable offset: the
active segment, the last stable offset (an open transaction), or the first segment with a record
newer than ``min.compaction.lag.ms``, whichever comes first, rounded down to a segment boundary.

The checkpoint (``cleaner-offset-checkpoint`` in each log dir, Kafka's name and layout) records
where each partition's dirty section starts, so a restart does not re-read what is clean.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from .checkpoint import OffsetCheckpointFile
from .cleaner import (
    OFFSET_MAP_ENTRY_BYTES,
    CleanerStats,
    Throttler,
    TxnTracker,
    build_offset_map,
    clean_group,
    group_segments,
)
from .log import Log

LOGGER = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
_LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor's default


@attrs.frozen
class DirtyState:
    """Where a log's dirty section is and whether it is due (Kafka's ``LogToClean``)."""

    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int
    #: how long past max.compaction.lag.ms its oldest dirty record is (0: not overdue)
    compaction_delay_ms: int

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@attrs.define
class CleanerMetrics:
    runs: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    max_dirty_ratio: float = 0.0
    max_compaction_delay_ms: int = 0
    last_run_monotonic: float = 0.0
    last_clean_secs: float = 0.0
    last_recopy_percent: float = 0.0


def cleaner_settings(value_of: Callable[[str], Any]) -> dict[str, Any]:
    """``LogCleaner``'s keyword arguments from a broker config's ``value_of``."""
    return {"dedupe_buffer_size": value_of("log.cleaner.dedupe.buffer.size"),
            "threads": value_of("log.cleaner.threads"),
            "io_max_bytes_per_second": value_of("log.cleaner.io.max.bytes.per.second"),
            "backoff_ms": value_of("log.cleaner.backoff.ms")}


class LogCleaner:
    """Compacts the logs of ``logs()`` (each paired with its log dir)."""

    def __init__(self, logs: Callable[[], Iterable[tuple[Log, Path]]], *,
                 dedupe_buffer_size: int = 134217728, threads: int = 1,
                 io_max_bytes_per_second: float = float("inf"),
                 backoff_ms: int = 15000) -> None:
        self._logs = logs
        self.throttler = Throttler(io_max_bytes_per_second)
        self.capacity = 1
        self.threads = 1
        self.backoff_ms = backoff_ms
        #: cleaner tasks running now (the broker's tasks keep it; they follow ``threads``)
        self.running_threads = 0
        self.reconfigure(dedupe_buffer_size=dedupe_buffer_size, threads=threads,
                         io_max_bytes_per_second=io_max_bytes_per_second, backoff_ms=backoff_ms)
        self.metrics = CleanerMetrics()
        self._lock = threading.Lock()
        self._in_progress: set[tuple[str, int]] = set()
        self._checkpoints: dict[Path, dict[tuple[str, int], int]] = {}
        #: each log's earliest delete horizon kept by its last cleaning (in memory only)
        self._horizons: dict[tuple[str, int], int] = {}

    @property
    def io_max_bytes_per_second(self) -> float:
        return self.throttler.bytes_per_second

    def reconfigure(self, *, dedupe_buffer_size: int, threads: int,
                    io_max_bytes_per_second: float, backoff_ms: int) -> None:
        """Kafka's dynamic cleaner configs (``log.cleaner.threads``, ``.dedupe.buffer.size``,
        ``.io.max.bytes.per.second``, ``.backoff.ms``): the I/O rate applies at once, even to
        cleanings under way; the map size from the next cleaning; the thread count is for the
        broker's cleaner tasks to follow (``threads``, 0 stops cleaning)."""
        self.threads = max(0, threads)
        self.capacity = max(1, int(dedupe_buffer_size / max(1, threads)
                                   / OFFSET_MAP_ENTRY_BYTES * _LOAD_FACTOR))
        self.throttler.bytes_per_second = io_max_bytes_per_second
        self.backoff_ms = backoff_ms

    # --- checkpoint ---------------------------------------------------------------------------

    def _checkpoint(self, log_dir: Path) -> dict[tuple[str, int], int]:
        points = self._checkpoints.get(log_dir)
        if points is None:
            try:
                points = OffsetCheckpointFile(log_dir / CLEANER_CHECKPOINT).read()
            except (OSError, ValueError) as exc:
                LOGGER.warning("Ignoring a bad cleaner checkpoint in %s: %s", log_dir, exc)
                points = {}
            self._checkpoints[log_dir] = points
        return points

    def _record(self, log: Log, log_dir: Path, offset: int) -> None:
        with self._lock:
            points = self._checkpoint(log_dir)
            points[(log.topic, log.partition)] = offset
            live = {(lg.topic, lg.partition) for lg, d in self._logs() if d == log_dir}
            for key in [k for k in points if k not in live]:
                del points[key]
            OffsetCheckpointFile(log_dir / CLEANER_CHECKPOINT).write(dict(points))

    # --- choosing -----------------------------------------------------------------------------

    def dirty_state(self, log: Log, log_dir: Path, now_ms: int) -> DirtyState | None:
        """The log's dirty section now, or None if it has nothing to clean ever (not compacted,
        no inactive segment)."""
        config = log.config
        if "compact" not in config.cleanup_policy.split(","):
            return None
        segments, start, lso, _, _ = log.cleaner_view()
        if not segments:
            return None
        with self._lock:
            checkpoint = self._checkpoint(log_dir).get((log.topic, log.partition), start)
        end = log.log_end_offset
        first_dirty = checkpoint if start <= checkpoint <= end else start
        active_base = log.segment_base_offsets()[-1]
        limit = min(active_base, lso)
        if config.min_compaction_lag_ms > 0:
            for segment in segments:
                if (segment.next_offset > first_dirty and segment.size
                        and segment.largest_timestamp() > now_ms - config.min_compaction_lag_ms):
                    limit = min(limit, segment.base_offset)
                    break
        bases = [s.base_offset for s in segments if s.base_offset <= limit]
        first_uncleanable = bases[-1] if bases and limit < active_base else active_base
        if first_uncleanable <= first_dirty:
            first_uncleanable = first_dirty
        clean = sum(s.size for s in segments if s.next_offset <= first_dirty)
        dirty = sum(s.size for s in segments
                    if s.next_offset > first_dirty and s.base_offset < first_uncleanable)
        delay = 0
        for segment in segments:
            if segment.next_offset > first_dirty and segment.base_offset < first_uncleanable:
                born = segment.rolling_base_timestamp
                if born is not None:
                    delay = max(0, now_ms - born - config.max_compaction_lag_ms)
                break
        return DirtyState(first_dirty, first_uncleanable, clean, dirty, delay)

    def dirty_ratio(self, log: Log, log_dir: Path, now_ms: int) -> float | None:
        """The log's cleanable dirty ratio now (0 with nothing inactive yet), None if it is not
        compacted."""
        if "compact" not in log.config.cleanup_policy.split(","):
            return None
        state = self.dirty_state(log, log_dir, now_ms)
        return 0.0 if state is None else state.ratio

    def _candidates(self, now_ms: int) -> list[tuple[DirtyState, Log, Path]]:
        found = []
        max_ratio, max_delay = 0.0, 0
        for log, log_dir in self._logs():
            if log.closed:
                continue
            try:
                state = self.dirty_state(log, log_dir, now_ms)
            except Exception:  # a closed or failing log: the next pass looks again
                LOGGER.debug("Cannot examine %s for cleaning", log.name, exc_info=True)
                continue
            if state is None:
                continue
            horizon = self._horizons.get((log.topic, log.partition))
            if state.dirty_bytes == 0:
                # nothing dirty, but tombstones or markers whose delete horizon has passed go
                # (Kafka's cleaning of logs whose latest delete horizon expired)
                if horizon is not None and horizon <= now_ms:
                    found.append((state, log, log_dir))
                continue
            max_ratio = max(max_ratio, state.ratio)
            max_delay = max(max_delay, state.compaction_delay_ms)
            if state.ratio > log.config.min_cleanable_dirty_ratio or state.compaction_delay_ms:
                found.append((state, log, log_dir))
        self.metrics.max_dirty_ratio = max_ratio
        self.metrics.max_compaction_delay_ms = max_delay
        found.sort(key=lambda item: (-item[0].compaction_delay_ms, -item[0].ratio))
        return found

    # --- cleaning -----------------------------------------------------------------------------

    def clean_once(self, now_ms: int) -> CleanerStats | None:
        """Clean the dirtiest due log that no other thread is cleaning (a cleaner thread's
        loop body); None if none is due."""
        for state, log, log_dir in self._candidates(now_ms):
            stats = self._clean_exclusively(log, log_dir, now_ms, state)
            if stats is not None:
                return stats
        return None

    def compact(self, logs: Sequence[tuple[Log, Path]], now_ms: int) -> CleanerStats:
        """Clean ``logs`` now, whatever their dirty ratio (the "compact now" test hook)."""
        total = CleanerStats()
        for log, log_dir in logs:
            state = self.dirty_state(log, log_dir, now_ms)
            if state is None:
                continue
            stats = self._clean_exclusively(log, log_dir, now_ms, state, wait=True)
            if stats is not None:
                for field in attrs.fields(CleanerStats):
                    if field.name != "earliest_horizon":
                        setattr(total, field.name,
                                getattr(total, field.name) + getattr(stats, field.name))
                horizons = [h for h in (total.earliest_horizon, stats.earliest_horizon)
                            if h is not None]
                total.earliest_horizon = min(horizons, default=None)
        return total

    def _clean_exclusively(self, log: Log, log_dir: Path, now_ms: int, state: DirtyState, *,
                           wait: bool = False) -> CleanerStats | None:
        key = (log.topic, log.partition)
        while True:
            with self._lock:
                if key not in self._in_progress:
                    self._in_progress.add(key)
                    break
            if not wait:
                return None
            threading.Event().wait(0.01)  # another thread is cleaning it: it finishes soon
        try:
            if wait:  # the state may have moved while waiting
                state = self.dirty_state(log, log_dir, now_ms) or state
            return self.clean_log(log, log_dir, now_ms, state)
        finally:
            with self._lock:
                self._in_progress.discard(key)

    def clean_log(self, log: Log, log_dir: Path, now_ms: int,
                  state: DirtyState) -> CleanerStats:
        """One cleaning of ``log`` up to its first uncleanable offset (Kafka's ``doClean``)."""
        stats = CleanerStats()
        started = time.monotonic()
        segments, _start, _lso, producer_last, aborted = log.cleaner_view()
        throttler = self.throttler
        offsets, end = build_offset_map(segments, state.first_dirty, state.first_uncleanable,
                                        self.capacity, throttler, stats, aborted)
        txns = TxnTracker(aborted)
        to_clean = [s for s in segments if s.base_offset < end]
        groups = group_segments(to_clean, log.config.segment_bytes)
        for i, group in enumerate(groups):
            group_end = groups[i + 1][0].base_offset if i + 1 < len(groups) else end
            swap = clean_group(log.directory, group, group_end, log.config, offsets,
                               now_ms=now_ms,
                               producer_last=producer_last, throttler=throttler, stats=stats,
                               txns=txns)
            if not log.replace_segments(group, swap):
                LOGGER.info("Cleaning of %s stopped: its segments changed meanwhile", log.name)
                return stats
        self._record(log, log_dir, end)
        with self._lock:
            if stats.earliest_horizon is None:
                self._horizons.pop((log.topic, log.partition), None)
            else:
                self._horizons[(log.topic, log.partition)] = stats.earliest_horizon
        metrics = self.metrics
        metrics.runs += 1
        metrics.bytes_read += stats.bytes_read
        metrics.bytes_written += stats.bytes_written
        metrics.last_run_monotonic = time.monotonic()
        metrics.last_clean_secs = metrics.last_run_monotonic - started
        metrics.last_recopy_percent = 100 * stats.bytes_written / max(1, stats.bytes_read)
        LOGGER.info("Cleaned %s up to offset %d: %d segment(s), %d of %d records removed, "
                    "%d bytes read, %d written", log.name, end, stats.segments_cleaned,
                    stats.records_removed, stats.records_read, stats.bytes_read,
                    stats.bytes_written)
        return stats


__all__ = ["CLEANER_CHECKPOINT", "CleanerMetrics", "DirtyState", "LogCleaner", "cleaner_settings"]
