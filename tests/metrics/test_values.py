"""The broker's plain counters and gauges, and what a scrape makes of them."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from trio_broker.broker.metrics import BrokerMetrics
from trio_broker.broker.metrics.values import Families


def _samples(metrics: BrokerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = metrics.expose().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_counters_and_gauges_are_scraped_under_their_kafka_names() -> None:
    metrics = BrokerMetrics()
    metrics.bytes_in.inc(100)
    metrics.bytes_in.inc()
    metrics.connections.inc(3)
    metrics.connections.dec()
    metrics.connections_closed.labels("idle").inc()
    metrics.connections_closed.labels("idle").inc(2)
    metrics.connections_refused.labels("per_ip").inc()
    depth = [7]
    metrics.request_queue_size.set_function(lambda: depth[0])
    samples = _samples(metrics)
    assert samples[("kafka_server_socket_server_metrics_incoming_byte_total", ())] == 101
    assert samples[("kafka_server_socket_server_metrics_connection_count", ())] == 2
    assert samples[("kafka_server_connections_closed_total", (("reason", "idle"),))] == 3
    assert samples[("kafka_server_connections_refused_total", (("reason", "per_ip"),))] == 1
    assert samples[("kafka_network_requestchannel_requestqueuesize", ())] == 7
    depth[0] = 0
    assert _samples(metrics)[("kafka_network_requestchannel_requestqueuesize", ())] == 0
    assert metrics.connections_closed.get("idle") == 3
    assert metrics.connections_closed.get("never") == 0
    assert metrics.bytes_in.get() == 101


def test_a_collector_added_after_the_first_scrape_is_scraped_too() -> None:
    from prometheus_client.core import GaugeMetricFamily

    metrics = BrokerMetrics()
    assert ("kafka_late_gauge", ()) not in _samples(metrics)
    metrics.add_collector(lambda: [GaugeMetricFamily("kafka_late_gauge", "Added late.", value=5)])
    assert _samples(metrics)[("kafka_late_gauge", ())] == 5


def test_labels_must_match_and_names_are_unique() -> None:
    families = Families()
    closed = families.counter("kafka_closed", "Closed.", ["reason"])
    with pytest.raises(ValueError, match="labels"):
        closed.inc()
    with pytest.raises(ValueError, match="labels"):
        closed.labels("a", "b")
    with pytest.raises(ValueError, match="duplicate"):
        families.gauge("kafka_closed", "Again.")
