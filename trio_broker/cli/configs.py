"""``trio-broker configs describe|alter``: Kafka's ``kafka-configs`` for topics, brokers and
client-metrics subscriptions.

Why Kafka's options: ``--entity-type topics|brokers|client-metrics --entity-name NAME`` (or the
shorthands
``--topic``, ``--broker``, ``--broker-defaults``), ``--add-config k1=v1,k2=[a,b]`` and
``--delete-config k1,k2``, so a line from a Kafka runbook works once ``kafka-configs`` is
replaced by ``trio-broker configs describe|alter``. ``describe`` shows the overrides (dynamic
configs) as Kafka's does, and with ``--all`` every config with its source; ``alter`` changes
only the keys named (IncrementalAlterConfigs), so other overrides stay. A client-metrics
subscription (KIP-714: ``metrics``, ``interval.ms``, ``match``) is what ``kafka-client-metrics``
also sets; without ``--entity-name``, ``describe`` lists every subscription (ListConfigResources).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..client.blocking import (
    BROKER_RESOURCE,
    CLIENT_METRICS_RESOURCE,
    TOPIC_RESOURCE,
    BlockingClient,
    ConfigOperation,
    source_name,
)
from ..client.core.admin import GROUP_RESOURCE
from .base import Tool, UsageError
from .connect import add_client_arguments, open_client
from .output import Report, add_output_argument

ENTITY_TYPES = {"topics": TOPIC_RESOURCE, "brokers": BROKER_RESOURCE,
                "client-metrics": CLIENT_METRICS_RESOURCE, "groups": GROUP_RESOURCE}
_ENTITY_NAMES = {v: k for k, v in ENTITY_TYPES.items()}
def _own_source(resource_type: int, name: str) -> str:
    """The source of what was set on this entity itself: what ``describe`` lists without
    ``--all``, as kafka-configs.sh filters (a topic's own overrides, not the broker defaults it
    inherits)."""
    if resource_type == TOPIC_RESOURCE:
        return "DYNAMIC_TOPIC_CONFIG"
    if resource_type == CLIENT_METRICS_RESOURCE:
        return "DYNAMIC_CLIENT_METRICS_CONFIG"
    if resource_type == GROUP_RESOURCE:
        return "GROUP_CONFIG"
    return "DYNAMIC_BROKER_CONFIG" if name else "DYNAMIC_DEFAULT_BROKER_CONFIG"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Describe or alter topic, broker, client-metrics and group configs "
                          "(Kafka's kafka-configs).")
    sub = parser.add_subparsers(dest="configs_command", required=True, metavar="ACTION")
    describe = sub.add_parser("describe", help="the overrides (or, with --all, every config)")
    alter = sub.add_parser("alter", help="set or delete config overrides")
    for p in (describe, alter):
        p.add_argument("--entity-type", choices=sorted(ENTITY_TYPES), metavar="TYPE",
                       help="topics, brokers, client-metrics or groups")
        p.add_argument("--entity-name", metavar="NAME",
                       help="the topic, the broker id, the subscription or the group")
        p.add_argument("--entity-default", action="store_true",
                       help="the brokers' cluster-wide default (with --entity-type brokers)")
        p.add_argument("--topic", metavar="TOPIC", help="same as --entity-type topics "
                       "--entity-name TOPIC")
        p.add_argument("--broker", metavar="ID", help="same as --entity-type brokers "
                       "--entity-name ID")
        p.add_argument("--broker-defaults", action="store_true",
                       help="same as --entity-type brokers --entity-default")
        add_client_arguments(p)
        p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                       help="socket timeout per request (default 10)")
    describe.add_argument("--all", action="store_true",
                          help="every config with its source, not only the overrides")
    add_output_argument(describe)
    alter.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=V]",
                       help="set configs; a list value in brackets: k=[a,b] (repeatable)")
    alter.add_argument("--delete-config", action="append", default=[], metavar="K[,K]",
                       help="remove config overrides (repeatable)")


def entity(args: argparse.Namespace) -> tuple[int, str | None]:
    """(resource type, name); name None: every entity of the type, "" the broker default."""
    chosen = [(t, n) for t, n in (
        ("topics", args.topic), ("brokers", args.broker),
        ("brokers", "" if args.broker_defaults else None)) if n is not None]
    if args.entity_type is not None:
        if args.entity_default and args.entity_name is not None:
            raise UsageError("--entity-name and --entity-default exclude each other")
        if args.entity_default and args.entity_type != "brokers":
            raise UsageError("--entity-default applies to --entity-type brokers")
        chosen.append((args.entity_type, "" if args.entity_default else args.entity_name))
    elif args.entity_name is not None or args.entity_default:
        raise UsageError("--entity-name and --entity-default need --entity-type")
    if len(chosen) != 1:
        raise UsageError("name one entity: --entity-type topics|brokers|client-metrics "
                         "[--entity-name NAME], "
                         "--topic, --broker or --broker-defaults")
    kind, name = chosen[0]
    if kind == "brokers" and name and not name.isdigit():
        raise UsageError(f"a broker is named by its id, not {name!r}")
    return ENTITY_TYPES[kind], name


def run(args: argparse.Namespace) -> int:
    resource_type, name = entity(args)
    with open_client(args, timeout_s=args.timeout) as client:
        if args.configs_command == "describe":
            return _describe(client, args, resource_type, name)
        return _alter(client, args, resource_type, name)


def _what(resource_type: int, name: str) -> str:
    if resource_type == TOPIC_RESOURCE:
        return f"topic {name}"
    if resource_type == CLIENT_METRICS_RESOURCE:
        return f"client-metric {name}"  # kafka-configs' words
    if resource_type == GROUP_RESOURCE:
        return f"group {name}"
    return f"broker {name}" if name else "the brokers' default"


def _describe(client: BlockingClient, args: argparse.Namespace, resource_type: int,
              name: str | None) -> int:
    if name is None and resource_type == CLIENT_METRICS_RESOURCE:
        names = client.list_config_resources(CLIENT_METRICS_RESOURCE)
    elif name is None:
        names = (sorted(client.metadata(None).topics) if resource_type == TOPIC_RESOURCE
                 else sorted({g.group_id for g in client.list_groups()})
                 if resource_type == GROUP_RESOURCE
                 else [str(b) for b in sorted(client.metadata([]).brokers)])
    else:
        names = [name]
    documents: list[dict[str, Any]] = []
    for entity_name in names:
        entries = client.describe_configs(entity_name, resource_type=resource_type)
        own = _own_source(resource_type, entity_name)
        shown = [e for e in entries if args.all or source_name(e.source) == own]
        documents.append({
            "entity_type": _ENTITY_NAMES[resource_type],
            "entity_name": entity_name,
            "configs": [{"name": e.name, "value": None if e.sensitive else e.value,
                         "source": source_name(e.source), "read_only": e.read_only,
                         "sensitive": e.sensitive} for e in shown]})
    report = Report(args.output)
    rows = []
    for doc in documents:
        what = _what(resource_type, doc["entity_name"])
        report.line(f"{'All' if args.all else 'Dynamic'} configs for {what} are:")
        table = [(c["name"], _value(c), c["source"]) for c in doc["configs"]]
        report.table(["config", "value", "source"], table)
        rows += [(doc["entity_name"], *row) for row in table]
    if args.output == "plain":
        report = Report("plain")
        report.table(["entity", "config", "value", "source"], rows)
    report.document = documents if name is None else documents[0]
    report.emit()
    return 0


def _value(config: dict[str, Any]) -> str:
    if config["sensitive"]:
        return "(sensitive)"
    return "null" if config["value"] is None else str(config["value"])


def split_configs(items: list[str]) -> list[str]:
    """``k1=v1,k2=[a,b]`` -> ``["k1=v1", "k2=a,b"]``: commas inside brackets stay (Kafka)."""
    out: list[str] = []
    for item in items:
        depth, current = 0, ""
        for ch in item:
            if ch == "[":
                depth += 1
            elif ch == "]":
                depth -= 1
            if ch == "," and depth == 0:
                out.append(current)
                current = ""
                continue
            current += ch
        out.append(current)
    return [c.strip().replace("[", "").replace("]", "") for c in out if c.strip()]


def _alter(client: BlockingClient, args: argparse.Namespace, resource_type: int,
           name: str | None) -> int:
    if name is None:
        raise UsageError("alter needs one entity: --entity-name NAME (or --entity-default)")
    changes: list[tuple[str, int, str | None]] = []
    seen: set[str] = set()
    for item in split_configs(args.add_config):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"bad --add-config {item!r}: expected KEY=VALUE")
        changes.append((key.strip(), ConfigOperation.SET, value.strip()))
        seen.add(key.strip())
    for key in split_configs(args.delete_config):
        if key in seen:
            raise UsageError(f"{key} is both added and deleted")
        changes.append((key, ConfigOperation.DELETE, None))
    if not changes:
        raise UsageError("nothing to alter: give --add-config or --delete-config")
    client.incremental_alter_configs(resource_type, name, changes)
    if resource_type == BROKER_RESOURCE and not name:
        print("Completed updating default config for brokers in the cluster.")
    else:
        print(f"Completed updating config for {_what(resource_type, name)}.")
    return 0


CONFIGS = Tool(add_arguments, run)
