"""Confluent's v3 JSON shapes: every resource a ``kind``, its ``metadata`` (``self``, the URL it
is read at, and ``resource_name``, its CRN), its fields and ``related`` links; every list a
``kind`` ending in ``List`` with its items in ``data``.

Why built from the request's own base URL: the links a client follows must reach this proxy at
the address the client used, whatever the broker advertises to Kafka clients.
"""

from __future__ import annotations

from typing import Any

from ...client.core.admin import ConfigEntry, source_name
from ...client.core.structs import BrokerInfo, PartitionInfo

Json = dict[str, Any]

#: Kafka's group states -> Confluent's ``state`` values
GROUP_STATES = {"Stable": "STABLE", "PreparingRebalance": "PREPARING_REBALANCE",
                "CompletingRebalance": "COMPLETING_REBALANCE", "Empty": "EMPTY", "Dead": "DEAD",
                "Assigning": "ASSIGNING", "Reconciling": "RECONCILING"}


class Urls:
    """URLs and CRNs under one cluster, as a client reached the proxy."""

    def __init__(self, base_url: str, cluster_id: str) -> None:
        self.root = base_url.rstrip("/") + "/v3/clusters"
        self.cluster_id = cluster_id
        self.cluster = f"{self.root}/{cluster_id}"
        self.crn = f"crn:///kafka={cluster_id}"

    def topic(self, topic: str) -> str:
        return f"{self.cluster}/topics/{topic}"

    def group(self, group_id: str) -> str:
        return f"{self.cluster}/consumer-groups/{group_id}"

    def broker(self, broker_id: int) -> str:
        return f"{self.cluster}/brokers/{broker_id}"


def related(url: str) -> Json:
    return {"related": url}


def resource(kind: str, self_url: str, resource_name: str | None, **fields: Any) -> Json:
    return {"kind": kind, "metadata": {"self": self_url, "resource_name": resource_name},
            **fields}


def listing(kind: str, self_url: str, data: list[Json]) -> Json:
    return {"kind": kind, "metadata": {"self": self_url, "next": None}, "data": data}


def cluster(urls: Urls, controller_id: int) -> Json:
    c = urls.cluster
    return resource(
        "KafkaCluster", c, urls.crn, cluster_id=urls.cluster_id,
        controller=related(urls.broker(controller_id)) if controller_id >= 0 else None,
        acls=related(f"{c}/acls"), brokers=related(f"{c}/brokers"),
        broker_configs=related(f"{c}/broker-configs"),
        consumer_groups=related(f"{c}/consumer-groups"), topics=related(f"{c}/topics"),
        partition_reassignments=related(f"{c}/topics/-/partitions/-/reassignment"))


def broker(urls: Urls, info: BrokerInfo) -> Json:
    url = urls.broker(info.node_id)
    return resource(
        "KafkaBroker", url, f"{urls.crn}/broker={info.node_id}", cluster_id=urls.cluster_id,
        broker_id=info.node_id, host=info.host, port=info.port, rack=info.rack,
        configs=related(f"{url}/configs"), partition_replicas=related(f"{url}/partition-replicas"))


def topic(urls: Urls, name: str, internal: bool, partitions_count: int,
          replication_factor: int) -> Json:
    url = urls.topic(name)
    return resource(
        "KafkaTopic", url, f"{urls.crn}/topic={name}", cluster_id=urls.cluster_id,
        topic_name=name, is_internal=internal, replication_factor=replication_factor,
        partitions_count=partitions_count, partitions=related(f"{url}/partitions"),
        configs=related(f"{url}/configs"),
        partition_reassignments=related(f"{url}/partitions/-/reassignment"),
        authorized_operations=[])


def partition(urls: Urls, name: str, info: PartitionInfo) -> Json:
    url = f"{urls.topic(name)}/partitions/{info.partition}"
    return resource(
        "KafkaPartition", url, f"{urls.crn}/topic={name}/partition={info.partition}",
        cluster_id=urls.cluster_id, topic_name=name, partition_id=info.partition,
        leader=related(f"{url}/replicas/{info.leader}") if info.leader >= 0 else None,
        replicas=related(f"{url}/replicas"), reassignment=related(f"{url}/reassignment"))


def config_collection(urls: Urls, owner: tuple[str, str, str | int]) -> tuple[str, str, str]:
    """(kind, URL of the configs, CRN prefix of one config) of a topic (``("topic",
    "topic_name", name)``), a broker (``("broker", "broker_id", id)``) or the cluster-wide
    broker defaults (``("cluster", "config_type", "BROKER")``)."""
    kind, _, name = owner
    if kind == "topic":
        return ("KafkaTopicConfig", f"{urls.topic(str(name))}/configs",
                f"{urls.crn}/topic={name}/config=")
    if kind == "broker":
        return ("KafkaBrokerConfig", f"{urls.broker(int(name))}/configs",
                f"{urls.crn}/broker={name}/config=")
    return "KafkaClusterConfig", f"{urls.cluster}/broker-configs", f"{urls.crn}/broker-config="


def config(urls: Urls, owner: tuple[str, str, str | int], entry: ConfigEntry,
           synonyms: list[tuple[str, str | None, int]]) -> Json:
    """One config of a topic, a broker or the cluster (``config_collection``)."""
    _, field, name = owner
    kind, base, crn = config_collection(urls, owner)
    value = None if entry.sensitive else entry.value
    return resource(
        kind, f"{base}/{entry.name}", f"{crn}{entry.name}", cluster_id=urls.cluster_id,
        **{field: name}, name=entry.name, value=value,
        is_default=source_name(entry.source) == "DEFAULT_CONFIG",
        is_read_only=entry.read_only, is_sensitive=entry.sensitive,
        source=source_name(entry.source),
        synonyms=[{"name": n, "value": None if entry.sensitive else v,
                   "source": source_name(s)} for n, v, s in synonyms])
