"""Log start offsets that DeleteRecords moved, kept across restarts (Kafka's
``log-start-offset-checkpoint``).

Why a file of its own: after a restart a log's start is its first segment's base offset, which
is below a start DeleteRecords moved inside that segment; the records below it must stay
invisible. Each log dir holds one checkpoint of its partitions' start offsets, in the layout of
the recovery-point checkpoint, written (atomically, fsynced) before DeleteRecords answers, and
read after the logs are opened.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

from .checkpoint import OffsetCheckpointFile
from .log import Log

LOGGER = logging.getLogger(__name__)

LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"


def restore_log_starts(log_dirs: Iterable[Path], logs: Mapping[tuple[str, int], Log],
                       dir_of: Mapping[tuple[str, int], Path]) -> None:
    """Move each opened log's start to the checkpointed one (never past its end)."""
    for log_dir in log_dirs:
        try:
            starts = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).read()
        except (OSError, ValueError) as exc:
            LOGGER.warning("Ignoring a bad log start offset checkpoint in %s: %s", log_dir, exc)
            continue
        for key, offset in starts.items():
            log = logs.get(key)
            if log is not None and dir_of.get(key) == log_dir:
                log.advance_log_start_offset(min(offset, log.log_end_offset))


def write_log_starts(log_dir: Path, logs: Iterable[Log]) -> None:
    """Checkpoint the start offsets of ``log_dir``'s logs (those above their first segment)."""
    starts = {(log.topic, log.partition): log.log_start_offset for log in logs
              if not log.closed and log.log_start_offset > log.segment_base_offsets()[0]}
    OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).write(starts)


__all__ = ["LOG_START_OFFSET_CHECKPOINT", "restore_log_starts", "write_log_starts"]
