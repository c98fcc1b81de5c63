"""``trio-broker groups reset-offsets``: move a group's committed offsets, as Kafka's
``kafka-consumer-groups --reset-offsets`` does.

Why Kafka's rules exactly: an operator reaches for this when a consumer must replay or skip,
and the outcome has to be the one they planned. So: only an inactive group (``Empty`` or
``Dead``) is reset, anything else is refused with Kafka's message; the scope is ``--topic
T[:P,...]`` or ``--all-topics`` (the topics the group has committed offsets for); ``--to-offset``
and ``--shift-by`` are clamped into each partition's ``[log start, log end]``; a time with no
record at or after it resets to the log end; ``--shift-by`` needs a committed offset. The plan
is printed (``GROUP TOPIC PARTITION NEW-OFFSET``) and only committed with ``--execute``;
``--export`` prints it as the CSV ``--from-file`` reads.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import time
from pathlib import Path

from ..client.blocking import EARLIEST, LATEST, BlockingClient, TopicPartition
from .base import CommandError, UsageError
from .output import Report
from .times import parse_duration_ms, parse_when

INACTIVE = ("Empty", "Dead")


def add_reset_arguments(parser: argparse.ArgumentParser) -> None:
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,...]",
                       help="a topic, or some of its partitions (repeatable)")
    scope.add_argument("--all-topics", action="store_true",
                       help="every topic the group has committed offsets for")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--to-earliest", action="store_true", help="the log start offset")
    mode.add_argument("--to-latest", action="store_true", help="the log end offset")
    mode.add_argument("--to-current", action="store_true", help="the committed offset")
    mode.add_argument("--to-offset", type=int, metavar="N", help="offset N")
    mode.add_argument("--shift-by", type=int, metavar="N",
                      help="the committed offset plus N (N may be negative)")
    mode.add_argument("--to-datetime", metavar="WHEN",
                      help="the first record at or after WHEN (YYYY-MM-DDTHH:mm:SS.sss, "
                           "local time unless a zone is given)")
    mode.add_argument("--by-duration", metavar="DURATION",
                      help="the first record at or after now minus DURATION (PnDTnHnMnS)")
    mode.add_argument("--from-file", metavar="CSV",
                      help="offsets from a CSV file: topic,partition,offset per line "
                           "(group,topic,partition,offset for several groups)")
    run = parser.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="only show the plan (the default)")
    run.add_argument("--execute", action="store_true", help="commit the new offsets")
    parser.add_argument("--export", action="store_true",
                        help="print the plan as the CSV --from-file reads")


def reset_offsets(client: BlockingClient, args: argparse.Namespace, groups: list[str]) -> int:
    if not args.from_file and not (args.topic or args.all_topics):
        raise UsageError("one of the reset scopes is needed: --all-topics or --topic")
    from_file = _read_file(args.from_file, groups) if args.from_file else {}
    if args.to_datetime is not None:  # checked before anything is asked of the broker
        args.when_ms = parse_when(args.to_datetime, "--to-datetime")
    elif args.by_duration is not None:
        args.when_ms = (int(time.time() * 1000)
                        - parse_duration_ms(args.by_duration, "--by-duration"))
    plans: dict[str, dict[TopicPartition, int]] = {}
    for group in groups:
        state = client.describe_group(group).state
        if state not in INACTIVE:
            raise CommandError(f"assignments can only be reset if the group '{group}' is "
                               f"inactive, but the current state is {state}")
        plans[group] = plan(client, args, group, from_file.get(group, {}))
    if not (args.dry_run or args.execute or args.export):
        print("WARN: No action will be performed as the --execute option is missing. In a "
              "future major release, the default behavior of this command will be to prompt "
              "the user before executing the reset rather than doing a dry run. You should "
              "add the --dry-run option explicitly if you are scripting this command and "
              "want to keep the current default behavior without prompting.", file=sys.stderr)
    if args.execute:
        for group, offsets in plans.items():
            if offsets:
                client.commit(group, offsets)
    rows = [(g, tp.topic, tp.partition, o) for g, offsets in plans.items()
            for tp, o in sorted(offsets.items())]
    if args.export:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        for g, topic, partition, offset in rows:
            writer.writerow([g, topic, partition, offset] if len(groups) > 1
                            else [topic, partition, offset])
        sys.stdout.write(out.getvalue())
        sys.stdout.flush()
        return 0
    report = Report(args.output)
    report.table(["group", "topic", "partition", "new offset"], rows,
                 numeric=["partition", "new offset"])
    report.document = [{"group": g, "topic": t, "partition": p, "new_offset": o}
                       for g, t, p, o in rows]
    report.emit()
    return 0


def plan(client: BlockingClient, args: argparse.Namespace, group: str,
         from_file: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The new offset of every partition in scope."""
    if args.from_file:
        return dict(from_file)
    committed = {tp: c.offset for tp, c in client.committed(group).items()}
    if args.all_topics:
        partitions = sorted(committed)
    else:
        partitions = parse_topic_partitions(client, args.topic)
    if not partitions:
        return {}
    earliest = client.list_offsets(dict.fromkeys(partitions, EARLIEST))
    latest = client.list_offsets(dict.fromkeys(partitions, LATEST))

    def clamp(tp: TopicPartition, offset: int) -> int:
        return max(earliest[tp], min(latest[tp], offset))

    if args.to_earliest:
        return {tp: earliest[tp] for tp in partitions}
    if args.to_latest:
        return {tp: latest[tp] for tp in partitions}
    if args.to_current:
        return {tp: committed.get(tp, latest[tp]) for tp in partitions}
    if args.to_offset is not None:
        return {tp: clamp(tp, args.to_offset) for tp in partitions}
    if args.shift_by is not None:
        missing = [tp for tp in partitions if tp not in committed]
        if missing:
            raise CommandError(f"cannot shift the offset of {missing[0]} since group "
                               f"'{group}' has no committed offset for it")
        return {tp: clamp(tp, committed[tp] + args.shift_by) for tp in partitions}
    found = client.list_offsets(dict.fromkeys(partitions, args.when_ms))
    return {tp: found[tp] if found.get(tp, -1) >= 0 else latest[tp] for tp in partitions}


