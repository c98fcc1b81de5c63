"""What the broker holds, as metrics read at scrape time: partition logs, groups and lag.

Why at scrape time: sizes, offsets and lag change with every append and commit; reading them
when Prometheus asks costs one pass over the partitions and committed offsets per scrape and
nothing on the data path. Names, as the JMX exporter's Kafka rules make them:

- ``kafka_log_log_{size,logstartoffset,logendoffset,numlogsegments}{topic,partition}``
  (``kafka.log:type=Log,name=Size,topic=T,partition=P``);
- ``kafka_server_replicamanager_{partitioncount,leadercount,underreplicatedpartitions,
  offlinereplicacount}`` and ``kafka_controller_kafkacontroller_{offlinepartitionscount,
  activecontrollercount,globaltopiccount,globalpartitioncount}``; one node holds every replica,
  so under-replicated is always 0 and offline partitions are the ones whose log could not load;
- ``kafka_coordinator_group_groupmetadatamanager_{numgroups,numoffsets}`` and per state;
- consumer lag as kafka_exporter names it (Kafka itself has no broker-side lag metric):
  ``kafka_consumergroup_current_offset``, ``kafka_consumergroup_lag{consumergroup,topic,
  partition}`` (log end offset minus committed offset, at least 0: what ``trio-broker groups
  describe`` shows), ``kafka_consumergroup_lag_sum{consumergroup,topic}``,
  ``kafka_consumergroup_members``; ``kafka_topic_partition_{current,oldest}_offset``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...server.state import BrokerState
from .share import share_metrics
from .telemetry import client_metrics

if TYPE_CHECKING:  # prometheus-client is imported by the first scrape
    from prometheus_client.core import GaugeMetricFamily, Metric

_GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")


def _gauge(name: str, doc: str, *labels: str) -> GaugeMetricFamily:
    from prometheus_client.core import GaugeMetricFamily

    return GaugeMetricFamily(name, doc, labels=list(labels))


def log_metrics(state: BrokerState) -> Iterator[Metric]:
    """Per partition log: size, offsets, segments; replica and controller counts."""
    logs = sorted(state.logs.all_logs(), key=lambda log: log.name)
    size = _gauge("kafka_log_log_size", "Bytes in the partition's segments (Log Size).",
                  "topic", "partition")
    start = _gauge("kafka_log_log_logstartoffset", "The partition's log start offset.",
                   "topic", "partition")
    end = _gauge("kafka_log_log_logendoffset", "The partition's log end offset.",
                 "topic", "partition")
    segments = _gauge("kafka_log_log_numlogsegments", "Segments of the partition's log.",
                      "topic", "partition")
    current = _gauge("kafka_topic_partition_current_offset",
                     "The partition's high watermark (kafka_exporter's name).",
                     "topic", "partition")
    oldest = _gauge("kafka_topic_partition_oldest_offset",
                    "The partition's log start offset (kafka_exporter's name).",
                    "topic", "partition")
    for log in logs:
        if log.closed:
            continue
        topic, _, partition = log.name.rpartition("-")
        labels = [topic, partition]
        size.add_metric(labels, log.size_bytes)
        start.add_metric(labels, log.log_start_offset)
        end.add_metric(labels, log.log_end_offset)
        segments.add_metric(labels, log.num_segments)
        current.add_metric(labels, log.high_watermark)
        oldest.add_metric(labels, log.log_start_offset)
    yield from (size, start, end, segments, current, oldest)

    topics = state.logs.topics()
    state.metrics.topics.forget(topics)
    offline = len(state.logs.offline_partitions)
    partitions = sum(topics.values())
    for name, doc, value in (
            ("kafka_server_replicamanager_partitioncount", "Partitions on this broker.",
             partitions),
            ("kafka_server_replicamanager_leadercount", "Partitions this broker leads.",
             partitions - offline),
            ("kafka_server_replicamanager_underreplicatedpartitions",
             "Partitions with fewer in-sync replicas than replicas (one node: 0).", 0),
            ("kafka_server_replicamanager_offlinereplicacount",
             "Replicas whose log could not be loaded.", offline),
            ("kafka_controller_kafkacontroller_offlinepartitionscount",
             "Partitions without a leader (their log could not be loaded).", offline),
            ("kafka_controller_kafkacontroller_activecontrollercount",
             "1: this node is the controller.", 1),
            ("kafka_controller_kafkacontroller_globaltopiccount", "Topics in the cluster.",
             len(topics)),
            ("kafka_controller_kafkacontroller_globalpartitioncount",
             "Partitions in the cluster.", partitions)):
        family = _gauge(name, doc)
        family.add_metric([], value)
        yield family


def group_metrics(state: BrokerState) -> Iterator[Metric]:
    """Groups by state, committed offsets, and each group's lag per partition."""
    coordinator = state.groups
    if not coordinator.loaded:
        return
    by_state = dict.fromkeys(_GROUP_STATES, 0)
    members = _gauge("kafka_consumergroup_members", "Members of the group.", "consumergroup")
    committed = _gauge("kafka_consumergroup_current_offset",
                       "The group's committed offset of the partition.",
                       "consumergroup", "topic", "partition")
    lag = _gauge("kafka_consumergroup_lag",
                 "Log end offset minus the group's committed offset (at least 0).",
                 "consumergroup", "topic", "partition")
    lag_sum = _gauge("kafka_consumergroup_lag_sum", "The group's lag summed over the topic.",
                     "consumergroup", "topic")
    offsets = 0
    for group_id in sorted(listed.group_id for listed in coordinator.list_groups()):
        summary = coordinator.describe_group(group_id)
        if summary is not None:
            name = str(summary.state)
            by_state[name] = by_state.get(name, 0) + 1
            members.add_metric([group_id], len(summary.members))
        code, found = coordinator.fetch_offsets(group_id, None)
        if code:
            continue
        sums: dict[str, int] = {}
        for (topic, partition), entry in found:
            if entry is None or entry.offset < 0:
                continue
            offsets += 1
            labels = [group_id, topic, str(partition)]
            committed.add_metric(labels, entry.offset)
            log = state.logs.get_log(topic, partition)
            if log is None or log.closed:
                continue
            behind = max(log.high_watermark - entry.offset, 0)
            lag.add_metric(labels, behind)
            sums[topic] = sums.get(topic, 0) + behind
        for topic, total in sorted(sums.items()):
            lag_sum.add_metric([group_id, topic], total)
    yield from (members, committed, lag, lag_sum)
    numgroups = _gauge("kafka_coordinator_group_groupmetadatamanager_numgroups",
                       "Consumer groups.")
    numgroups.add_metric([], sum(by_state.values()))
    yield numgroups
    numoffsets = _gauge("kafka_coordinator_group_groupmetadatamanager_numoffsets",
                        "Committed offsets held.")
    numoffsets.add_metric([], offsets)
    yield numoffsets
    for group_state, count in by_state.items():
        family = _gauge(f"kafka_coordinator_group_groupmetadatamanager_numgroups"
                        f"{group_state.lower()}", f"Consumer groups in state {group_state}.")
        family.add_metric([], count)
        yield family


def register(state: BrokerState) -> None:
    """Add the scrape-time collectors of ``state`` to its metrics."""
    state.metrics.add_collector(lambda: log_metrics(state))
    state.metrics.add_collector(lambda: group_metrics(state))
    state.metrics.add_collector(lambda: share_metrics(state))
    state.metrics.add_collector(lambda: client_metrics(state))


__all__ = ["group_metrics", "log_metrics", "register"]
