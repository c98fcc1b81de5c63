"""From checked options to offset ranges, in the driver: partitions, where each range starts and
ends, how ranges become Spark tasks and how much a micro-batch takes.

Why all of it runs in the driver: every range is checked against the log (retention, log end)
before a task starts, so a mistake is one clear error rather than a failed task, and every
executor reads exactly the range it was given.

Spark's rules, kept here:
- timestamps (``startingTimestamp``, ``*OffsetsByTimestamp``) resolve with ListOffsets to the
  first offset whose timestamp is at or after them; where no record is that recent, a start
  follows ``startingOffsetsByTimestampStrategy`` (``error`` or ``latest``) and an end is the
  latest offset;
- ``maxRecordsPerPartition`` first cuts each range into pieces of at most that many offsets,
  then, when fewer pieces than ``minPartitions`` result, large ranges are split in proportion
  to their size (``KafkaOffsetRangeCalculator``): the number of tasks is about
  ``minPartitions``, small ranges stay whole;
- ``maxOffsetsPerTrigger`` shares a micro-batch among partitions in proportion to their backlog.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

from ..client.blocking import EARLIEST, LATEST, BlockingClient, TopicPartition
from ..client.core.errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError
from ..protocol.errors import ErrorCode
from ._options import DATA_LOSS_HINT, OffsetRange, OffsetSpec, SourceOptionError, SourceOptions


def subscribed_partitions(client: BlockingClient, opts: SourceOptions) -> list[TopicPartition]:
    """The partitions the subscription covers right now; unknown topics are an error."""
    if opts.subscribe is not None:
        return client.partitions_for(opts.subscribe)
    if opts.assign is not None:
        topics = sorted({tp.topic for tp in opts.assign})
        existing = set(client.partitions_for(topics))
        missing = [str(tp) for tp in opts.assign if tp not in existing]
        if missing:
            raise UnknownTopicOrPartitionError("assigned partitions do not exist: "
                                               + ", ".join(missing))
        return sorted(set(opts.assign))
    assert opts.subscribe_pattern is not None
    pattern = re.compile(opts.subscribe_pattern)
    matched = [info for name, info in client.metadata(None).topics.items()
               if pattern.fullmatch(name) and not info.internal
               and info.error in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)]
    return sorted(TopicPartition(t.name, p) for t in matched for p in t.partitions)


def _check_covers(tps: list[TopicPartition], spec: Mapping[TopicPartition, int],
                  message: str) -> None:
    missing = [str(tp) for tp in tps if tp not in spec]
    extra = [str(tp) for tp in spec if tp not in set(tps)]
    if missing or extra:
        detail = []
        if missing:
            detail.append("missing " + ", ".join(missing))
        if extra:
            detail.append("not subscribed or not existing: " + ", ".join(extra))
        raise SourceOptionError(message.format(detail="; ".join(detail)))


def resolve_offsets(client: BlockingClient, tps: Iterable[TopicPartition], spec: OffsetSpec,
                    name: str) -> dict[TopicPartition, int]:
    """Concrete offsets for ``spec`` on ``tps`` (JSON must name every partition, as in Spark)."""
    tps = sorted(set(tps))
    if not tps:
        return {}
    if isinstance(spec, str):
        return client.list_offsets({tp: EARLIEST if spec == "earliest" else LATEST
                                    for tp in tps})
    _check_covers(tps, spec, f"If {name} contains specific offsets, you must specify all "
                             "TopicPartitions ({detail}). Use -1 for latest, -2 for earliest.")
    special = {tp: spec[tp] for tp in tps if spec[tp] in (EARLIEST, LATEST)}
    out = {tp: spec[tp] for tp in tps if tp not in special}
    if special:
        out.update(client.list_offsets(special))
    return out


def _by_timestamp(client: BlockingClient, tps: list[TopicPartition],
                  timestamps: Mapping[TopicPartition, int], *, starting: bool,
                  strategy: str) -> dict[TopicPartition, int]:
    """The first offset at or after each partition's timestamp (Spark's ``readTimestampOffsets``).
    """
    if not tps:
        return {}
    found = client.list_offsets({tp: timestamps[tp] for tp in tps})
    unmatched = [tp for tp in tps if found[tp] < 0 and timestamps[tp] >= 0]
    if unmatched and starting and strategy == "error":
        tp = unmatched[0]
        raise SourceOptionError(
            f"No offset matched from request of topic-partition {tp} and timestamp "
            f"{timestamps[tp]}. Set the source option startingOffsetsByTimestampStrategy to "
            "'latest' to start such partitions at their latest offset.")
    if unmatched:  # no record that recent: the latest offset, for a start or an end
        found.update(client.list_offsets(dict.fromkeys(unmatched, LATEST)))
    return found


def starting_offsets(client: BlockingClient, tps: Iterable[TopicPartition],
                     opts: SourceOptions) -> dict[TopicPartition, int]:
    """Where a read starts: ``startingTimestamp``, else ``startingOffsetsByTimestamp``, else
    ``startingOffsets``."""
    tps = sorted(set(tps))
    strategy = opts.starting_timestamp_strategy
    if opts.starting_timestamp is not None:
        return _by_timestamp(client, tps, dict.fromkeys(tps, opts.starting_timestamp),
                             starting=True, strategy=strategy)
    if opts.starting_by_timestamp is not None:
        _check_covers(tps, opts.starting_by_timestamp,
                      "If starting/endingOffsetsByTimestamp contains specific offsets, you must "
                      "specify all topics ({detail}).")
        return _by_timestamp(client, tps, opts.starting_by_timestamp, starting=True,
                             strategy=strategy)
    return resolve_offsets(client, tps, opts.starting, "startingOffsets")


def ending_offsets(client: BlockingClient, tps: Iterable[TopicPartition],
                   opts: SourceOptions) -> dict[TopicPartition, int]:
    """Where a batch read ends (exclusive): ``endingTimestamp``, else
    ``endingOffsetsByTimestamp``, else ``endingOffsets``."""
    tps = sorted(set(tps))
    if opts.ending_timestamp is not None:
        return _by_timestamp(client, tps, dict.fromkeys(tps, opts.ending_timestamp),
                             starting=False, strategy="latest")
    if opts.ending_by_timestamp is not None:
        _check_covers(tps, opts.ending_by_timestamp,
                      "If starting/endingOffsetsByTimestamp contains specific offsets, you must "
                      "specify all topics ({detail}).")
        return _by_timestamp(client, tps, opts.ending_by_timestamp, starting=False,
                             strategy="latest")
    return resolve_offsets(client, tps, opts.ending, "endingOffsets")


def check_range(client: BlockingClient, starts: Mapping[TopicPartition, int],
                ends: Mapping[TopicPartition, int], *, fail_on_data_loss: bool,
                earliest: Mapping[TopicPartition, int] | None = None,
                latest: Mapping[TopicPartition, int] | None = None) -> list[OffsetRange]:
    """Ranges for ``starts``..``ends``, checked against what the log holds now.

    A start below the log start offset means retention already deleted records: an error, or
    with ``failOnDataLoss=false`` the range starts at the log start. An end past the log end is
    an error either way (those records do not exist yet).
    """
    tps = sorted(starts)
    if earliest is None:
        earliest = client.list_offsets({tp: EARLIEST for tp in tps}) if tps else {}
    if latest is None:
        latest = client.list_offsets({tp: LATEST for tp in tps}) if tps else {}
    ranges = []
    for tp in tps:
        start, end = starts[tp], ends[tp]
        if end > latest[tp]:
            raise OffsetOutOfRangeError(
                f"ending offset {end} of {tp} is past the end of the log (latest offset "
                f"{latest[tp]})")
        if start < earliest[tp]:
            if fail_on_data_loss:
                raise OffsetOutOfRangeError(
                    f"offsets {start}..{min(end, earliest[tp]) - 1} of {tp} are no longer "
                    f"available: retention deleted them (the log starts at offset "
                    f"{earliest[tp]}). Some data may have been lost. {DATA_LOSS_HINT}")
            start = min(earliest[tp], end)
        if start > end:
            raise SourceOptionError(f"starting offset {start} of {tp} is after its ending "
                                    f"offset {end}")
        ranges.append(OffsetRange(tp.topic, tp.partition, start, end))
    return ranges


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``parts`` pieces of ``r``; the last takes the rounding (Spark's way)."""
    out = []
    remaining, start = r.size, r.start
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        out.append(OffsetRange(r.topic, r.partition, start, min(start + this, r.end)))
        start += this
    return [piece for piece in out if piece.size > 0]


