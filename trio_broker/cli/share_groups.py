"""``trio-broker share-groups list|describe|reset-offsets|delete|delete-offsets``: Kafka's
``kafka-share-groups.sh`` (KIP-932).

Why a command of its own: Kafka made share groups a tool of their own, apart from
``kafka-consumer-groups.sh`` (which leaves them out of its lists, as ``groups`` does here): a
share group has no committed offsets but a start offset per share-partition (everything before
it delivered for good), its members own no partitions, and its reset is AlterShareGroupOffsets,
not a commit. The options are Kafka's tool's (``--group``, ``--all-groups``, ``--members``,
``--state``, ``--offsets``, ``--topic``, ``--all-topics``, ``--to-earliest``, ``--to-latest``,
``--to-datetime``, ``--dry-run``, ``--execute``), as actions like ``groups``; ``--to-offset``
is added as ``kafka-consumer-groups.sh`` has it. ``--output plain`` prints Kafka's columns
(``GROUP TOPIC PARTITION START-OFFSET LAG``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..client.blocking import EARLIEST, LATEST, BlockingClient, TopicPartition, error_name
from ..client.core.errors import error_for
from . import groups as consumer_groups
from .base import CommandError, Tool, UsageError
from .connect import add_client_arguments, open_client
from .groups import SHARE_PROTOCOL_TYPE, format_assignment, kafka_group_list
from .output import Report, add_output_argument
from .reset_offsets import parse_topic_partitions
from .times import parse_when


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("List, describe, reset the start offsets of, or delete share groups "
                          "(KIP-932).")
    sub = parser.add_subparsers(dest="share_command", required=True, metavar="ACTION")
    listing = sub.add_parser("list", help="list share groups with their state "
                             "(--output plain: bare ids, as kafka-share-groups --list)")
    listing.add_argument("--state", action="append", default=[], metavar="STATE",
                         help="only groups in STATE (Stable, Empty; repeatable)")
    describe = sub.add_parser("describe", help="members, assignments, start offsets, lag")
    view = describe.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true",
                      help="start offset and lag per share-partition (Kafka's default)")
    view.add_argument("--members", action="store_true", help="members and their partitions")
    view.add_argument("--state", action="store_true", help="state, coordinator, epochs")
    reset = sub.add_parser("reset-offsets",
                           help="move start offsets of an empty group (dry run by default)")
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,...]",
                       help="a topic, or some of its partitions (repeatable)")
    scope.add_argument("--all-topics", action="store_true",
                       help="every share-partition the group has initialized")
    mode = reset.add_mutually_exclusive_group(required=True)
    mode.add_argument("--to-earliest", action="store_true", help="the log start offset")
    mode.add_argument("--to-latest", action="store_true", help="the log end offset")
    mode.add_argument("--to-offset", type=int, metavar="N",
                      help="offset N (kept within the log's start and end)")
    mode.add_argument("--to-datetime", metavar="WHEN",
                      help="the first record at or after WHEN (YYYY-MM-DDTHH:mm:SS.sss)")
    run_mode = reset.add_mutually_exclusive_group()
    run_mode.add_argument("--dry-run", action="store_true",
                          help="only show the plan (the default)")
    run_mode.add_argument("--execute", action="store_true", help="set the new start offsets")
    delete = sub.add_parser("delete", help="delete share groups (they must have no members)")
    delete_offsets = sub.add_parser("delete-offsets",
                                    help="forget a share group's state of whole topics")
    delete_offsets.add_argument("--topic", action="append", default=[], required=True,
                                metavar="TOPIC", help="a topic (repeatable)")
    for p in (describe, delete):
        p.add_argument("groups", nargs="*", metavar="GROUP")
        p.add_argument("--all-groups", action="store_true", help="every share group")
    for p in (describe, reset, delete, delete_offsets):
        p.add_argument("--group", dest="group_options", action="append", default=[],
                       metavar="GROUP", help="a share group (repeatable for describe, delete)")
    for p in (listing, describe, reset, delete, delete_offsets):
        add_client_arguments(p, what="a broker to ask")
        p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                       help="socket timeout per request (default 10)")
    for p in (listing, describe, reset, delete_offsets):
        add_output_argument(p)


def run(args: argparse.Namespace) -> int:
    with open_client(args, timeout_s=args.timeout) as client:
        if args.share_command == "list":
            return list_share_groups(client, args)
        if args.share_command == "reset-offsets":
            return reset_offsets(client, args, one_group(args))
        if args.share_command == "delete-offsets":
            return delete_offsets(client, args, one_group(args))
        groups = groups_of(client, args)
        if args.share_command == "delete":
            return delete_groups(client, groups)
        return describe_groups(client, args, groups)


def share_group_ids(client: BlockingClient) -> list[str]:
    return sorted(g.group_id for g in client.list_groups()
                  if g.protocol_type == SHARE_PROTOCOL_TYPE)


def groups_of(client: BlockingClient, args: argparse.Namespace) -> list[str]:
    names = list(dict.fromkeys([*args.groups, *args.group_options]))
    if args.all_groups:
        if names:
            raise UsageError("--all-groups excludes naming groups")
        return share_group_ids(client)
    if not names:
        raise UsageError("name a group (GROUP or --group GROUP) or give --all-groups")
    return names


def one_group(args: argparse.Namespace) -> str:
    if len(args.group_options) != 1:
        raise UsageError("name one share group with --group GROUP")
    group: str = args.group_options[0]
    return group


# --- list ------------------------------------------------------------------------------------

def list_share_groups(client: BlockingClient, args: argparse.Namespace) -> int:
    wanted = {s.lower() for s in args.state}
    rows = []
    for group in share_group_ids(client):
        described = client.describe_share_group(group)
        if described is None:
            continue  # deleted since it was listed
        if wanted and described.group_state.lower() not in wanted:
            continue
        rows.append((group, SHARE_PROTOCOL_TYPE, described.group_state, len(described.members)))
    report = Report(args.output)
    report.table(["group", "state", "members"], [(g, s, m) for g, _, s, m in rows],
                 numeric=["members"])
    report.plain_lines = kafka_group_list(rows, with_state=bool(wanted))
    report.document = [{"group": g, "state": s, "members": m} for g, _, s, m in rows]
    report.emit()
    return 0


# --- describe --------------------------------------------------------------------------------

def describe_share_group(client: BlockingClient, group: str) -> dict[str, Any]:
    """One share group as a document: state, epochs, coordinator, members, start offsets."""
    described = client.describe_share_group(group)
    if described is None:
        raise CommandError(f"Share group '{group}' does not exist.")
    members = [{
        "consumer_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
        "member_epoch": m.member_epoch, "subscribed_topics": list(m.subscribed_topic_names),
        "assignment": [{"topic": t.topic_name, "partition": p}
                       for t in m.assignment.topic_partitions for p in sorted(t.partitions)]}
        for m in described.members]
    offsets = [{"topic": tp.topic, "partition": tp.partition,
                "start_offset": o.start_offset if o.start_offset >= 0 else None,
                "leader_epoch": o.leader_epoch, "lag": o.lag}
               for tp, o in sorted(client.share_group_offsets(group).items())]
    return {"group": group, "state": described.group_state,
            "group_epoch": described.group_epoch,
            "assignment_epoch": described.assignment_epoch,
            "assignor": described.assignor_name or None,
            "coordinator": client.coordinator(group).address,
            "members": members, "offsets": offsets}


def describe_groups(client: BlockingClient, args: argparse.Namespace,
                    groups: list[str]) -> int:
    documents = [describe_share_group(client, g) for g in groups]
    report = Report(args.output)
    everything = not (args.offsets or args.members or args.state)
    for d in documents:
        if not d["members"]:  # as Kafka's tool says it, on stderr
            print(f"Share group '{d['group']}' has no active members.", file=sys.stderr)
    if args.output == "plain":
        if args.state:
            report.table(["group", "coordinator", "state", "group epoch", "assignment epoch",
                          "members"], [_state_row(d) for d in documents])
        elif args.members:
            report.table(["group", "consumer id", "host", "client id", "partitions",
                          "member epoch", "assignment"],
                         [row for d in documents for row in _member_rows(d)])
        else:
            report.table(["group", "topic", "partition", "start offset", "lag"],
                         [(d["group"], o["topic"], o["partition"], o["start_offset"],
                           o["lag"]) for d in documents for o in d["offsets"]])
    for d in documents if args.output == "table" else ():
        report.line(f"share group {d['group']}: state {d['state']}, group epoch "
                    f"{d['group_epoch']}, assignment epoch {d['assignment_epoch']}, "
                    f"{len(d['members'])} members, coordinator {d['coordinator']}")
        if (everything or args.members) and d["members"]:
            report.table(["consumer id", "host", "client id", "partitions", "member epoch",
                          "assignment"], [row[1:] for row in _member_rows(d)],
                         title="members", numeric=["partitions", "member epoch"])
        if (everything or args.offsets) and d["offsets"]:
            report.table(["topic", "partition", "start offset", "leader epoch", "lag"],
                         [(o["topic"], o["partition"], o["start_offset"], o["leader_epoch"],
                           o["lag"]) for o in d["offsets"]], title="offsets",
                         numeric=["partition", "start offset", "leader epoch", "lag"])
    report.document = documents
    report.emit()
    return 0


def _state_row(d: dict[str, Any]) -> tuple[Any, ...]:
    return (d["group"], d["coordinator"], d["state"], d["group_epoch"], d["assignment_epoch"],
            len(d["members"]))


def _member_rows(d: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(d["group"], m["consumer_id"], m["host"], m["client_id"], len(m["assignment"]),
             m["member_epoch"], format_assignment(TopicPartition(a["topic"], a["partition"])
                                                  for a in m["assignment"]))
            for m in d["members"]]


# --- reset-offsets ---------------------------------------------------------------------------

def reset_offsets(client: BlockingClient, args: argparse.Namespace, group: str) -> int:
    when_ms = parse_when(args.to_datetime, "--to-datetime") if args.to_datetime else None
    described = client.describe_share_group(group)
    if described is not None and described.members:
        raise CommandError(f"Share group '{group}' is not empty.")
    if args.all_topics:
        partitions = sorted(client.share_group_offsets(group))
    else:
        partitions = parse_topic_partitions(client, args.topic)
    planned = plan(client, args, partitions, when_ms)
    if not (args.dry_run or args.execute):
        print("WARN: No action will be performed as the --execute option is missing. "
              "You should add the --dry-run option explicitly if you are scripting this "
              "command.", file=sys.stderr)
    if args.execute and planned:
        codes = client.alter_share_group_offsets(group, planned)
        failed = [(tp, code) for tp, code in sorted(codes.items()) if code]
        if failed:
            tp, code = failed[0]
            raise error_for(code, f"cannot reset the start offset of {len(failed)} "
                            f"partition(s) of share group {group!r} ({tp}: "
                            f"{error_name(code)})")
    rows = [(group, tp.topic, tp.partition, o) for tp, o in sorted(planned.items())]
    report = Report(args.output)
    report.table(["group", "topic", "partition", "new offset"], rows,
                 numeric=["partition", "new offset"])
    report.document = [{"group": g, "topic": t, "partition": p, "new_offset": o}
                       for g, t, p, o in rows]
    report.emit()
    return 0


def plan(client: BlockingClient, args: argparse.Namespace, partitions: list[TopicPartition],
         when_ms: int | None) -> dict[TopicPartition, int]:
    """The new start offset of every partition in scope."""
    if not partitions:
        return {}
    earliest = client.list_offsets(dict.fromkeys(partitions, EARLIEST))
    latest = client.list_offsets(dict.fromkeys(partitions, LATEST))
    if args.to_earliest:
        return {tp: earliest[tp] for tp in partitions}
    if args.to_latest:
        return {tp: latest[tp] for tp in partitions}
    if args.to_offset is not None:
        return {tp: max(earliest[tp], min(latest[tp], args.to_offset)) for tp in partitions}
    assert when_ms is not None
    found = client.list_offsets(dict.fromkeys(partitions, when_ms))
    return {tp: found[tp] if found.get(tp, -1) >= 0 else latest[tp] for tp in partitions}


# --- delete ----------------------------------------------------------------------------------

def delete_groups(client: BlockingClient, groups: list[str]) -> int:
    return consumer_groups.delete_groups(client, groups, "share")


def delete_offsets(client: BlockingClient, args: argparse.Namespace, group: str) -> int:
    """Kafka's table: TOPIC STATUS (Successful, or Error: the message); exit 1 when any
    topic failed."""
    results = client.delete_share_group_offsets(group, list(dict.fromkeys(args.topic)))
    rows = [(topic, "Successful" if not code else f"Error: {message or error_name(code)}")
            for topic, (code, message) in sorted(results.items())]
    report = Report(args.output)
    report.table(["topic", "status"], rows)
    report.document = [{"topic": t, "status": s} for t, s in rows]
    report.emit()
    failed = [(topic, code) for topic, (code, _) in sorted(results.items()) if code]
    if failed:
        topic, code = failed[0]
        raise error_for(code, f"cannot delete the state of {len(failed)} topic(s) of share "
                        f"group {group!r} ({topic}: {error_name(code)})")
    return 0


SHARE_GROUPS = Tool(add_arguments, run)
