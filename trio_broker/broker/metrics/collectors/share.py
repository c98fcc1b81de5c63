"""Share groups (KIP-932) as metrics read at scrape time, under the names the JMX exporter makes
of Kafka's:

- ``kafka.server:type=group-coordinator-metrics,name=group-count,protocol=share`` ->
  ``kafka_server_group_coordinator_metrics_group_count{protocol="share"}``;
- ``...,name=share-group-count,state=S`` ->
  ``kafka_server_group_coordinator_metrics_share_group_count{state}`` (``empty``, ``stable``;
  a deleted group is gone, so ``dead`` is always 0);
- ``kafka.server:type=SharePartitionMetrics,name=InFlightMessageCount,group=G,topic=T,
  partition=P`` -> ``kafka_server_sharepartitionmetrics_inflightmessagecount{group,topic,
  partition}``: records acquired or waiting to be acquired again between the share-partition's
  start and end offsets;
- ``...,name=AcquisitionLockTimeoutPerSec,group=G,topic=T,partition=P`` ->
  ``kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total{group,topic,partition}``:
  records whose acquisition lock ended before they were acknowledged. Locks end lazily here, as
  the share-partition is next fetched from or acknowledged (a waiting ShareFetch wakes at the
  first lock's end), so a partition nobody touches counts its timeouts later than Kafka's timer.

The acknowledgements themselves are counted as they happen (``BrokerMetrics``:
``kafka_server_sharegroupmetrics_recordacknowledgements_total{acktype}``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...server.state import BrokerState

if TYPE_CHECKING:  # prometheus-client is imported by the first scrape
    from prometheus_client.core import Metric

_STATES = ("empty", "stable", "dead")


def share_metrics(state: BrokerState) -> Iterator[Metric]:
    """Share groups by state, and each share-partition's records in flight."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    # the share coordinator is made at its first use, and this scrape is one
    from ...coordinator.share import RecordState

    in_flight_states = (RecordState.AVAILABLE, RecordState.ACQUIRED)
    shares = state.shares
    by_state = dict.fromkeys(_STATES, 0)
    for group in shares.groups.values():
        by_state[group.state.lower()] = by_state.get(group.state.lower(), 0) + 1
    count = GaugeMetricFamily("kafka_server_group_coordinator_metrics_group_count",
                              "Groups by protocol (group-count).", labels=["protocol"])
    count.add_metric(["share"], sum(by_state.values()))
    yield count
    per_state = GaugeMetricFamily("kafka_server_group_coordinator_metrics_share_group_count",
                                  "Share groups by state (share-group-count).",
                                  labels=["state"])
    for name, value in by_state.items():
        per_state.add_metric([name], value)
    yield per_state
    in_flight = GaugeMetricFamily(
        "kafka_server_sharepartitionmetrics_inflightmessagecount",
        "Records acquired or available again in the share-partition (InFlightMessageCount).",
        labels=["group", "topic", "partition"])
    timeouts = CounterMetricFamily(
        "kafka_server_sharepartitionmetrics_acquisitionlocktimeout",
        "Records whose acquisition lock timed out (AcquisitionLockTimeoutPerSec).",
        labels=["group", "topic", "partition"])
    for (group_id, topic_id, partition), sp in sorted(shares.partitions.items(), key=str):
        topic = state.logs.topic_name(topic_id)
        if topic is None:
            continue
        labels = [group_id, topic, str(partition)]
        in_flight.add_metric(labels, sum(1 for r in sp.in_flight.values()
                                         if r.state in in_flight_states))
        timeouts.add_metric(labels, sp.lock_timeouts)
    yield in_flight
    yield timeouts


__all__ = ["share_metrics"]