def split_ranges(ranges: list[OffsetRange], *, min_partitions: int | None,
                 max_records: int | None) -> list[OffsetRange]:
    """Spark tasks for ``ranges``: one per non-empty range, cut to at most ``max_records``
    offsets, then split further when there are fewer than ``min_partitions`` (see the module
    docstring)."""
    ranges = [r for r in ranges if r.size > 0]
    if max_records is not None:
        ranges = [piece for r in ranges for piece in _divide(r, -(-r.size // max_records))]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)

    def part_count(size: int, of: int, parts: int) -> int:
        return max(math.floor(size / of * parts + 0.5), 1)  # Scala's math.round: half up

    unsplit = [r for r in ranges if part_count(r.size, total, min_partitions) == 1]
    split_total = total - sum(r.size for r in unsplit)
    split_parts = max(min_partitions - len(unsplit), 1)
    unsplit_ids = {id(r) for r in unsplit}
    out = []
    for r in ranges:
        parts = 1 if id(r) in unsplit_ids else part_count(r.size, split_total, split_parts)
        out.extend(_divide(r, parts))
    return out


def rate_limit(starts: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               limit: int) -> dict[TopicPartition, int]:
    """End offsets that take at most about ``limit`` records, shared in proportion to each
    partition's backlog; small backlogs get at least one record so none starves."""
    backlog = {tp: max(0, latest[tp] - starts.get(tp, latest[tp])) for tp in latest}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    ends = {}
    for tp, end in latest.items():
        start = starts.get(tp, end)
        share = limit * backlog[tp] / total
        take = int(share) if share >= 1 else (1 if backlog[tp] else 0)
        ends[tp] = min(end, start + take)
    return ends


__all__ = ["check_range", "ending_offsets", "rate_limit", "resolve_offsets", "split_ranges",
           "starting_offsets", "subscribed_partitions"]
