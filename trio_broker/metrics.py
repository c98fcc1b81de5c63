"""Broker metrics with Kafka's names, exposed in Prometheus text format.

Why a registry per broker: tests run many brokers in one process; each gets its own
``CollectorRegistry`` so nothing leaks between them. Label children are cached per API so the
per-request cost is a few dictionary lookups and histogram observations.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import generate_latest

from .protocol.api_keys import ApiKey

_MS_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000,
               30000)
TIMINGS = ("RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseQueueTimeMs",
           "ResponseSendTimeMs", "TotalTimeMs")


class RequestTimes:
    """Kafka's request timestamps (``time.monotonic_ns``), stamped as a request moves on.

    Set by the network layer: received (frame read), dequeued (a handler took it), API local
    done (the handler returned), API remote done (a parked request was answered), response
    dequeued (its processor took the response). 0 means "not reached": a request that was never
    parked has no remote time.
    """

    __slots__ = ("api_local_done_ns", "api_remote_done_ns", "dequeued_ns", "received_ns",
                 "response_dequeued_ns")

    def __init__(self) -> None:
        self.received_ns = time.monotonic_ns()
        self.dequeued_ns = 0
        self.api_local_done_ns = 0
        self.api_remote_done_ns = 0
        self.response_dequeued_ns = 0


class RequestMetrics:
    """Kafka's RequestMetrics: a request counter and six time histograms per API.

    Why not prometheus-client's Histogram: its ``observe`` takes a lock and walks the buckets in
    Python, six times per request, which measured about a third of the broker's CPU per small
    request. Here a request costs one ``bisect`` per timing on plain lists (the handler pool and
    processors share one thread); the registry reads the totals only when scraped.
    """

    _BOUNDS = tuple(float(b) for b in _MS_BUCKETS)
    #: the histograms' bucket upper bounds, in ms
    BOUNDS_MS = _BOUNDS

    def __init__(self) -> None:
        # api key -> ([bucket counts per timing], [sums per timing], [request count])
        self._by_api: dict[int, tuple[list[list[int]], list[float], list[int]]] = {}

    def record(self, api_key: int, times_ms: tuple[float, ...]) -> None:
        """``times_ms`` in the order of ``TIMINGS``."""
        entry = self._by_api.get(api_key)
        if entry is None:
            entry = self._by_api[api_key] = (
                [[0] * (len(self._BOUNDS) + 1) for _ in TIMINGS], [0.0] * len(TIMINGS), [0])
        counts, sums, total = entry
        total[0] += 1
        bounds = self._BOUNDS
        for i, value in enumerate(times_ms):
            counts[i][bisect_left(bounds, value)] += 1
            sums[i] += value

    def record_timings(self, api_key: int, times: RequestTimes, send_done_ns: int) -> None:
        """Kafka's six request times, in ms, from ``times`` and the end of the send.

        Recorded even when the client left before its response (``send_done_ns`` is then the
        moment the response was dropped): a stage never reached takes the previous one's stamp.
        """
        received = times.received_ns
        dequeued = times.dequeued_ns or send_done_ns
        local = times.api_local_done_ns or dequeued
        remote = times.api_remote_done_ns or local
        response_dequeued = times.response_dequeued_ns or remote
        self.record(api_key, (
            (dequeued - received) / 1e6,  # RequestQueueTimeMs
            (local - dequeued) / 1e6,  # LocalTimeMs
            (remote - local) / 1e6,  # RemoteTimeMs
            (response_dequeued - remote) / 1e6,  # ResponseQueueTimeMs
            (send_done_ns - response_dequeued) / 1e6,  # ResponseSendTimeMs
            (send_done_ns - received) / 1e6,  # TotalTimeMs
        ))

    def count(self, api_key: int) -> int:
        entry = self._by_api.get(api_key)
        return entry[2][0] if entry else 0

    def buckets(self, api_key: int, timing: str = "TotalTimeMs") -> list[int]:
        """Requests of one API per bucket of one timing so far (upper bounds ``BOUNDS_MS``, then
        +Inf), for readers that compute their own rates and percentiles (the web console)."""
        entry = self._by_api.get(api_key)
        if entry is None:
            return [0] * (len(self._BOUNDS) + 1)
        return list(entry[0][TIMINGS.index(timing)])

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("kafka_network_requests", "Requests by API.",
                                       labels=["request"])
        families = [HistogramMetricFamily(f"kafka_network_request_metrics_{_snake(name)}",
                                          f"Kafka {name} by API.", labels=["request"])
                    for name in TIMINGS]
        for api_key, (counts, sums, total) in sorted(self._by_api.items()):
            label = [api_name(api_key)]
            requests.add_metric(label, total[0])
            for family, bucket_counts, total_ms in zip(families, counts, sums, strict=True):
                cumulative, buckets = 0, []
                for bound, n in zip(self._BOUNDS, bucket_counts, strict=False):
                    cumulative += n
                    buckets.append((repr(bound), cumulative))
                buckets.append(("+Inf", cumulative + bucket_counts[-1]))
                family.add_metric(label, buckets, total_ms)
        yield requests
        yield from families


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
        self.request_metrics = RequestMetrics()
        r.register(self.request_metrics)
        self.errors = Counter("kafka_network_errors", "Response error codes by API.",
                              ["request", "error"], registry=r)
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