def _read_file(name: str, groups: list[str]) -> dict[str, dict[TopicPartition, int]]:
    """``topic,partition,offset`` lines (one group) or ``group,topic,partition,offset``."""
    try:
        text = Path(name).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--from-file {name}: {exc.strerror or exc}") from None
    out: dict[str, dict[TopicPartition, int]] = {}
    for number, row in enumerate(csv.reader(io.StringIO(text)), 1):
        if not row or not "".join(row).strip():
            continue
        try:
            if len(row) == 3 and len(groups) == 1:
                group, (topic, partition, offset) = groups[0], row
            elif len(row) == 4:
                group, topic, partition, offset = row
            else:
                raise ValueError
            tp = TopicPartition(topic.strip(), int(partition))
            out.setdefault(group.strip(), {})[tp] = int(offset)
        except ValueError:
            raise UsageError(f"--from-file {name}:{number}: expected "
                             + ("topic,partition,offset" if len(groups) == 1
                                else "group,topic,partition,offset")) from None
    unknown = sorted(set(out) - set(groups))
    if unknown:
        raise UsageError(f"--from-file {name}: group {unknown[0]!r} is not being reset")
    return out


def parse_topic_partitions(client: BlockingClient, items: list[str],
                           ) -> list[TopicPartition]:
    """``["t", "u:0,2"]`` -> every partition of t, partitions 0 and 2 of u."""
    out: list[TopicPartition] = []
    for item in items:
        topic, sep, parts = item.partition(":")
        if not topic:
            raise UsageError(f"bad --topic {item!r}: expected TOPIC or TOPIC:P,P,...")
        if not sep:
            out.extend(client.partitions_for([topic]))
            continue
        try:
            out.extend(TopicPartition(topic, int(p)) for p in parts.split(",") if p.strip())
        except ValueError:
            raise UsageError(f"bad --topic {item!r}: partitions are numbers") from None
    return list(dict.fromkeys(out))


__all__ = ["add_reset_arguments", "parse_topic_partitions", "plan", "reset_offsets"]
