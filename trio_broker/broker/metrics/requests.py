"""Kafka's request metrics: counts per API and version, six times per API, errors by name.

Why not prometheus-client's Histogram: its ``observe`` takes a lock and walks the buckets in
Python, six times per request, on the path every request takes (docs/benchmarks.md,
"Per-request cost"). Here a request costs one ``bisect`` per timing on plain lists (the handler
pool and
processors share one thread); quantiles are worked out only when the registry is scraped.

The names are the ones Prometheus' JMX exporter gives Kafka's MBeans with its Kafka rules
(``kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce`` ->
``kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"}`` and ``_count``;
``RequestsPerSec`` -> ``kafka_network_requestmetrics_requests_total{request,version}``;
``ErrorsPerSec`` -> ``kafka_network_requestmetrics_errors_total{request,error}``), so existing
dashboards and alerts read them. Kafka's histograms are biased to the last few minutes; the
quantiles here cover the last one to two minutes (two rotating windows of bucket counts), and
``_sum``/``_count`` cover the broker's life.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode

if TYPE_CHECKING:  # prometheus-client is imported by the first scrape
    from prometheus_client.core import Metric

_MS_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000,
               30000)
TIMINGS = ("RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseQueueTimeMs",
           "ResponseSendTimeMs", "TotalTimeMs")
#: the JMX exporter's quantile labels (Yammer's 50th..999th percentiles)
QUANTILES = (("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99),
             ("0.999", 0.999))
WINDOW_NS = 60_000_000_000


class RequestTimes:
    """Kafka's request timestamps (``time.monotonic_ns``), stamped as a request moves on.

    Set by the network layer: received (frame read), dequeued (a handler took it), API local
    done (the handler returned), API remote done (a parked request was answered), response
    dequeued (its processor took the response). 0 means "not reached": a request that was never
    parked has no remote time.
    """

    __slots__ = ("api_local_done_ns", "api_remote_done_ns", "api_version", "dequeued_ns",
                 "received_ns", "response_dequeued_ns")

    def __init__(self, api_version: int = -1) -> None:
        #: the request's version (RequestsPerSec is counted per API and version)
        self.api_version = api_version
        self.received_ns = time.monotonic_ns()
        self.dequeued_ns = 0
        self.api_local_done_ns = 0
        self.api_remote_done_ns = 0
        self.response_dequeued_ns = 0


class _ApiTimes:
    """One API's six timings: bucket counts for the life of the broker, and the counts as they
    were when the current and the previous window began (copied once a window, so a request
    only ever adds to one list per timing)."""

    __slots__ = ("at_current", "at_previous", "counts", "sums", "versions", "window")

    def __init__(self, window: int) -> None:
        n = len(RequestMetrics.BOUNDS) + 1
        self.counts = [[0] * n for _ in TIMINGS]
        self.sums = [0.0] * len(TIMINGS)
        self.at_current = [list(c) for c in self.counts]
        self.at_previous = self.at_current
        #: version -> requests
        self.versions: dict[int, int] = {}
        self.window = window

    def rotate(self, window: int) -> None:
        now = [list(c) for c in self.counts]
        # after a gap the windows in between saw nothing: they all begin with today's counts
        self.at_previous = self.at_current if window == self.window + 1 else now
        self.at_current = now
        self.window = window

    def recent(self, i: int, now_window: int) -> list[int]:
        """Bucket counts of timing ``i`` in the current and the previous window."""
        if self.window == now_window:
            since = self.at_previous[i]
        elif self.window == now_window - 1:
            since = self.at_current[i]
        else:
            return [0] * len(self.counts[i])
        return [a - b for a, b in zip(self.counts[i], since, strict=True)]


class RequestMetrics:
    """Kafka's RequestMetrics and ErrorsPerSec, cheap to record, expanded when scraped."""

    BOUNDS: ClassVar[tuple[float, ...]] = tuple(float(b) for b in _MS_BUCKETS)
    #: the bucket upper bounds, in ms (readers that compute their own rates and percentiles)
    BOUNDS_MS: ClassVar[tuple[float, ...]] = BOUNDS

    def __init__(self) -> None:
        self._times: dict[int, _ApiTimes] = {}
        #: (api key, error code) -> responses (or partitions) answered with it
        self._errors: dict[tuple[int, int], int] = {}

    def record(self, api_key: int, times_ms: tuple[float, ...], *, version: int = -1,
               now_ns: int | None = None) -> None:
        """``times_ms`` in the order of ``TIMINGS``."""
        window = (time.monotonic_ns() if now_ns is None else now_ns) // WINDOW_NS
        self._observe(api_key, window, version, *times_ms)

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
        self._observe(api_key, send_done_ns // WINDOW_NS, times.api_version,
                      (dequeued - received) / 1e6,  # RequestQueueTimeMs
                      (local - dequeued) / 1e6,  # LocalTimeMs
                      (remote - local) / 1e6,  # RemoteTimeMs
                      (response_dequeued - remote) / 1e6,  # ResponseQueueTimeMs
                      (send_done_ns - response_dequeued) / 1e6,  # ResponseSendTimeMs
                      (send_done_ns - received) / 1e6)  # TotalTimeMs

    def _observe(self, api_key: int, window: int, version: int, queue: float, local: float,
                 remote: float, response_queue: float, send: float, total: float) -> None:
        """Count one request of ``version`` and its six times (``TIMINGS``' order) in
        ``api_key``'s entry, rotated to ``window`` first; one function, written out rather
        than looped: every request passes here, and a loop's own steps (or a call) cost about
        as much as the counting (docs/benchmarks.md, "Per-request cost")."""
        entry = self._times.get(api_key)
        if entry is None:
            entry = self._times[api_key] = _ApiTimes(window)
        elif entry.window != window:
            entry.rotate(window)
        versions = entry.versions
        versions[version] = versions.get(version, 0) + 1
        bounds = self.BOUNDS
        (c_queue, c_local, c_remote, c_response_queue, c_send, c_total), sums = (
            entry.counts, entry.sums)
        c_queue[bisect_left(bounds, queue)] += 1
        sums[0] += queue
        c_local[bisect_left(bounds, local)] += 1
        sums[1] += local
        c_remote[bisect_left(bounds, remote)] += 1
        sums[2] += remote
        c_response_queue[bisect_left(bounds, response_queue)] += 1
        sums[3] += response_queue
        c_send[bisect_left(bounds, send)] += 1
        sums[4] += send
        c_total[bisect_left(bounds, total)] += 1
        sums[5] += total

    def count_errors(self, api_key: int, codes: list[int]) -> None:
        """The error codes of one response (NONE included, as Kafka counts them)."""
        errors = self._errors
        for code in codes:
            key = (api_key, code)
            errors[key] = errors.get(key, 0) + 1

    def quantiles(self, api_key: int, timing: str, now_ns: int | None = None,
                  ) -> dict[str, float]:
        """{quantile label: ms} of one API's timing over the last one to two minutes."""
        entry = self._times.get(api_key)
        if entry is None:
            return {label: float("nan") for label, _ in QUANTILES}
        now_window = (time.monotonic_ns() if now_ns is None else now_ns) // WINDOW_NS
        recent = entry.recent(TIMINGS.index(timing), now_window)
        return {label: quantile(self.BOUNDS, recent, q) for label, q in QUANTILES}

    def buckets(self, api_key: int, timing: str = "TotalTimeMs") -> list[int]:
        """Requests of one API per bucket of one timing so far (upper bounds ``BOUNDS_MS``,
        then +Inf), for readers that compute their own rates and percentiles."""
        entry = self._times.get(api_key)
        if entry is None:
            return [0] * (len(self.BOUNDS) + 1)
        return list(entry.counts[TIMINGS.index(timing)])

    def count(self, api_key: int) -> int:
        entry = self._times.get(api_key)
        return sum(entry.versions.values()) if entry else 0

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, Metric

        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "Requests by API and version (RequestsPerSec).",
                                       labels=["request", "version"])
        for api_key, entry in sorted(self._times.items()):
            for version, n in sorted(entry.versions.items()):
                requests.add_metric([api_name(api_key), str(version)], n)
        yield requests
        errors = CounterMetricFamily("kafka_network_requestmetrics_errors",
                                     "Error codes in responses, by API (ErrorsPerSec).",
                                     labels=["request", "error"])
        for (api_key, code), n in sorted(self._errors.items()):
            errors.add_metric([api_name(api_key), error_label(code)], n)
        yield errors
        now_ns = time.monotonic_ns()
        for i, name in enumerate(TIMINGS):
            family = Metric(f"kafka_network_requestmetrics_{name.lower()}",
                            f"Kafka's {name} by API (quantiles of the last minute or two).",
                            "summary")
            base = family.name
            for api_key, entry in sorted(self._times.items()):
                labels = {"request": api_name(api_key)}
                for label, value in self.quantiles(api_key, name, now_ns).items():
                    family.add_sample(base, {**labels, "quantile": label}, value)
                family.add_sample(f"{base}_count", labels, float(sum(entry.counts[i])))
                family.add_sample(f"{base}_sum", labels, entry.sums[i])
            yield family


def quantile(bounds: tuple[float, ...], counts: list[int], q: float) -> float:
    """Prometheus' ``histogram_quantile``: linear within the bucket holding rank q*n; NaN
    without observations (no request in the window), the top bound for the +Inf bucket."""
    total = sum(counts)
    if total == 0:
        return float("nan")
    rank = q * total
    seen = 0
    for b, n in enumerate(counts):
        if seen + n >= rank and n:
            if b == len(bounds):
                return bounds[-1]
            lower = 0.0 if b == 0 else bounds[b - 1]
            return lower + (bounds[b] - lower) * (rank - seen) / n
        seen += n
    return bounds[-1]


def api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"Unknown{api_key}"


def error_label(code: int) -> str:
    """Kafka's name of an error code (``NOT_LEADER_OR_FOLLOWER``), as ErrorsPerSec labels it."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


__all__ = ["QUANTILES", "TIMINGS", "RequestMetrics", "RequestTimes", "api_name", "error_label",
           "quantile"]
