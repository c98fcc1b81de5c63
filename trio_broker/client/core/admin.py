"""Admin requests: topics, partitions, configs, records, log dirs and the cluster's
description.

Each parser returns ``(resource name, error code, error message)`` per resource, the shape the
faces settle errors from (Kafka answers each resource on its own; one can fail while others
succeed).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ...protocol.api_keys import ApiKey, request_class
from ...protocol.messages import make_request
from .structs import TopicPartition

_CREATE: Any = request_class(ApiKey.CreateTopics)
_PARTITIONS: Any = request_class(ApiKey.CreatePartitions)
_DESCRIBE: Any = request_class(ApiKey.DescribeConfigs)
_ALTER: Any = request_class(ApiKey.AlterConfigs)
_LOG_DIRS: Any = request_class(ApiKey.DescribeLogDirs)
_INCREMENTAL: Any = request_class(ApiKey.IncrementalAlterConfigs)
_DELETE_RECORDS: Any = request_class(ApiKey.DeleteRecords)

#: config resource types (Kafka's ``ConfigResource.Type``)
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
#: a client-metrics subscription (KIP-714)
CLIENT_METRICS_RESOURCE = 16
#: the GROUP config resource (KIP-848 / KIP-932 per-group configs)
GROUP_RESOURCE = 32

ResourceResult = tuple[str, int, str | None]


class ConfigOperation(enum.IntEnum):
    """IncrementalAlterConfigs' operations (Kafka's ``AlterConfigOp.OpType``)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ClusterDescription(NamedTuple):
    """DescribeCluster's answer: the cluster id, the controller and every broker."""

    error: int
    error_message: str | None
    cluster_id: str | None
    controller_id: int
    #: (broker id, host, port, rack)
    brokers: list[tuple[int, str, int, str | None]]


class NewTopic(NamedTuple):
    """A topic to create; -1 partitions or replication factor means the broker's default."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] | None = None


class ConfigSource(enum.IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    DYNAMIC_CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigEntry(NamedTuple):
    name: str
    value: str | None
    read_only: bool
    source: int
    sensitive: bool


def source_name(source: int) -> str:
    """Kafka's name for a DescribeConfigs ``config_source``."""
    try:
        return ConfigSource(source).name
    except ValueError:
        return "UNKNOWN"


def create_topics_request(version: int, topics: Iterable[NewTopic], *, timeout_ms: int,
                          validate_only: bool = False) -> Any:
    """-1 (the broker's default) exists from v4; older versions get 1 instead."""
    default = -1 if version >= 4 else 1
    config_cls = _CREATE.CreatableTopic.CreatableTopicConfig
    return make_request(
        ApiKey.CreateTopics, version, timeout_ms=timeout_ms, validate_only=validate_only,
        topics=[_CREATE.CreatableTopic(
            name=t.name, num_partitions=t.num_partitions if t.num_partitions > 0 else default,
            replication_factor=(t.replication_factor if t.replication_factor > 0
                                else default),
            assignments=[],
            configs=[config_cls(name=k, value=v) for k, v in (t.configs or {}).items()])
            for t in topics])


def parse_create_topics(response: Any) -> list[ResourceResult]:
    return [(t.name, t.error_code, getattr(t, "error_message", None)) for t in response.topics]


def delete_topics_request(version: int, names: Sequence[str], *, timeout_ms: int) -> Any:
    return make_request(ApiKey.DeleteTopics, version, topic_names=list(names),
                        timeout_ms=timeout_ms)


def parse_delete_topics(response: Any) -> list[ResourceResult]:
    return [(r.name, r.error_code, getattr(r, "error_message", None))
            for r in response.responses]


def create_partitions_request(version: int, new_counts: Mapping[str, int], *, timeout_ms: int,
                              validate_only: bool = False) -> Any:
    """Grow each topic to the given total number of partitions."""
    return make_request(
        ApiKey.CreatePartitions, version, timeout_ms=timeout_ms, validate_only=validate_only,
        topics=[_PARTITIONS.CreatePartitionsTopic(name=t, count=n, assignments=None)
                for t, n in new_counts.items()])


def parse_create_partitions(response: Any) -> list[ResourceResult]:
    return [(r.name, r.error_code, r.error_message) for r in response.results]


def describe_configs_request(version: int, resources: Iterable[tuple[int, str]], *,
                             keys: Sequence[str] | None = None) -> Any:
    return make_request(
        ApiKey.DescribeConfigs, version, include_synonyms=False, include_documentation=False,
        resources=[_DESCRIBE.DescribeConfigsResource(
            resource_type=kind, resource_name=name,
            configuration_keys=None if keys is None else list(keys))
            for kind, name in resources])


def list_config_resources_request(version: int, resource_types: Iterable[int]) -> Any:
    """ListConfigResources; v0 (ListClientMetricsResources) lists client-metrics subscriptions
    only and takes no types."""
    return make_request(ApiKey.ListConfigResources, version,
                        resource_types=list(resource_types) if version >= 1 else None)


def parse_list_config_resources(response: Any) -> tuple[int, list[tuple[int, str]]]:
    """(error code, [(resource type, name)]); v0's resources are client-metrics ones."""
    return response.error_code, [(r.resource_type, r.resource_name)
                                 for r in response.config_resources]


def parse_describe_configs(response: Any,
                           ) -> list[tuple[str, int, str | None, dict[str, ConfigEntry]]]:
    """(resource name, error code, error message, {config name: entry}) per resource."""
    return [(r.resource_name, r.error_code, r.error_message, {
        c.name: ConfigEntry(c.name, c.value, c.read_only,
                            c.config_source if c.config_source is not None else 0,
                            c.is_sensitive)
        for c in r.configs}) for r in response.results]


