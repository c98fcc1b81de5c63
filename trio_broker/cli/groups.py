"""``trio-broker groups list|describe GROUP``: consumer groups as any Kafka broker reports them.

Why the Kafka protocol and not a look at the data directory: the command works against a running
broker, ours or Kafka, from any machine, and shows what clients see: members, the partitions the
leader assigned them (decoded from the ConsumerProtocol bytes), committed offsets and the lag to
each partition's log end.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table

from .._blocking_client import BrokerConnection, ClientError, parse_address
from ..coordinator.consumer_protocol import PayloadError, decode_assignment
from ..protocol.api_keys import ApiKey, request_class
from ..protocol.errors import ErrorCode
from .base import CommandError, Tool, UsageError
from .connect import add_bootstrap_argument, client_errors

_LATEST = -1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="groups_command", required=True, metavar="ACTION")
    listing = sub.add_parser("list", help="list consumer groups with their state")
    describe = sub.add_parser("describe", help="members, assignments, committed offsets, lag")
    describe.add_argument("group", metavar="GROUP")
    for p in (listing, describe):
        add_bootstrap_argument(p, what="a broker to ask")
        p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                       help="socket timeout per request (default 10)")


def run(args: argparse.Namespace) -> int:
    console = Console()
    try:
        host, port = parse_address(args.bootstrap_server)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    with client_errors():
        if args.groups_command == "list":
            list_groups(console, host, port, timeout_s=args.timeout)
        else:
            describe_group(console, host, port, args.group, timeout_s=args.timeout)
    return 0


# --- list ------------------------------------------------------------------------------------

def list_groups(console: Console, host: str, port: int, *, timeout_s: float) -> None:
    with BrokerConnection(host, port, timeout_s=timeout_s) as bootstrap:
        brokers = _brokers(bootstrap)
    rows: list[tuple[str, str, str, int]] = []
    for addr in brokers.values():  # each broker lists the groups it coordinates
        with BrokerConnection(*addr, timeout_s=timeout_s) as conn:
            listed = conn.call(ApiKey.ListGroups, 1)
            _check(listed.error_code, f"ListGroups on {conn.address}")
            names = [g.group_id for g in listed.groups]
            types = {g.group_id: g.protocol_type for g in listed.groups}
            if not names:
                continue
            described = conn.call(ApiKey.DescribeGroups, 0, groups=names)
            for g in described.groups:
                rows.append((g.group_id, types.get(g.group_id) or "-", g.group_state,
                             len(g.members)))
    table = Table(title="consumer groups", title_justify="left")
    for column in ("group", "protocol type", "state", "members"):
        table.add_column(column, justify="right" if column == "members" else "left")
    for row in sorted(rows):
        table.add_row(row[0], row[1], row[2], str(row[3]))
    if not rows:
        console.print("no consumer groups")
        return
    console.print(table)


# --- describe --------------------------------------------------------------------------------

def describe_group(console: Console, host: str, port: int, group: str, *,
                   timeout_s: float) -> None:
    with BrokerConnection(host, port, timeout_s=timeout_s) as bootstrap:
        found = bootstrap.call(ApiKey.FindCoordinator, 1, key=group, key_type=0)
        _check(found.error_code, f"FindCoordinator for {group!r}")
        coordinator = (found.host, found.port)
        with BrokerConnection(*coordinator, timeout_s=timeout_s) as conn:
            described = conn.call(ApiKey.DescribeGroups, 0, groups=[group]).groups[0]
            _check(described.error_code, f"DescribeGroups {group!r}")
            fetched = conn.call(ApiKey.OffsetFetch, 3, group_id=group, topics=None)
            _check(fetched.error_code, f"OffsetFetch {group!r}")
        committed = {(t.name, p.partition_index): p.committed_offset
                     for t in fetched.topics for p in t.partitions if p.committed_offset >= 0}
        if described.group_state == "Dead" and not committed:
            raise CommandError(f"group {group!r} does not exist")

        owners: dict[tuple[str, int], str] = {}
        members = []
        for m in described.members:
            try:
                assigned = decode_assignment(bytes(m.member_assignment)).partitions
            except PayloadError:
                assigned = {}
            for topic, parts in assigned.items():
                for p in parts:
                    owners[(topic, p)] = m.member_id
            members.append((m, assigned))
        partitions = sorted(set(committed) | set(owners))
        try:
            log_end = _log_end_offsets(bootstrap, partitions, timeout_s)
        except ClientError as exc:  # still worth showing members and commits
            print(f"trio-broker groups: no log end offsets, lag unknown: {exc}",
                  file=sys.stderr)
            log_end = {}

    console.print(f"group [bold]{group}[/bold]: state {described.group_state}, "
                  f"protocol {described.protocol_type or '-'}/{described.protocol_data or '-'}, "
                  f"{len(described.members)} members, coordinator {coordinator[0]}:"
                  f"{coordinator[1]}")
    if members:
        table = Table(title="members", title_justify="left")
        for column in ("member id", "client id", "host", "assigned partitions"):
            table.add_column(column)
        for m, assigned in members:
            table.add_row(m.member_id, m.client_id, m.client_host, _format_assignment(assigned))
        console.print(table)
    if partitions:
        table = Table(title="offsets", title_justify="left")
        for column in ("topic", "partition", "committed", "log end", "lag", "owner"):
            table.add_column(column, justify="right" if column in (
                "partition", "committed", "log end", "lag") else "left")
        for tp in partitions:
            offset = committed.get(tp)
            end = log_end.get(tp)
            lag = "-" if offset is None or end is None else str(max(end - offset, 0))
            table.add_row(tp[0], str(tp[1]), "-" if offset is None else str(offset),
                          "-" if end is None else str(end), lag, owners.get(tp, "-"))
        console.print(table)


def _format_assignment(assigned: dict[str, list[int]]) -> str:
    if not assigned:
        return "-"
    return ", ".join(f"{topic}: {','.join(str(p) for p in sorted(parts))}"
                     for topic, parts in sorted(assigned.items()))


def _brokers(conn: BrokerConnection) -> dict[int, tuple[str, int]]:
    meta = conn.call(ApiKey.Metadata, 1, topics=[])
    return {b.node_id: (b.host, b.port) for b in meta.brokers}


def _log_end_offsets(bootstrap: BrokerConnection, partitions: Iterable[tuple[str, int]],
                     timeout_s: float) -> dict[tuple[str, int], int]:
    """Latest offset of each partition, asked of its leader (ListOffsets v1, timestamp -1)."""
    partitions = list(partitions)
    if not partitions:
        return {}
    topics = sorted({t for t, _ in partitions})
    meta_cls: Any = request_class(ApiKey.Metadata)
    meta = bootstrap.call(ApiKey.Metadata, 1, topics=[
        meta_cls.MetadataRequestTopic(name=t) for t in topics])
    brokers = {b.node_id: (b.host, b.port) for b in meta.brokers}
    leaders = {(t.name, p.partition_index): p.leader_id
               for t in meta.topics for p in t.partitions}
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for tp in partitions:
        leader = leaders.get(tp, -1)
        if leader in brokers:
            by_leader.setdefault(leader, []).append(tp)
    offsets_cls: Any = request_class(ApiKey.ListOffsets)
    cls = offsets_cls.ListOffsetsTopic
    out: dict[tuple[str, int], int] = {}
    for leader, tps in by_leader.items():
        request_topics: dict[str, list[Any]] = {}
        for t, p in tps:
            request_topics.setdefault(t, []).append(
                cls.ListOffsetsPartition(partition_index=p, timestamp=_LATEST))
        with BrokerConnection(*brokers[leader], timeout_s=timeout_s) as conn:
            answer = conn.call(ApiKey.ListOffsets, 1, replica_id=-1, topics=[
                cls(name=t, partitions=ps) for t, ps in request_topics.items()])
        for t in answer.topics:
            for p in t.partitions:
                if p.error_code == ErrorCode.NONE:
                    out[(t.name, p.partition_index)] = p.offset
    return out


def _check(error_code: int, what: str) -> None:
    if error_code:
        try:
            name = ErrorCode(error_code).name
        except ValueError:
            name = str(error_code)
        raise CommandError(f"{what} failed: {name}")


GROUPS = Tool(add_arguments, run)
