"""``trio-broker topics create|list|describe|alter|delete``: Kafka's ``kafka-topics`` over the
protocol.

Why the protocol and not the data directory: the command works against any running broker, ours
or Kafka, on any machine, and shows what clients see. Admin requests go to the controller that
Metadata names (Kafka answers NOT_CONTROLLER elsewhere); offsets are asked of each leader.
``alter`` grows partitions (CreatePartitions) and sets or deletes topic configs
(IncrementalAlterConfigs), which Kafka's tool leaves to ``kafka-configs`` nowadays.

``describe`` shows the cleanable dirty ratio of each partition of a compacted topic, which no
Kafka request carries: this project's brokers put it in a tagged field of DescribeLogDirs (which
Kafka's clients skip), asked of each leader; against Kafka the ratio shows as unknown.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from typing import Any

from ..client.blocking import (
    EARLIEST,
    LATEST,
    TOPIC_RESOURCE,
    BlockingClient,
    ConfigOperation,
    KafkaError,
    TopicInfo,
    TopicPartition,
    error_name,
    source_name,
)
from ..client.core import admin as admin_requests
from ..client.core.errors import error_for
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from .base import Tool, UsageError
from .connect import add_client_arguments, open_client
from .output import Report, add_output_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Create, list, describe, alter or delete topics on any "
                          "Kafka-protocol broker.")
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
    listing = sub.add_parser("list", help="list topics with their partition counts "
                             "(--output plain: bare names, as kafka-topics --list)")
    listing.add_argument("--exclude-internal", action="store_true",
                         help="leave out internal topics (__consumer_offsets, ...)")
    describe = sub.add_parser("describe", help="partitions, leaders, offsets and configs")
    describe.add_argument("topics", nargs="*", metavar="TOPIC",
                          help="topics to describe (default: all)")
    describe.add_argument("--topic", dest="topic_options", action="append", default=[],
                          metavar="TOPIC", help="a topic to describe (repeatable)")
    alter = sub.add_parser("alter", help="add partitions, set or delete configs")
    alter.add_argument("topic", metavar="TOPIC")
    alter.add_argument("--partitions", type=int, metavar="N",
                       help="the new partition count (partitions are only ever added)")
    alter.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                       help="set a topic config (repeatable)")
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                       help="remove a topic config override (repeatable)")
    delete = sub.add_parser("delete", help="delete a topic and its data")
    delete.add_argument("topics", nargs="+", metavar="TOPIC")
    delete.add_argument("--if-exists", action="store_true",
                        help="succeed quietly if a topic does not exist")
    for p in (create, listing, describe, alter, delete):
        add_client_arguments(p)
        p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                       help="socket timeout per request (default 10)")
    for p in (listing, describe):
        add_output_argument(p)


def run(args: argparse.Namespace) -> int:
    with open_client(args, timeout_s=args.timeout) as client:
        return _ACTIONS[args.topics_command](client, args)


def parse_configs(items: list[str], option: str = "--config") -> dict[str, str]:
    """``["k=v", ...]`` -> {k: v}; a missing ``=`` or key is a UsageError."""
    configs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"bad {option} {item!r}: expected KEY=VALUE")
        if key in configs:
            raise UsageError(f"{option} {key} given twice")
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


def _alter(client: BlockingClient, args: argparse.Namespace) -> int:
    configs = parse_configs(args.config)
    deleted = [k.strip() for k in args.delete_config]
    both = sorted(set(configs) & set(deleted))
    if both:
        raise UsageError(f"{both[0]} is both set (--config) and deleted (--delete-config)")
    if args.partitions is None and not configs and not deleted:
        raise UsageError("nothing to alter: give --partitions, --config or --delete-config")
    info = client.topic(args.topic)
    done = []
    if args.partitions is not None:
        now = len(info.partitions)
        if args.partitions <= now:
            raise UsageError(f"topic {args.topic!r} has {now} partitions; --partitions can "
                             f"only add to them (got {args.partitions})")
        client.create_partitions(args.topic, args.partitions)
        done.append(f"partitions {now} -> {args.partitions}")
    if configs or deleted:
        changes: list[tuple[str, int, str | None]] = [
            (k, ConfigOperation.SET, v) for k, v in configs.items()]
        changes += [(k, ConfigOperation.DELETE, None) for k in deleted]
        client.incremental_alter_configs(TOPIC_RESOURCE, args.topic, changes)
        done += [f"set {k}={v}" for k, v in configs.items()]
        done += [f"deleted {k}" for k in deleted]
    print(f"Altered topic {args.topic}: {'; '.join(done)}.")
    return 0


def _list(client: BlockingClient, args: argparse.Namespace) -> int:
    cluster = client.metadata(None)
    rows: list[dict[str, Any]] = []
    for name, info in sorted(cluster.topics.items()):
        if args.exclude_internal and info.internal:
            continue
        rf = max((len(p.replicas) for p in info.partitions.values()), default=0)
        rows.append({"topic": name, "partitions": len(info.partitions),
                     "replication_factor": rf, "internal": info.internal})
    report = Report(args.output)
    report.table(["topic", "partitions", "replication factor"],
                 [(r["topic"], r["partitions"], r["replication_factor"]) for r in rows],
                 numeric=["partitions", "replication factor"])
    report.plain_lines = [r["topic"] for r in rows]  # kafka-topics --list
    report.document = rows
    report.emit()
    return 0


def _describe(client: BlockingClient, args: argparse.Namespace) -> int:
    names = list(dict.fromkeys([*args.topics, *args.topic_options]))
    cluster = client.metadata(names or None)
    for name in names:
        info = cluster.topics.get(name)
        if info is None or info.error:
            code = info.error if info else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            raise error_for(code, f"cannot describe topic {name!r}: {error_name(code)}")
    report = Report(args.output)
    described = [describe_topic(client, info) for _, info in sorted(cluster.topics.items())]
    if args.output == "plain":  # one table of partitions and one of configs, for awk
        report.table(["topic", "partition", "leader", "replicas", "isr", "log start offset",
                      "log end offset", "dirty ratio"],
                     [(d["topic"], *_partition_row(p), _ratio(p)) for d in described
                      for p in d["partitions"]])
        report.table(["topic", "config", "value", "source"],
                     [(d["topic"], *_config_row(c)) for d in described
                      for c in d["configs"] or ()])
    for d in described if args.output == "table" else ():
        report.line(f"Topic: {d['topic']}  PartitionCount: {d['partition_count']}  "
                    f"ReplicationFactor: {d['replication_factor']}")
        if d["compacted"]:
            report.table(["partition", "leader", "replicas", "isr", "log start", "log end",
                          "dirty ratio"],
                         [(*_partition_row(p), _ratio(p)) for p in d["partitions"]],
                         numeric=["partition", "leader", "log start", "log end", "dirty ratio"])
        else:
            report.table(["partition", "leader", "replicas", "isr", "log start", "log end"],
                         [_partition_row(p) for p in d["partitions"]],
                         numeric=["partition", "leader", "log start", "log end"])
        if d["configs"] is None:
            report.line(f"configs unavailable: {d['configs_error']}")
        else:
            report.table(["config", "value", "source"],
                         [_config_row(c) for c in d["configs"]])
    report.document = described
    report.emit()
    return 0


def describe_topic(client: BlockingClient, info: TopicInfo) -> dict[str, Any]:
    """A topic's partitions (leaders, replicas, offsets) and configs, as a JSON document."""
    parts = sorted(info.partitions)
    led = [TopicPartition(info.name, p) for p in parts if info.partitions[p].leader >= 0]
    start = client.list_offsets(dict.fromkeys(led, EARLIEST)) if led else {}
    end = client.list_offsets(dict.fromkeys(led, LATEST)) if led else {}
    rf = max((len(p.replicas) for p in info.partitions.values()), default=0)
    doc: dict[str, Any] = {
        "topic": info.name, "partition_count": len(parts), "replication_factor": rf,
        "partitions": [{
            "partition": p, "leader": info.partitions[p].leader,
            "replicas": list(info.partitions[p].replicas), "isr": list(info.partitions[p].isr),
            "log_start_offset": start.get(TopicPartition(info.name, p)),
            "log_end_offset": end.get(TopicPartition(info.name, p))} for p in parts],
        "configs": None, "compacted": False}
    for p in doc["partitions"]:
        p["dirty_ratio"] = None
    try:
        configs = client.describe_configs(info.name)
    except KafkaError as exc:
        doc["configs_error"] = str(exc)
        return doc
    doc["configs"] = [{"name": e.name, "value": e.value, "source": source_name(e.source),
                       "read_only": e.read_only, "sensitive": e.sensitive} for e in configs]
    policy = next((e.value or "" for e in configs if e.name == "cleanup.policy"), "")
    if "compact" in policy.split(","):
        doc["compacted"] = True
        ratios = _dirty_ratios(client, info)
        for p in doc["partitions"]:
            p["dirty_ratio"] = ratios.get(p["partition"])
    return doc


