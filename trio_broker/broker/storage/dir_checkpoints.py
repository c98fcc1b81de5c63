"""The files in each log dir that tell the next start how to load it (``LogDirCheckpoints``).

Why an object of its own: the ``LogManager`` writes these from several threads (the flusher's
recovery points, DeleteRecords' log starts, the clean close) and reads them once at load; their
writers must be serialised, and what was last written is remembered so an unchanged checkpoint
is not rewritten (an fsync each). The files, all Kafka's names and layouts:

- ``.clean_shutdown``: present only between a clean close and the next load; without it every
  partition of the dir is recovered from its recovery point.
- ``recovery-point-offset-checkpoint``: each partition's recovery point, so an unclean restart
  re-checks only the data written since (``checkpoint.py``).
- ``log-start-offset-checkpoint``: log starts that DeleteRecords moved (``log_start.py``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from .checkpoint import OffsetCheckpointFile
from .files import atomic_write, fsync_dir
from .log import Log
from .log_start import write_log_starts

LOGGER = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".clean_shutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"

_Points = dict[tuple[str, int], int]


class LogDirCheckpoints:
    """Reads and writes the per-dir files above; every method is safe from a worker thread."""

    def __init__(self) -> None:
        #: log dir -> the recovery points last written there (or read at load)
        self._written: dict[Path, _Points] = {}
        # serialises the writers: the recovery points and log starts each writer reads are
        # read under it, so a later write never holds older values than an earlier one
        self._lock = threading.Lock()

    @staticmethod
    def _recovery_points_file(log_dir: Path) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT)

    def take_clean_shutdown(self, log_dir: Path) -> bool:
        """Whether ``log_dir`` was shut down cleanly. Its marker is removed (durably) first, so
        a crash from here on counts as unclean. Raises OSError."""
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        if clean:
            marker.unlink()
            fsync_dir(log_dir)
        return clean

    def read_recovery_points(self, log_dir: Path) -> _Points:
        """The dir's checkpointed recovery points (none if the file is bad: all is recovered)."""
        try:
            points = self._recovery_points_file(log_dir).read()
        except (OSError, ValueError) as exc:
            LOGGER.warning("Ignoring a bad recovery checkpoint in %s: %s", log_dir, exc)
            return {}
        with self._lock:
            self._written[log_dir] = dict(points)
        return points

    def write_recovery_points(self, logs_by_dir: Mapping[Path, Iterable[Log]]) -> None:
        """Checkpoint the recovery points of each dir's open logs, where they changed."""
        with self._lock:
            for log_dir, logs in logs_by_dir.items():
                points = {(log.topic, log.partition): log.recovery_point for log in logs
                          if not log.closed}
                if self._written.get(log_dir) == points:
                    continue
                try:
                    self._recovery_points_file(log_dir).write(points)
                except OSError as exc:
                    LOGGER.error("Writing the recovery point checkpoint in %s failed: %s",
                                 log_dir, exc)
                    continue
                self._written[log_dir] = points

    def write_log_starts(self, log_dir: Path, logs: Iterable[Log]) -> None:
        """Checkpoint the log starts of ``log_dir``'s logs. Raises OSError."""
        with self._lock:
            write_log_starts(log_dir, logs)

    def mark_clean_shutdown(self, log_dir: Path, points: _Points) -> None:
        """Write the final recovery points of a dir whose logs all closed cleanly, then its
        clean-shutdown marker. Raises OSError."""
        with self._lock:
            self._recovery_points_file(log_dir).write(points)
            self._written[log_dir] = points
            atomic_write(log_dir / CLEAN_SHUTDOWN_FILE, b"")


__all__ = ["CLEAN_SHUTDOWN_FILE", "RECOVERY_POINT_CHECKPOINT", "LogDirCheckpoints"]
