"""Which segments retention deletes (the predicates of Kafka's ``UnifiedLog.deleteOldSegments``).

Why apart from the log: the choice is a pure function of the segments, the topic config and the
clock, so it reads as the rules it is and is tested without a lock or a file being removed; the
log applies it under its lock (rolling the active segment first if it qualifies) and deletes.

Rules, oldest segment first, stopping at the first segment that does not qualify, so the log
start offset only moves forward:

- whatever the policy, a segment whose records are all below the log start offset (DeleteRecords
  moved it past them: Kafka's ``deleteLogStartOffsetBreachedSegments``);
- otherwise only under ``cleanup.policy`` containing ``delete``;
- ``retention.ms`` (>= 0): a segment whose newest record is older than that;
- ``retention.bytes`` (>= 0): a segment the log can lose and still hold at least that many bytes;
- the empty active segment is never deleted (it is about to receive data); an empty inactive
  one (compaction emptied it) goes with its neighbours.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from .config import LogConfig
from .segment import LogSegment


def segments_to_delete(segments: Sequence[LogSegment], config: LogConfig,
                       now_ms: int, log_start_offset: int = 0) -> list[LogSegment]:
    """The oldest segments that ``config``'s retention removes at ``now_ms``."""
    doomed: list[LogSegment] = []
    for segment, following in pairwise(segments):
        if following.base_offset > log_start_offset:
            break
        doomed.append(segment)
    if "delete" not in config.cleanup_policy.split(","):
        return doomed
    if config.retention_ms >= 0:
        for segment in segments[len(doomed):]:
            if segment.size == 0:
                if segment is segments[-1]:
                    break
            elif now_ms - segment.largest_timestamp() <= config.retention_ms:
                break
            doomed.append(segment)
    if config.retention_bytes >= 0:
        excess = sum(s.size for s in segments) - config.retention_bytes
        excess -= sum(s.size for s in doomed)
        for segment in segments[len(doomed):]:
            if segment.size == 0 or excess - segment.size < 0:
                break
            doomed.append(segment)
            excess -= segment.size
    return doomed
