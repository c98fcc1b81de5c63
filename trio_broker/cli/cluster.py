"""``trio-broker cluster describe|api-versions``: the cluster as a client sees it.

Why: ``describe`` answers what Kafka's ``kafka-cluster cluster-id``, ``kafka-metadata-quorum``'s
broker list and ``kafka-broker-api-versions`` answer together: the cluster id, the controller,
every broker's address and the API versions each one advertises (ApiVersions, asked of each
broker). ``api-versions`` prints only the last part, one row per API and a column per broker.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..client.blocking import BlockingClient
from ..client.core.versions import CLIENT_VERSIONS, api_name
from .base import Tool
from .connect import add_client_arguments, open_client
from .output import Report, add_output_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Describe the cluster: its id, brokers, controller and API versions."
    sub = parser.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    describe = sub.add_parser("describe", help="cluster id, controller, brokers, API versions")
    versions = sub.add_parser("api-versions", help="the API versions of every broker")
    for p in (describe, versions):
        add_client_arguments(p)
        p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                       help="socket timeout per request (default 10)")
        add_output_argument(p)


def run(args: argparse.Namespace) -> int:
    with open_client(args, timeout_s=args.timeout) as client:
        document = describe_cluster(client)
    report = Report(args.output)
    if args.cluster_command == "describe":
        report.line(f"Cluster id: {document['cluster_id']}  "
                    f"Controller: {document['controller_id']}")
        report.table(["broker", "host", "port", "rack", "controller"],
                     [(b["id"], b["host"], b["port"], b["rack"],
                       "yes" if b["id"] == document["controller_id"] else "no")
                      for b in document["brokers"]],
                     title="brokers", numeric=["broker", "port"])
    _versions_table(report, document)
    report.document = (document if args.cluster_command == "describe"
                       else {str(b["id"]): b["api_versions"] for b in document["brokers"]})
    report.emit()
    return 0


def describe_cluster(client: BlockingClient) -> dict[str, Any]:
    found = client.describe_cluster()
    brokers = []
    for broker_id, host, port, rack in sorted(found.brokers):
        versions = client.api_versions(broker_id)
        brokers.append({"id": broker_id, "host": host, "port": port, "rack": rack,
                        "api_versions": [
                            {"api": api_name(key), "key": key, "min": low, "max": high,
                             "usable": _usable(key, low, high)}
                            for key, (low, high) in sorted(versions.items())]})
    return {"cluster_id": found.cluster_id, "controller_id": found.controller_id,
            "brokers": brokers}


def _usable(key: int, low: int, high: int) -> int | None:
    """The version this client sends (kafka-broker-api-versions' "usable"), or None."""
    ours = CLIENT_VERSIONS.get(key)
    if ours is None or max(ours.min, low) > min(ours.max, high):
        return None
    return min(ours.max, high)


def _versions_table(report: Report, document: dict[str, Any]) -> None:
    brokers = document["brokers"]
    by_key: dict[int, dict[int, str]] = {}
    names: dict[int, str] = {}
    for broker in brokers:
        for v in broker["api_versions"]:
            names[v["key"]] = v["api"]
            by_key.setdefault(v["key"], {})[broker["id"]] = f"{v['min']}-{v['max']}"
    columns = ["api", "key"] + [f"broker {b['id']}" for b in brokers]
    rows = [(names[key], key, *(by_key[key].get(b["id"]) for b in brokers))
            for key in sorted(by_key)]
    report.table(columns, rows, title="API versions", numeric=["key"])


CLUSTER = Tool(add_arguments, run)
