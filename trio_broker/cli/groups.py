"""``trio-broker groups list|describe|reset-offsets|delete|delete-offsets``: Kafka's
``kafka-consumer-groups``.

Why the Kafka protocol and not a look at the data directory: the command works against a running
broker, ours or Kafka, from any machine, and shows what clients see: members, the partitions the
leader assigned them (decoded from the ConsumerProtocol bytes), committed offsets and the lag to
each partition's log end. ``describe`` gathers one group's facts into a document
(``describe_group``); the views (``--offsets``, ``--members``, ``--state``) and the forms
(``--output table|plain|json``) only choose what to print of it. ``plain`` uses Kafka's tool's
columns (``GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID``).


Groups of the KIP-848 ``consumer`` protocol are asked with ConsumerGroupDescribe first (their
DescribeGroups answer is GROUP_ID_NOT_FOUND): their members carry member epochs and two
assignments, the one the coordinator targets and the one the member currently owns, which differ
while a partition waits to be revoked by its previous owner. A broker without the API (Kafka
before 3.7, or with the protocol disabled) gets the classic question alone.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

from ..client.blocking import LATEST, BlockingClient, KafkaError, TopicPartition, error_name
from ..client.core.errors import error_for
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.messages import make_request
from .base import CommandError, Tool, UsageError
from .connect import add_client_arguments, open_client
from .output import Report, add_output_argument
from .reset_offsets import add_reset_arguments, parse_topic_partitions, reset_offsets


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "List, describe, reset the offsets of, or delete consumer groups."
    sub = parser.add_subparsers(dest="groups_command", required=True, metavar="ACTION")
    listing = sub.add_parser("list", help="list consumer groups with their state "
                             "(--output plain: bare ids, as kafka-consumer-groups --list)")
    listing.add_argument("--state", action="append", default=[], metavar="STATE",
                         help="only groups in STATE (Stable, Empty, ...; repeatable)")
    describe = sub.add_parser("describe", help="members, assignments, committed offsets, lag")
    view = describe.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true",
                      help="committed offsets and lag per partition (Kafka's default)")
    view.add_argument("--members", action="store_true", help="members and their partitions")
    view.add_argument("--state", action="store_true", help="state, coordinator, members")
    reset = sub.add_parser("reset-offsets", help="move committed offsets (dry run by default)")
    add_reset_arguments(reset)
    delete = sub.add_parser("delete", help="delete groups (they must have no members)")
    delete_offsets = sub.add_parser("delete-offsets",
                                    help="delete a group's committed offsets of topics")
    delete_offsets.add_argument("--topic", action="append", default=[], required=True,
                                metavar="TOPIC[:P,...]", help="a topic, or some of its "
                                "partitions (repeatable)")
    for p in (describe, reset, delete, delete_offsets):
        add_group_arguments(p, several=p is not delete_offsets)
    for p in (listing, describe, reset, delete, delete_offsets):
        add_client_arguments(p, what="a broker to ask")
        p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                       help="socket timeout per request (default 10)")
    for p in (listing, describe, reset, delete_offsets):
        add_output_argument(p)


def add_group_arguments(parser: argparse.ArgumentParser, *, several: bool = True) -> None:
    parser.add_argument("groups", nargs="*" if several else "?", metavar="GROUP")
    parser.add_argument("--group", dest="group_options", action="append", default=[],
                        metavar="GROUP", help="a group (as Kafka's tool takes it; repeatable)")
    if several:
        parser.add_argument("--all-groups", action="store_true", help="every group")


def groups_of(client: BlockingClient, args: argparse.Namespace) -> list[str]:
    given = args.groups if isinstance(args.groups, list) else [args.groups] if args.groups else []
    names = list(dict.fromkeys([*given, *args.group_options]))
    if getattr(args, "all_groups", False):
        if names:
            raise UsageError("--all-groups excludes naming groups")
        return sorted({g.group_id for g in client.list_groups()
                       if g.protocol_type != SHARE_PROTOCOL_TYPE})
    if not names:
        raise UsageError("name a group (GROUP or --group GROUP)"
                         + (" or give --all-groups" if hasattr(args, "all_groups") else ""))
    return names


def run(args: argparse.Namespace) -> int:
    with open_client(args, timeout_s=args.timeout) as client:
        if args.groups_command == "list":
            return list_groups(client, args)
        if args.groups_command == "reset-offsets":
            return reset_offsets(client, args, groups_of(client, args))
        if args.groups_command == "delete":
            return delete_groups(client, groups_of(client, args))
        if args.groups_command == "delete-offsets":
            return delete_offsets(client, args, groups_of(client, args)[0])
        return describe_groups(client, args, groups_of(client, args))


# --- list ------------------------------------------------------------------------------------

#: ListGroups' protocol type of a share group (KIP-932)
SHARE_PROTOCOL_TYPE = "share"


def list_groups(client: BlockingClient, args: argparse.Namespace) -> int:
    """Every group of every broker, with its protocol type, state and member count."""
    wanted = {s.lower() for s in args.state}
    rows = []
    for listing in client.list_groups():  # each broker lists the groups it coordinates
        if listing.protocol_type == SHARE_PROTOCOL_TYPE:
            continue  # as kafka-consumer-groups: share groups are kafka-share-groups' to list
        kip848 = _describe_consumer_group(client, listing.group_id)
        if kip848 is not None:
            if wanted and kip848.group_state.lower() not in wanted:
                continue
            rows.append((listing.group_id, listing.protocol_type or "consumer",
                         kip848.group_state, len(kip848.members)))
            continue
        described = client.describe_group(listing.group_id)
        if wanted and described.state.lower() not in wanted:
            continue
        rows.append((listing.group_id, listing.protocol_type or "", described.state,
                     len(described.members)))
    rows.sort()
    report = Report(args.output)
    report.table(["group", "protocol type", "state", "members"], rows, numeric=["members"])
    report.plain_lines = kafka_group_list(rows, with_state=bool(wanted))
    report.document = [{"group": g, "protocol_type": t, "state": s, "members": m}
                       for g, t, s, m in rows]
    report.emit()
    return 0


def kafka_group_list(rows: list[tuple[str, str, str, int]], *, with_state: bool) -> list[str]:
    """``kafka-consumer-groups --list``'s lines: bare ids; with ``--state``, GROUP and STATE
    columns, the group padded to its longest id (at least 15)."""
    if not with_state:
        return [group for group, *_ in rows]
    width = max([15, *(len(group) for group, *_ in rows)])
    return [f"{group:<{width}} {state}" for group, state in
            [("GROUP", "STATE"), *((g, s) for g, _, s, _ in rows)]]


# --- describe --------------------------------------------------------------------------------

def describe_group(client: BlockingClient, group: str) -> dict[str, Any]:
    """One group as a document: state, protocol, coordinator, members, offsets and lag."""
    kip848 = _describe_consumer_group(client, group)
    if kip848 is not None:
        return _kip848_document(client, group, kip848)
    described = client.describe_group(group)
    committed = _committed(client, group)
    if described.state == "Dead" and not committed:
        raise CommandError(f"consumer group {group!r} does not exist")
    owners = {tp: (m.member_id, m.client_host, m.client_id)
              for m in described.members for tp in m.assignment}
    return {
        "group": group, "state": described.state,
        "protocol_type": described.protocol_type or None,
        "assignment_strategy": described.protocol or None,
        "coordinator": _coordinator(client, group),
        "members": [{"consumer_id": m.member_id, "client_id": m.client_id,
                     "host": m.client_host, "assignment": _assignment_list(m.assignment)}
                    for m in described.members],
        "offsets": _offsets(client, committed, owners)}


def _describe_consumer_group(client: BlockingClient, group: str) -> Any | None:
    """The ConsumerGroupDescribe answer for a KIP-848 group; None for a classic or unknown
    group, or a broker that does not implement the API."""
    try:
        body = client.coordinator(group).request(
            ApiKey.ConsumerGroupDescribe, lambda v: make_request(
                ApiKey.ConsumerGroupDescribe, v, group_ids=[group],
                include_authorized_operations=False))
    except KafkaError as exc:
        if exc.code == ErrorCode.UNSUPPORTED_VERSION:
            return None
        raise
    [described] = body.groups
    if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    if described.error_code:
        raise CommandError(f"ConsumerGroupDescribe {group!r}: {error_name(described.error_code)}"
                           + (f" ({described.error_message})" if described.error_message
                              else ""))
    return described


def _kip848_document(client: BlockingClient, group: str, described: Any) -> dict[str, Any]:
    """A consumer-protocol group: the classic document's keys, plus epochs, subscriptions and
    both assignments of each member."""
    owners: dict[TopicPartition, tuple[str, str, str]] = {}
    members = []
    for m in described.members:
        current = _partitions(m.assignment)
        owners.update(dict.fromkeys(current, (m.member_id, m.client_host, m.client_id)))
        members.append({
            "consumer_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
            "instance_id": m.instance_id, "member_epoch": m.member_epoch,
            "subscribed_topics": list(m.subscribed_topic_names),
            "subscribed_regex": m.subscribed_topic_regex or None,
            "assignment": _assignment_list(current),
            "target_assignment": _assignment_list(_partitions(m.target_assignment))})
    return {
        "group": group, "state": described.group_state, "protocol_type": "consumer",
        "assignment_strategy": described.assignor_name or None,
        "group_epoch": described.group_epoch, "assignment_epoch": described.assignment_epoch,
        "coordinator": _coordinator(client, group), "members": members,
        "offsets": _offsets(client, _committed(client, group), owners)}


def _partitions(assignment: Any) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(t.topic_name, p) for t in assignment.topic_partitions
                     for p in t.partitions)


def _assignment_list(assigned: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(assigned)]


def _committed(client: BlockingClient, group: str) -> dict[TopicPartition, int]:
    return {tp: found.offset for tp, found in client.committed(group).items()
            if found.offset >= 0}


def _coordinator(client: BlockingClient, group: str) -> dict[str, Any]:
    coordinator = client.coordinator(group)
    if not client.brokers:
        client.metadata([])
    coordinator_id = next((b.node_id for b in client.brokers.values()
                           if (b.host, b.port) == (coordinator.host, coordinator.port)), -1)
    return {"id": coordinator_id, "address": coordinator.address}


def _offsets(client: BlockingClient, committed: dict[TopicPartition, int],
             owners: dict[TopicPartition, tuple[str, str, str]]) -> list[dict[str, Any]]:
    """Per partition: committed offset, log end, lag and owner (member id, host, client id)."""
    partitions = sorted(set(committed) | set(owners))
    try:
        log_end = _log_end_offsets(client, partitions)
    except KafkaError as exc:  # still worth showing members and commits
        print(f"trio-broker groups: no log end offsets, lag unknown: {exc}", file=sys.stderr)
        log_end = {}
    offsets = []
    for tp in partitions:
        offset, end = committed.get(tp), log_end.get(tp)
        consumer_id, host, client_id = owners.get(tp, (None, None, None))
        offsets.append({
            "topic": tp.topic, "partition": tp.partition, "current_offset": offset,
            "log_end_offset": end,
            "lag": None if offset is None or end is None else max(end - offset, 0),
            "consumer_id": consumer_id, "host": host, "client_id": client_id})
    return offsets


def describe_groups(client: BlockingClient, args: argparse.Namespace,
                    groups: list[str]) -> int:
    documents = [describe_group(client, g) for g in groups]
    report = Report(args.output)
    everything = not (args.offsets or args.members or args.state)
    if args.output == "plain":
        if args.state:
            report.table(["group", "coordinator", "coordinator id", "assignment strategy",
                          "state", "members"], [_state_row(d) for d in documents])
        elif args.members:
            report.table(["group", "consumer id", "host", "client id", "partitions",
                          "assignment"], [row for d in documents for row in _member_rows(d)])
        else:
            report.table(["group", "topic", "partition", "current offset", "log end offset",
                          "lag", "consumer id", "host", "client id"],
                         [(d["group"], *_offset_row(o)) for d in documents
                          for o in d["offsets"]])
    for d in documents if args.output == "table" else ():
        kip848 = "group_epoch" in d
        protocol = (f"consumer (KIP-848), assignor {d['assignment_strategy'] or '-'}, "
                    f"group epoch {d['group_epoch']}, assignment epoch {d['assignment_epoch']}"
                    if kip848 else
                    f"{d['protocol_type'] or '-'}/{d['assignment_strategy'] or '-'}")
        report.line(f"group {d['group']}: state {d['state']}, protocol {protocol}, "
                    f"{len(d['members'])} members, coordinator {d['coordinator']['address']} "
                    f"(id {d['coordinator']['id']})")
        if (everything or args.members) and d["members"] and kip848:
            report.table(["consumer id", "instance id", "client id", "host", "epoch",
                          "subscription", "current assignment", "target assignment"],
                         [_kip848_member_row(m) for m in d["members"]], title="members",
                         numeric=["epoch"])
        elif (everything or args.members) and d["members"]:
            report.table(["consumer id", "host", "client id", "partitions", "assignment"],
                         [row[1:] for row in _member_rows(d)], title="members",
                         numeric=["partitions"])
        if (everything or args.offsets) and d["offsets"]:
            report.table(["topic", "partition", "current offset", "log end offset", "lag",
                          "consumer id", "host", "client id"],
                         [_offset_row(o) for o in d["offsets"]], title="offsets",
                         numeric=["partition", "current offset", "log end offset", "lag"])
    report.document = documents
    report.emit()
    return 0


def _state_row(d: dict[str, Any]) -> tuple[Any, ...]:
    return (d["group"], d["coordinator"]["address"], d["coordinator"]["id"],
            d["assignment_strategy"], d["state"], len(d["members"]))


def _member_rows(d: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(d["group"], m["consumer_id"], m["host"], m["client_id"], len(m["assignment"]),
             format_assignment(TopicPartition(a["topic"], a["partition"])
                               for a in m["assignment"]))
            for m in d["members"]]


def _kip848_member_row(m: dict[str, Any]) -> tuple[Any, ...]:
    subscription = ",".join(m["subscribed_topics"])
    if m["subscribed_regex"]:
        subscription = f"/{m['subscribed_regex']}/" + (f" ({subscription})" if subscription
                                                        else "")
    current, target = (format_assignment(TopicPartition(a["topic"], a["partition"])
                                         for a in m[key])
                       for key in ("assignment", "target_assignment"))
    return (m["consumer_id"], m["instance_id"] or "-", m["client_id"], m["host"],
            m["member_epoch"], subscription or "-", current,
            "same" if m["target_assignment"] == m["assignment"] else target)


def _offset_row(o: dict[str, Any]) -> tuple[Any, ...]:
    return (o["topic"], o["partition"], o["current_offset"], o["log_end_offset"], o["lag"],
            o["consumer_id"], o["host"], o["client_id"])


def format_assignment(assigned: Iterable[TopicPartition]) -> str:
    """``orders(0,1,2);payments(0)`` (no spaces, so plain output stays one field)."""
    by_topic: dict[str, list[int]] = {}
    for tp in assigned:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ";".join(f"{topic}({','.join(str(p) for p in sorted(parts))})"
                    for topic, parts in sorted(by_topic.items()))


def _log_end_offsets(client: BlockingClient, partitions: list[TopicPartition],
                     ) -> dict[TopicPartition, int]:
    """Latest offset of each partition that still exists and has a leader."""
    if not partitions:
        return {}
    topics = client.metadata(sorted({tp.topic for tp in partitions})).topics
    live = [tp for tp in partitions
            if (info := topics.get(tp.topic)) is not None and info.error == ErrorCode.NONE
            and info.leader(tp.partition) >= 0]
    return client.list_offsets(dict.fromkeys(live, LATEST)) if live else {}


# --- delete ----------------------------------------------------------------------------------

def delete_groups(client: BlockingClient, groups: list[str], kind: str = "consumer") -> int:
    """Kafka's words (``kind``: consumer or share groups, as kafka-consumer-groups.sh and
    kafka-share-groups.sh say them): every group deleted, or which could not be and why
    (exit 1)."""
    results = client.delete_groups(groups)
    failed = {g: code for g, code in results.items() if code}
    if failed:
        raise CommandError(f"deletion of some {kind} groups failed: " + "; ".join(
            f"group '{g}' could not be deleted due to: {error_name(code)}"
            for g, code in failed.items()))
    names = ", ".join(f"'{g}'" for g in groups)
    print(f"Deletion of requested {kind} groups ({names}) was successful.")
    return 0


def delete_offsets(client: BlockingClient, args: argparse.Namespace, group: str) -> int:
    """Kafka's table: TOPIC PARTITION STATUS (Successful, or the error's name); exit 1 when
    any partition failed."""
    partitions = parse_topic_partitions(client, args.topic)
    codes = client.delete_offsets(group, partitions)
    rows = [(tp.topic, tp.partition, "Successful" if not code else error_name(code))
            for tp, code in sorted(codes.items())]
    report = Report(args.output)
    report.table(["topic", "partition", "status"], rows, numeric=["partition"])
    report.document = [{"topic": t, "partition": p, "status": s} for t, p, s in rows]
    report.emit()
    failed = [(tp, code) for tp, code in sorted(codes.items()) if code]
    if failed:
        tp, code = failed[0]
        raise error_for(code, f"cannot delete the offsets of {len(failed)} partition(s) of "
                        f"group {group!r} ({tp}: {error_name(code)})")
    return 0


GROUPS = Tool(add_arguments, run)