def _dirty_ratios(client: BlockingClient, info: TopicInfo) -> dict[int, float]:
    """Each partition's dirty ratio, from its leader's DescribeLogDirs (where it tells)."""
    by_leader: dict[int, list[int]] = {}
    for p, meta in info.partitions.items():
        if meta.leader >= 0:
            by_leader.setdefault(meta.leader, []).append(p)
    ratios: dict[int, float] = {}
    for leader, parts in by_leader.items():
        wanted = {info.name: parts}
        try:
            body = client.connection(leader).request(
                ApiKey.DescribeLogDirs, functools.partial(
                    admin_requests.describe_log_dirs_request, partitions=wanted))
        except KafkaError:  # the ratio is extra: the rest of the description stands
            continue
        for log_dir in admin_requests.parse_describe_log_dirs(body)[1]:
            for tp, ratio in log_dir.dirty_ratios.items():
                ratios[tp.partition] = ratio
    return ratios


def _ratio(p: dict[str, Any]) -> str:
    return "-" if p["dirty_ratio"] is None else f"{p['dirty_ratio']:.3f}"


def _partition_row(p: dict[str, Any]) -> tuple[Any, ...]:
    return (p["partition"], p["leader"], _ids(p["replicas"]), _ids(p["isr"]),
            p["log_start_offset"], p["log_end_offset"])


def _config_row(c: dict[str, Any]) -> tuple[Any, ...]:
    return (c["name"], "null" if c["value"] is None else c["value"], c["source"])


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids)


_ACTIONS: dict[str, Callable[[BlockingClient, argparse.Namespace], int]] = {
    "create": _create, "list": _list, "describe": _describe, "alter": _alter,
    "delete": _delete}

TOPICS = Tool(add_arguments, run)
