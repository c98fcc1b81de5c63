"""The metrics clients pushed (KIP-714), as Prometheus series read at scrape time.

Why here: the broker is its own client-telemetry receiver (``apis/telemetry.py``), so what a
producer or consumer reports about itself (queue times, request latencies, retries) is scraped
from the broker's ``/metrics`` next to the broker's own series, labelled with what Kafka's
reporters add: ``client_id``, ``client_instance_id``, ``client_software_name``,
``client_software_version``, and the data point's own attributes (``node_id``, ``topic``...).

Also Kafka's own receiver metrics, under the JMX exporter's names:
``kafka_server_clientmetrics_instance_count`` (client instances the broker holds) and
``kafka_server_clientmetrics_dropped_series`` (new series refused once a client had as many as
it may keep). Expired instances are dropped at each scrape, before anything is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...server.state import BrokerState

if TYPE_CHECKING:
    from prometheus_client.core import Metric

CLIENT_LABELS = ("client_id", "client_instance_id", "client_software_name",
                 "client_software_version")


def client_metrics(state: BrokerState) -> Iterator[Metric]:
    from prometheus_client.core import GaugeMetricFamily, Metric

    telemetry = state.telemetry
    telemetry.expire(state.now_ms())
    families: dict[str, Metric] = {}
    dropped = 0
    for instance_id, instance in telemetry.instances.items():
        dropped += instance.dropped_series
        client = dict(zip(CLIENT_LABELS, (instance.client_id, str(instance_id),
                                          instance.software_name, instance.software_version),
                          strict=True))
        for (name, labels), (kind, value) in instance.series.items():
            if kind == "counter" and name.endswith("_total"):
                name = name[:-6]  # a counter's samples are named <family>_total
            family = families.get(name)
            if family is None:
                family = families[name] = Metric(name, "Pushed by clients (KIP-714).",
                                                 str(kind))
            sample = name + "_total" if kind == "counter" else name
            family.add_sample(sample, {**dict(labels), **client}, float(value))
    yield from (families[name] for name in sorted(families))
    count = GaugeMetricFamily("kafka_server_clientmetrics_instance_count",
                              "Client instances that asked for a telemetry subscription.")
    count.add_metric([], len(telemetry.instances))
    yield count
    refused = GaugeMetricFamily("kafka_server_clientmetrics_dropped_series",
                                "New series of pushed client metrics refused (per-client cap).")
    refused.add_metric([], dropped)
    yield refused


__all__ = ["CLIENT_LABELS", "client_metrics"]
