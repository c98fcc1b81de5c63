"""``trio-broker topics create|list|describe|delete``: Kafka's ``kafka-topics`` over the protocol.

Why the protocol and not the data directory: the command works against any running broker, ours
or Kafka, on any machine, and shows what clients see. Admin requests go to the controller that
Metadata names (Kafka answers NOT_CONTROLLER elsewhere); offsets are asked of each leader.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

from ..blocking_client import (
    EARLIEST,
    LATEST,
    BlockingClient,
    KafkaError,
    TopicInfo,
    TopicPartition,
    error_name,
    source_name,
)
from ..client_core.errors import error_for
from ..protocol.errors import ErrorCode
from .base import Tool, UsageError
from .connect import add_client_arguments, open_client


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Create, list, describe or delete topics on any Kafka-protocol broker."
    sub = parser.add_subparsers(dest="topics_command", required=True, metavar="ACTION")
    create = sub.add_parser("create", help="create a topic")
    create.add_argument("topic", metavar="TOPIC")
    create.add_argument("--partitions", type=int, default=-1, metavar="N",
                        help="partition count (default: the broker's num.partitions)")
    create.add_argument("--replication-factor", type=int, default=-1, metavar="N",
                        help="replicas per partition (default: the broker's)")
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a topic config override, e.g. retention.ms=60000 (repeatable)")
    create.add_argument("--if-not-exists", action="store_true",
                        help="succeed quietly if the topic already exists")
    listing = sub.add_parser("list", help="list topics with their partition counts")
    describe = sub.add_parser("describe", help="partitions, leaders, offsets and configs")
    describe.add_argument("topics", nargs="*", metavar="TOPIC",
                          help="topics to describe (default: all)")
    delete = sub.add_parser("delete", help="delete a topic and its data")
    delete.add_argument("topics", nargs="+", metavar="TOPIC")
    delete.add_argument("--if-exists", action="store_true",
                        help="succeed quietly if a topic does not exist")
    for p in (create, listing, describe, delete):
        add_client_arguments(p)
        p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                       help="socket timeout per request (default 10)")


def run(args: argparse.Namespace) -> int:
    with open_client(args, timeout_s=args.timeout) as client:
        return _ACTIONS[args.topics_command](client, args)


def console() -> Console:
    """A console that does not squeeze tables to 80 columns when writing to a pipe."""
    out = Console(highlight=False)
    if not out.is_terminal:
        out = Console(highlight=False, width=max(out.width, 160))
    return out


def parse_configs(items: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` -> {k: v}; a missing ``=`` or key is a UsageError."""
    configs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"bad --config {item!r}: expected KEY=VALUE")
        if key in configs:
            raise UsageError(f"--config {key} given twice")
        configs[key] = value.strip()
    return configs


def _create(client: BlockingClient, args: argparse.Namespace) -> int:
    configs = parse_configs(args.config)
    if args.partitions == 0 or args.partitions < -1:
        raise UsageError(f"--partitions must be at least 1, got {args.partitions}")
    try:
        client.create_topic(args.topic, args.partitions, args.replication_factor, configs)
    except KafkaError as exc:
        if args.if_not_exists and exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return 0
        raise
    print(f"Created topic {args.topic}.")
    return 0


def _delete(client: BlockingClient, args: argparse.Namespace) -> int:
    for name in args.topics:
        try:
            client.delete_topic(name)
        except KafkaError as exc:
            if args.if_exists and exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                continue
            raise
        print(f"Deleted topic {name}.")
    return 0


def _list(client: BlockingClient, args: argparse.Namespace) -> int:
    cluster = client.metadata(None)
    table = Table()
    table.add_column("topic")
    table.add_column("partitions", justify="right")
    table.add_column("replication factor", justify="right")
    for name, info in sorted(cluster.topics.items()):
        rf = max((len(p.replicas) for p in info.partitions.values()), default=0)
        table.add_row(name, str(len(info.partitions)), str(rf))
    console().print(table)
    return 0


def _describe(client: BlockingClient, args: argparse.Namespace) -> int:
    names = list(args.topics)
    cluster = client.metadata(names or None)
    for name in names:
        info = cluster.topics.get(name)
        if info is None or info.error:
            code = info.error if info else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            raise error_for(code, f"cannot describe topic {name!r}: {error_name(code)}")
    out = console()
    for _name, info in sorted(cluster.topics.items()):
        _describe_one(client, out, info)
    return 0


def _describe_one(client: BlockingClient, out: Console, info: TopicInfo) -> None:
    parts = sorted(info.partitions)
    led = [TopicPartition(info.name, p) for p in parts if info.partitions[p].leader >= 0]
    start = client.list_offsets(dict.fromkeys(led, EARLIEST)) if led else {}
    end = client.list_offsets(dict.fromkeys(led, LATEST)) if led else {}
    rf = max((len(p.replicas) for p in info.partitions.values()), default=0)
    out.print(f"Topic: {info.name}  PartitionCount: {len(parts)}  ReplicationFactor: {rf}",
              soft_wrap=True)
    table = Table()
    for column in ("partition", "leader", "replicas", "isr", "log start", "log end"):
        table.add_column(column, justify="left" if column in ("replicas", "isr") else "right")
    for p in parts:
        pi = info.partitions[p]
        tp = TopicPartition(info.name, p)
        table.add_row(str(p), str(pi.leader), _ids(pi.replicas), _ids(pi.isr),
                      _offset(start.get(tp)), _offset(end.get(tp)))
    out.print(table)
    try:
        configs = client.describe_configs(info.name)
    except KafkaError as exc:
        out.print(f"configs unavailable: {exc}")
        return
    ctable = Table()
    ctable.add_column("config")
    ctable.add_column("value")
    ctable.add_column("source")
    for entry in configs:
        ctable.add_row(entry.name, "null" if entry.value is None else entry.value,
                       source_name(entry.source))
    out.print(ctable)


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(str(i) for i in ids)


def _offset(value: int | None) -> str:
    return "-" if value is None else str(value)


_ACTIONS: dict[str, Callable[[BlockingClient, argparse.Namespace], int]] = {
    "create": _create, "list": _list, "describe": _describe, "delete": _delete}

TOPICS = Tool(add_arguments, run)
