"""``trio-broker groups list|describe GROUP``: consumer groups as any Kafka broker reports them.

Why the Kafka protocol and not a look at the data directory: the command works against a running
broker, ours or Kafka, from any machine, and shows what clients see: members, the partitions the
leader assigned them (decoded from the ConsumerProtocol bytes), committed offsets and the lag to
each partition's log end.

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

from rich.console import Console
from rich.table import Table

from ..blocking_client import LATEST, BlockingClient, KafkaError, TopicPartition
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.messages import make_request
from .base import CommandError, Tool
from .connect import add_client_arguments, open_client


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="groups_command", required=True, metavar="ACTION")
    listing = sub.add_parser("list", help="list consumer groups with their state")
    describe = sub.add_parser("describe", help="members, assignments, committed offsets, lag")
    describe.add_argument("group", metavar="GROUP")
    for p in (listing, describe):
        add_client_arguments(p, what="a broker to ask")
        p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                       help="socket timeout per request (default 10)")


def run(args: argparse.Namespace) -> int:
    console = Console()
    with open_client(args, timeout_s=args.timeout) as client:
        if args.groups_command == "list":
            list_groups(console, client)
        else:
            describe_group(console, client, args.group)
    return 0


# --- list ------------------------------------------------------------------------------------

def list_groups(console: Console, client: BlockingClient) -> None:
    """Every group of every broker, with its protocol type, state and member count."""
    rows = []
    for listing in client.list_groups():  # each broker lists the groups it coordinates
        kip848 = _describe_consumer_group(client, listing.group_id)
        if kip848 is not None:
            rows.append((listing.group_id, listing.protocol_type or "consumer",
                         kip848.group_state, len(kip848.members)))
            continue
        described = client.describe_group(listing.group_id)
        rows.append((listing.group_id, listing.protocol_type or "-", described.state,
                     len(described.members)))
    if not rows:
        console.print("no consumer groups")
        return
    table = Table(title="consumer groups", title_justify="left")
    for column in ("group", "protocol type", "state", "members"):
        table.add_column(column, justify="right" if column == "members" else "left")
    for row in sorted(rows):
        table.add_row(row[0], row[1], row[2], str(row[3]))
    console.print(table)


# --- describe --------------------------------------------------------------------------------

def describe_group(console: Console, client: BlockingClient, group: str) -> None:
    kip848 = _describe_consumer_group(client, group)
    if kip848 is not None:
        _describe_kip848(console, client, group, kip848)
        return
    described = client.describe_group(group)
    coordinator = client.coordinator(group)
    committed = _committed(client, group)
    if described.state == "Dead" and not committed:
        raise CommandError(f"group {group!r} does not exist")
    console.print(f"group [bold]{group}[/bold]: state {described.state}, "
                  f"protocol {described.protocol_type or '-'}/{described.protocol or '-'}, "
                  f"{len(described.members)} members, coordinator {coordinator.address}")
    if described.members:
        table = Table(title="members", title_justify="left")
        for column in ("member id", "client id", "host", "assigned partitions"):
            table.add_column(column)
        for m in described.members:
            table.add_row(m.member_id, m.client_id, m.client_host,
                          _format_assignment(m.assignment))
        console.print(table)
    owners = {tp: m.member_id for m in described.members for tp in m.assignment}
    _print_offsets(console, client, committed, owners)


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
        code = described.error_code
        raise CommandError(f"ConsumerGroupDescribe {group!r}: {ErrorCode(code).name}"
                           + (f" ({described.error_message})" if described.error_message
                              else ""))
    return described


def _describe_kip848(console: Console, client: BlockingClient, group: str,
                     described: Any) -> None:
    coordinator = client.coordinator(group)
    console.print(f"group [bold]{group}[/bold]: state {described.group_state}, "
                  f"protocol consumer (KIP-848), assignor {described.assignor_name or '-'}, "
                  f"group epoch {described.group_epoch}, "
                  f"assignment epoch {described.assignment_epoch}, "
                  f"{len(described.members)} members, coordinator {coordinator.address}")
    owners: dict[TopicPartition, str] = {}
    if described.members:
        table = Table(title="members", title_justify="left")
        for column in ("member id", "instance id", "client id", "host", "epoch",
                       "subscription", "current assignment", "target assignment"):
            table.add_column(column, justify="right" if column == "epoch" else "left")
        for m in described.members:
            current = _partitions(m.assignment)
            target = _partitions(m.target_assignment)
            owners.update(dict.fromkeys(current, m.member_id))
            subscription = ", ".join(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                subscription = f"/{m.subscribed_topic_regex}/" + (
                    f" ({subscription})" if subscription else "")
            table.add_row(m.member_id, m.instance_id or "-", m.client_id, m.client_host,
                          str(m.member_epoch), subscription or "-",
                          _format_assignment(current),
                          "same" if target == current else _format_assignment(target))
        console.print(table)
    _print_offsets(console, client, _committed(client, group), owners)


def _partitions(assignment: Any) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(t.topic_name, p) for t in assignment.topic_partitions
                     for p in t.partitions)


def _committed(client: BlockingClient, group: str) -> dict[TopicPartition, int]:
    return {tp: found.offset for tp, found in client.committed(group).items()
            if found.offset >= 0}


def _print_offsets(console: Console, client: BlockingClient,
                   committed: dict[TopicPartition, int],
                   owners: dict[TopicPartition, str]) -> None:
    partitions = sorted(set(committed) | set(owners))
    if not partitions:
        return
    try:
        log_end = _log_end_offsets(client, partitions)
    except KafkaError as exc:  # still worth showing members and commits
        print(f"trio-broker groups: no log end offsets, lag unknown: {exc}", file=sys.stderr)
        log_end = {}
    table = Table(title="offsets", title_justify="left")
    for column in ("topic", "partition", "committed", "log end", "lag", "owner"):
        table.add_column(column, justify="right" if column in (
            "partition", "committed", "log end", "lag") else "left")
    for tp in partitions:
        offset = committed.get(tp)
        end = log_end.get(tp)
        lag = "-" if offset is None or end is None else str(max(end - offset, 0))
        table.add_row(tp.topic, str(tp.partition), "-" if offset is None else str(offset),
                      "-" if end is None else str(end), lag, owners.get(tp, "-"))
    console.print(table)


def _format_assignment(assigned: Iterable[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in assigned:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if not by_topic:
        return "-"
    return ", ".join(f"{topic}: {','.join(str(p) for p in sorted(parts))}"
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


GROUPS = Tool(add_arguments, run)