def alter_configs_request(version: int, resource_type: int, name: str,
                          configs: Mapping[str, str | None], *,
                          validate_only: bool = False) -> Any:
    """Kafka's AlterConfigs: the resource's overrides become exactly ``configs``."""
    resource = _ALTER.AlterConfigsResource
    return make_request(
        ApiKey.AlterConfigs, version, validate_only=validate_only,
        resources=[resource(resource_type=resource_type, resource_name=name, configs=[
            resource.AlterableConfig(name=k, value=v) for k, v in configs.items()])])


def parse_alter_configs(response: Any) -> list[ResourceResult]:
    return [(r.resource_name, r.error_code, r.error_message) for r in response.responses]


class LogDirDescription(NamedTuple):
    """One log dir of a broker (Kafka's ``LogDirDescription``)."""

    path: str
    error: int
    #: bytes of each partition described in it (future replicas left out)
    sizes: dict[TopicPartition, int]
    #: the file system's size and free space, v4+ (-1 before)
    total_bytes: int
    usable_bytes: int
    #: the cleanable dirty ratio of each compacted partition, where the broker tells it (this
    #: project's brokers, in a tagged field from v2; Kafka's never)
    dirty_ratios: dict[TopicPartition, float] = {}


def describe_log_dirs_request(version: int,
                              partitions: Mapping[str, Sequence[int]] | None) -> Any:
    """DescribeLogDirs for ``{topic: [partition, ...]}``; None asks for every partition."""
    topics = None if partitions is None else [
        _LOG_DIRS.DescribableLogDirTopic(topic=t, partitions=list(ps))
        for t, ps in partitions.items()]
    return make_request(ApiKey.DescribeLogDirs, version, topics=topics)


def parse_describe_log_dirs(response: Any) -> tuple[int, list[LogDirDescription]]:
    """(top-level error code, v3+; the log dirs)."""
    dirs = []
    for result in response.results:
        sizes = {TopicPartition(topic.name, part.partition_index): part.partition_size
                 for topic in result.topics for part in topic.partitions
                 if not part.is_future_key}
        ratios = {TopicPartition(topic.name, part.partition_index): part.dirty_ratio
                  for topic in result.topics for part in topic.partitions
                  if not part.is_future_key and getattr(part, "dirty_ratio", -1) >= 0}
        dirs.append(LogDirDescription(result.log_dir, result.error_code, sizes,
                                      getattr(result, "total_bytes", -1),
                                      getattr(result, "usable_bytes", -1), ratios))
    return getattr(response, "error_code", 0) or 0, dirs


def incremental_alter_configs_request(
        version: int, resource_type: int, name: str,
        changes: Sequence[tuple[str, int, str | None]], *, validate_only: bool = False) -> Any:
    """Kafka's IncrementalAlterConfigs: ``(name, ConfigOperation, value)`` per change; the
    resource's other overrides stay as they are."""
    resource = _INCREMENTAL.AlterConfigsResource
    return make_request(
        ApiKey.IncrementalAlterConfigs, version, validate_only=validate_only,
        resources=[resource(resource_type=resource_type, resource_name=name, configs=[
            resource.AlterableConfig(name=k, config_operation=int(op), value=v)
            for k, op, v in changes])])


def parse_incremental_alter_configs(response: Any) -> list[ResourceResult]:
    return [(r.resource_name, r.error_code, r.error_message) for r in response.responses]


def delete_records_request(version: int, offsets: Mapping[tuple[str, int], int], *,
                           timeout_ms: int) -> Any:
    """Delete every record below ``offset`` in each (topic, partition); -1 means the high
    watermark (everything)."""
    by_topic: dict[str, list[Any]] = {}
    part = _DELETE_RECORDS.DeleteRecordsTopic.DeleteRecordsPartition
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(part(partition_index=partition, offset=offset))
    return make_request(ApiKey.DeleteRecords, version, timeout_ms=timeout_ms, topics=[
        _DELETE_RECORDS.DeleteRecordsTopic(name=t, partitions=p) for t, p in by_topic.items()])


def parse_delete_records(response: Any) -> dict[tuple[str, int], tuple[int, int]]:
    """{(topic, partition): (error code, new log start offset)}"""
    return {(t.name, p.partition_index): (p.error_code, p.low_watermark)
            for t in response.topics for p in t.partitions}


def describe_cluster_request(version: int) -> Any:
    return make_request(ApiKey.DescribeCluster, version,
                        include_cluster_authorized_operations=False)


def parse_describe_cluster(response: Any) -> ClusterDescription:
    return ClusterDescription(response.error_code, response.error_message, response.cluster_id,
                              response.controller_id,
                              [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers])


__all__ = [
    "BROKER_RESOURCE",
    "CLIENT_METRICS_RESOURCE",
    "GROUP_RESOURCE",
    "TOPIC_RESOURCE",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigOperation",
    "ConfigSource",
    "LogDirDescription",
    "NewTopic",
    "alter_configs_request",
    "create_partitions_request",
    "create_topics_request",
    "delete_records_request",
    "delete_topics_request",
    "describe_cluster_request",
    "describe_configs_request",
    "describe_log_dirs_request",
    "incremental_alter_configs_request",
    "list_config_resources_request",
    "parse_alter_configs",
    "parse_create_partitions",
    "parse_create_topics",
    "parse_delete_records",
    "parse_delete_topics",
    "parse_describe_cluster",
    "parse_describe_configs",
    "parse_describe_log_dirs",
    "parse_incremental_alter_configs",
    "parse_list_config_resources",
    "source_name",
]
