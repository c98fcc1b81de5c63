"""What a partition log has made durable, and the fsyncs that make more so (``LogFlusher``).

Why an object of its own: a ``Log`` appends, reads and rolls on the event loop; flushes run in
worker threads (the flusher, shutdown) against the same segments. The flusher keeps the state
only fsyncs change (the recovery point, which changes to the partition directory and its entry
in the log dir are synced, when the last flush ran) and does the file work; the ``Log`` keeps
its one ``threading.Lock`` and calls in under it. A flush is three steps so that the slow fsync
runs without that lock: ``prepare`` (under it) takes *duplicates* of the fds to sync, so a
concurrent roll, retention delete or close can never leave the flush syncing a closed (or
reused) descriptor; ``PendingFlush.fsync`` (without it) syncs them; ``complete`` (under it again)
advances the recovery point.

A new partition's first leader epoch (0 from offset 0) is written to its
``leader-epoch-checkpoint`` without an fsync; the log's first flush (or clean close) syncs it,
before the directories. Nothing is lost by that: until that flush the partition directory's own
entry in its log dir is not synced either (``defer_parent_dir_sync``), so an fsync of the file
could not make it survive a machine crash; and a partition that loses the file before its first
flush comes back with the same state as one that kept it: the topic's record holds the epoch,
the next start takes epoch 1 at the log end offset, and that entry replaces ``0 0`` (an
empty log's start offset) or, for records written back without a flush, answers the epoch 0
queries with the same end offset. Once a flush has made records durable, the file is too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

import attrs

from .config import LogConfig
from .errors import KafkaStorageError
from .files import close_fds, fsync_dir, fsync_fd, fsync_file
from .leader_epoch import LeaderEpochCache
from .segment import LogSegment


@attrs.define
class PendingFlush:
    """The fds one flush syncs (duplicates, owned by it) and what it records once they are."""

    name: str
    target: int
    fds: list[int]
    segments: list[tuple[LogSegment, int]]
    dir_generation: int
    parent_synced: bool
    epochs_version: int | None

    def fsync(self) -> None:
        """Sync and close the fds; run without the log's lock. Raises KafkaStorageError."""
        try:
            for fd in self.fds:
                fsync_fd(fd)
        except OSError as exc:
            raise KafkaStorageError(f"fsync of {self.name} failed: {exc}") from exc
        finally:
            close_fds(self.fds)


class LogFlusher:
    """The durable state of one partition log: its recovery point and its synced directories.

    Called under the log's lock, but for ``needs_flush`` (a hint, read without it, as the flusher
    thread polls every log) and ``PendingFlush.fsync`` (the slow part)."""

    def __init__(self, directory: Path, name: str, epochs: LeaderEpochCache, *,
                 recovery_point: int, dir_changed: bool) -> None:
        self.directory = directory
        self.name = name
        self._epochs = epochs
        #: every offset below this is known to be on stable storage
        self.recovery_point = recovery_point
        # a segment file created or removed bumps the generation; a flush syncs the directory
        # when the generation it saw is not the synced one
        self._dir_generation = 1 if dir_changed else 0
        self._dir_synced_generation = 0
        #: False while a new partition directory's entry in its log dir awaits an fsync
        self._parent_dir_synced = True
        self._last_flush_monotonic = time.monotonic()

    def dir_changed(self) -> None:
        """A segment file was created or removed: the next flush syncs the directory."""
        self._dir_generation += 1

    def defer_parent_dir_sync(self) -> None:
        """See ``Log.defer_parent_dir_sync``."""
        self._parent_dir_synced = False

    def needs_flush(self, segments: Sequence[LogSegment], end_offset: int,
                    config: LogConfig) -> bool:
        """True when flush.messages / flush.ms or a rolled segment calls for an fsync."""
        unflushed = end_offset - self.recovery_point
        if unflushed <= 0:
            return False
        if unflushed >= config.flush_interval_messages:
            return True
        if len(segments) > 1 and segments[-2].size > segments[-2].synced_size:
            return True  # Kafka flushes a segment once it is rolled
        if config.flush_interval_ms is not None:
            elapsed_ms = (time.monotonic() - self._last_flush_monotonic) * 1000
            return elapsed_ms >= config.flush_interval_ms
        return False

    def prepare(self, segments: Sequence[LogSegment], target: int) -> PendingFlush:
        """Duplicate the fds a flush of the data below ``target`` must sync."""
        synced: list[tuple[LogSegment, int]] = []
        fds: list[int] = []
        try:
            for segment in segments:
                if segment.base_offset < target and segment.size > segment.synced_size:
                    fds.extend(segment.sync_fds())
                    synced.append((segment, segment.size))
            epochs = self._epochs
            epochs_version = epochs.version if epochs.unsynced else None
            if epochs_version is not None:  # a new partition's first epoch, before the dirs
                fds.append(os.open(epochs.path, os.O_RDONLY))
            if self._dir_generation != self._dir_synced_generation:
                fds.append(os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY))
            if not self._parent_dir_synced:  # a new partition's entry in its log dir
                fds.append(os.open(self.directory.parent, os.O_RDONLY | os.O_DIRECTORY))
        except OSError as exc:
            close_fds(fds)
            raise KafkaStorageError(f"flushing {self.name} failed: {exc}") from exc
        return PendingFlush(self.name, target, fds, synced, self._dir_generation,
                            self._parent_dir_synced, epochs_version)

    def complete(self, flush: PendingFlush) -> None:
        """Record what ``flush`` synced and advance the recovery point to its target."""
        for segment, size in flush.segments:
            segment.synced_size = max(segment.synced_size, size)
        self._dir_synced_generation = max(self._dir_synced_generation, flush.dir_generation)
        self._parent_dir_synced = self._parent_dir_synced or not flush.parent_synced
        epochs = self._epochs
        if flush.epochs_version is not None and epochs.version == flush.epochs_version:
            epochs.unsynced = False
        self.recovery_point = max(self.recovery_point, flush.target)
        self._last_flush_monotonic = time.monotonic()

    def sync_all(self, segments: Sequence[LogSegment], end_offset: int) -> None:
        """A clean close's fsyncs: every segment, the first epoch, the directories; everything
        below ``end_offset`` is then durable. Raises OSError."""
        for segment in segments:
            if segment.size > segment.synced_size:
                fds = segment.sync_fds()
                try:
                    for fd in fds:
                        fsync_fd(fd)
                finally:
                    close_fds(fds)
                segment.synced_size = segment.size
        if self._epochs.unsynced:  # a new partition's first epoch
            fsync_file(self._epochs.path)
            self._epochs.unsynced = False
        fsync_dir(self.directory)
        if not self._parent_dir_synced:  # a new partition's entry in its log dir
            fsync_dir(self.directory.parent)
            self._parent_dir_synced = True
        self.recovery_point = end_offset


__all__ = ["LogFlusher", "PendingFlush"]
