"""Broker metrics with Kafka's names, exposed in Prometheus text format.

Why a registry per broker: tests run many brokers in one process; each gets its own
``CollectorRegistry`` so nothing leaks between them. Label children are cached per API so the
per-request cost is a few dictionary lookups and histogram observations.
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from .protocol.api_keys import ApiKey

_MS_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000,
               30000)
TIMINGS = ("RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseQueueTimeMs",
           "ResponseSendTimeMs", "TotalTimeMs")


def api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"Unknown{api_key}"


class IdleMeter:
    """Fraction of time a pool of tasks spent waiting for work, between two reads."""

    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers)
        self._idle_ns = 0
        self._last_read_idle = 0
        self._last_read_at = time.monotonic_ns()

    def add_idle(self, ns: int) -> None:
        self._idle_ns += ns

    def percent(self) -> float:
        now = time.monotonic_ns()
        elapsed = (now - self._last_read_at) * self.workers
        idle = self._idle_ns - self._last_read_idle
        self._last_read_at, self._last_read_idle = now, self._idle_ns
        if elapsed <= 0:
            return 1.0
        return max(0.0, min(1.0, idle / elapsed))


class BrokerMetrics:
    """The broker's counters, gauges and request-time histograms."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("kafka_network_requests", "Requests by API.", ["request"],
                                registry=r)
        self.errors = Counter("kafka_network_errors", "Response error codes by API.",
                              ["request", "error"], registry=r)
        self.timings = {
            name: Histogram(f"kafka_network_request_metrics_{_snake(name)}",
                            f"Kafka {name} by API.", ["request"], buckets=_MS_BUCKETS,
                            registry=r)
            for name in TIMINGS
        }
        self.connections = Gauge("kafka_server_connections", "Open connections.", registry=r)
        self.connections_closed = Counter("kafka_server_connections_closed",
                                          "Connections closed, by reason.", ["reason"],
                                          registry=r)
        self.connections_refused = Counter("kafka_server_connections_refused",
                                           "Connections refused by a quota.", ["reason"],
                                           registry=r)
        self.bytes_in = Counter("kafka_server_bytes_in", "Bytes received.", registry=r)
        self.bytes_out = Counter("kafka_server_bytes_out", "Bytes sent.", registry=r)
        self.request_queue_size = Gauge("kafka_network_request_queue_size",
                                        "Requests waiting for a handler.", registry=r)
        self.response_queue_size = Gauge("kafka_network_response_queue_size",
                                         "Responses waiting for their processor.", registry=r)
        self.handler_idle = IdleMeter(1)
        self.processor_idle = IdleMeter(1)
        Gauge("kafka_server_request_handler_avg_idle_percent",
              "RequestHandlerAvgIdlePercent (0..1).", registry=r).set_function(
            lambda: self.handler_idle.percent())
        Gauge("kafka_network_processor_avg_idle_percent",
              "NetworkProcessorAvgIdlePercent (0..1).", registry=r).set_function(
            lambda: self.processor_idle.percent())
        self._children: dict[int, tuple] = {}

    def for_api(self, api_key: int) -> tuple:
        """(requests counter, {timing: histogram child}) for one API, cached."""
        children = self._children.get(api_key)
        if children is None:
            name = api_name(api_key)
            children = (self.requests.labels(name),
                        {t: h.labels(name) for t, h in self.timings.items()})
            self._children[api_key] = children
        return children

    def count_error(self, api_key: int, error: int) -> None:
        self.errors.labels(api_name(api_key), str(error)).inc()

    def expose(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)


def _snake(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i:
            out.append("_")
        out.append(ch.lower())
    return "".join(out)
