"""A partition log's durability duties: when to fsync, the fsync itself, and the clean close.

Why apart from ``log.py``: these run in worker threads (the flusher, shutdown) against the same
segments the event loop appends to, and their locking rule deserves one place: one
``threading.Lock`` guards the segment list and every fd, and ``flush`` fsyncs *duplicates* of the
fds taken under the lock, so a concurrent roll, retention delete or close can never leave it
syncing a closed (or reused) descriptor, and the slow fsync itself runs without the lock.
``Log`` inherits these methods; the attributes below are the ``Log`` state they use.

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
import threading
import time
from pathlib import Path

from .config import LogConfig
from .errors import KafkaStorageError
from .files import close_fds, fsync_dir, fsync_file
from .leader_epoch import LeaderEpochCache
from .producer_state import ProducerStateManager
from .segment import LogSegment


class LogDurability:
    """``needs_flush``, ``flush`` and ``close`` of a ``Log``."""

    directory: Path
    config: LogConfig
    _lock: threading.Lock
    _segments: list[LogSegment]
    _closed: bool
    _next_offset: int
    _recovery_point: int
    _dir_generation: int
    _dir_synced_generation: int
    #: False while a new partition directory's entry in its log dir awaits an fsync
    _parent_dir_synced: bool = True
    _last_flush_monotonic: float
    _producer_state: ProducerStateManager
    _epochs: LeaderEpochCache

    @property
    def name(self) -> str:
        raise NotImplementedError

    def defer_parent_dir_sync(self) -> None:
        """This log's directory was just created: its entry in the log dir is fsynced with the
        log's first flush or clean close, not before the creation is answered (Kafka's
        ``LogManager.createLogDirectory`` does not sync the parent either). A crash before that
        loses the directory, which the next start recreates empty: only records no flush had
        made durable are lost, as with any unflushed append."""
        self._parent_dir_synced = False

    # --- flush --------------------------------------------------------------------------

    def needs_flush(self) -> bool:
        """True when flush.messages / flush.ms or a rolled segment calls for an fsync."""
        if self._closed:
            return False
        unflushed = self._next_offset - self._recovery_point
        if unflushed <= 0:
            return False
        config = self.config
        if unflushed >= config.flush_interval_messages:
            return True
        segments = self._segments  # may be replaced concurrently; take one snapshot
        if len(segments) > 1 and segments[-2].size > segments[-2].synced_size:
            return True  # Kafka flushes a segment once it is rolled
        if config.flush_interval_ms is not None:
            elapsed_ms = (time.monotonic() - self._last_flush_monotonic) * 1000
            return elapsed_ms >= config.flush_interval_ms
        return False

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync data below ``up_to_offset`` (default: everything) and advance the recovery point.

        Safe to call from a worker thread while another thread appends, rolls or deletes.
        """
        synced: list[tuple[LogSegment, int]] = []
        fds: list[int] = []
        with self._lock:
            if self._closed:
                return
            target = (
                self._next_offset if up_to_offset is None else min(up_to_offset, self._next_offset)
            )
            dir_generation = self._dir_generation
            try:
                for segment in self._segments:
                    if segment.base_offset < target and segment.size > segment.synced_size:
                        fds.extend(segment.sync_fds())
                        synced.append((segment, segment.size))
                epochs = self._epochs
                epochs_version = epochs.version if epochs.unsynced else None
                if epochs_version is not None:  # a new partition's first epoch, before the dirs
                    fds.append(os.open(epochs.path, os.O_RDONLY))
                if dir_generation != self._dir_synced_generation:
                    fds.append(os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY))
                parent_synced = self._parent_dir_synced
                if not parent_synced:  # a new partition's entry in its log dir
                    fds.append(os.open(self.directory.parent, os.O_RDONLY | os.O_DIRECTORY))
            except OSError as exc:
                close_fds(fds)
                raise KafkaStorageError(f"flushing {self.name} failed: {exc}") from exc
        try:
            for fd in fds:
                os.fsync(fd)
        except OSError as exc:
            raise KafkaStorageError(f"fsync of {self.name} failed: {exc}") from exc
        finally:
            close_fds(fds)
        with self._lock:
            for segment, size in synced:
                segment.synced_size = max(segment.synced_size, size)
            self._dir_synced_generation = max(self._dir_synced_generation, dir_generation)
            self._parent_dir_synced = self._parent_dir_synced or not parent_synced
            if epochs_version is not None and epochs.version == epochs_version:
                epochs.unsynced = False
            self._recovery_point = max(self._recovery_point, target)
            self._last_flush_monotonic = time.monotonic()

    # --- lifecycle ----------------------------------------------------------------------

    def close(self, *, flush: bool = True) -> None:
        """Close the files; with ``flush`` first make everything durable for a clean restart.

        Raises KafkaStorageError if that could not be done (the files are closed regardless),
        in which case the directory must not be marked as cleanly shut down.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            error: OSError | None = None
            try:
                if flush:
                    self._segments[-1].on_become_inactive()
                    self._producer_state.take_snapshot(self._next_offset, durable=True)
                    for segment in self._segments:
                        if segment.size > segment.synced_size:
                            fds = segment.sync_fds()
                            try:
                                for fd in fds:
                                    os.fsync(fd)
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
                    self._recovery_point = self._next_offset
            except OSError as exc:
                error = exc
            finally:
                for segment in self._segments:
                    try:
                        segment.close()
                    except OSError as exc:
                        error = error or exc
            if error is not None:
                raise KafkaStorageError(f"closing {self.name} failed: {error}") from error
