"""The log manager's background duties: flushes, recovery-point checkpoints, retention,
DeleteRecords' checkpoint and the clean close; and the thread pool that opens and closes many
logs at once.

Why apart from ``manager.py``: these are the parts that run in worker threads while the event
loop serves (``LogManager`` mixes them in), and each is a walk over every log under the
manager's locks. Opening and closing logs fsyncs a few files per partition (milliseconds each,
even for an empty one); done on a pool, as Kafka's ``num.recovery.threads.per.data.dir``, the
file system commits the fsyncs together: a thousand partitions load or close in well under a
second instead of five to fifteen.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from .checkpoint import OffsetCheckpointFile
from .errors import KafkaStorageError
from .files import atomic_write
from .log import Log
from .log_start import write_log_starts

LOGGER = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".clean_shutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
#: threads opening logs at start-up and closing (flushing) them at shutdown
PARALLEL_THREADS = 32
_T = TypeVar("_T")
_R = TypeVar("_R")


def in_parallel(work: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
    """``[work(item) for item in items]`` on up to ``PARALLEL_THREADS`` threads (an exception
    is raised once all have run)."""
    if len(items) <= 1:
        return [work(item) for item in items]
    from concurrent.futures import ThreadPoolExecutor  # an empty or one-log start needs none

    with ThreadPoolExecutor(min(PARALLEL_THREADS, len(items)),
                            thread_name_prefix="log-io") as pool:
        return list(pool.map(work, items))


def _close(log: Log) -> KafkaStorageError | None:
    try:
        log.close()
    except KafkaStorageError as exc:
        return exc
    return None


class LogDuties:
    """Mixed into ``LogManager``; every method is safe to call from a worker thread."""

    log_dirs: list[Path]
    #: log dir -> why it could not be used
    offline_dirs: dict[Path, str]
    _logs: dict[tuple[str, int], Log]
    _dir_of: dict[tuple[str, int], Path]
    _checkpointed: dict[Path, dict[tuple[str, int], int]]
    _lock: threading.Lock
    _checkpoint_lock: threading.Lock

    def all_logs(self) -> list[Log]:
        with self._lock:
            return list(self._logs.values())

    def _checkpoint_file(self, log_dir: Path) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT)

    def logs_needing_flush(self) -> list[Log]:
        return [log for log in self.all_logs() if log.needs_flush()]

    def flush_dirty(self) -> int:
        """fsync every log whose flush policy asks for it, then checkpoint recovery points.

        Meant for a worker thread; returns the number of logs flushed.
        """
        flushed = 0
        for log in self.logs_needing_flush():
            try:
                log.flush()
                flushed += 1
            except KafkaStorageError as exc:
                LOGGER.error("Flushing %s failed: %s", log.name, exc)
        self.checkpoint_recovery_points()
        return flushed

    def checkpoint_recovery_points(self) -> None:
        """Persist each partition's recovery point, so an unclean restart re-checks only the
        data written since (Kafka's recovery-point-offset-checkpoint)."""
        with self._checkpoint_lock:
            by_dir: dict[Path, dict[tuple[str, int], int]] = {}
            with self._lock:
                for key, log in self._logs.items():
                    if not log.closed:
                        by_dir.setdefault(self._dir_of[key], {})[key] = log.recovery_point
            for log_dir, points in by_dir.items():
                if self._checkpointed.get(log_dir) == points:
                    continue
                try:
                    self._checkpoint_file(log_dir).write(points)
                except OSError as exc:
                    LOGGER.error("Writing the recovery point checkpoint in %s failed: %s",
                                 log_dir, exc)
                    continue
                self._checkpointed[log_dir] = points

    def delete_records(self, log: Log, offset: int) -> int:
        """DeleteRecords on ``log``: its new start offset, checkpointed before it is returned."""
        start = log.advance_log_start_offset(offset)
        log_dir = self._dir_of[(log.topic, log.partition)]
        with self._checkpoint_lock, self._lock:
            write_log_starts(log_dir, [g for k, g in self._logs.items()
                                       if self._dir_of[k] == log_dir])
        return start

    def run_retention(self, now_ms: int) -> int:
        """Apply retention to every log and expire idle producer ids; returns segments deleted."""
        deleted = 0
        for log in self.all_logs():
            try:
                deleted += log.delete_old_segments(now_ms)
                log.remove_expired_producers(now_ms)
            except KafkaStorageError as exc:
                LOGGER.error("Retention on %s failed: %s", log.name, exc)
        return deleted

    def close(self) -> None:
        """Flush and close every log, then mark each log dir whose logs all closed cleanly."""
        with self._lock:
            logs = list(self._logs.items())
        failed_dirs: set[Path] = set()
        points: dict[Path, dict[tuple[str, int], int]] = {}

        # Each close fsyncs a few files (milliseconds each, even for an empty partition): in
        # parallel the file system commits them together, so a thousand partitions close in
        # well under shutdown.timeout.ms instead of one after another.
        errors = in_parallel(_close, [log for _, log in logs])
        for (key, log), exc in zip(logs, errors, strict=True):
            log_dir = self._dir_of[key]
            if exc is not None:
                LOGGER.error("Closing %s failed: %s", log.name, exc)
                failed_dirs.add(log_dir)
            points.setdefault(log_dir, {})[key] = log.recovery_point
        with self._checkpoint_lock:
            for log_dir in self.log_dirs:
                if log_dir in self.offline_dirs or log_dir in failed_dirs:
                    continue
                try:
                    self._checkpoint_file(log_dir).write(points.get(log_dir, {}))
                    atomic_write(log_dir / CLEAN_SHUTDOWN_FILE, b"")
                except OSError as exc:
                    LOGGER.error("Could not mark %s as cleanly shut down: %s", log_dir, exc)
