"""Live traffic for the overview's charts: rates and latency percentiles, sampled once a second
from the broker's own metrics objects.

Why a sampler task and not a computation per poll: every open overview page polls once a
second, and rates are differences between two readings; one reading a second, kept in a short
ring, gives every viewer the same series at the cost of a few dictionary reads per second,
however many pages are open. Percentiles are estimated from the request-time histograms' bucket
counts over each second, by linear interpolation inside the bucket (Prometheus'
``histogram_quantile``), so they are as fine as the buckets (0.1, 0.25, 0.5, 1, 2.5, 5 ms, ...).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Sequence
from typing import Any

import trio

from ...protocol.api_keys import ApiKey
from ..metrics import BrokerMetrics, RequestMetrics

#: seconds of history the charts show
HISTORY_S = 60


def quantile(q: float, bounds: Sequence[float], counts: Sequence[int]) -> float | None:
    """The ``q`` quantile of a histogram (per-bucket ``counts``, last one +Inf); None if empty.

    Linear inside the bucket, as Prometheus' ``histogram_quantile``; a quantile that falls in
    the +Inf bucket is reported as the largest finite bound.
    """
    total = sum(counts)
    if total <= 0:
        return None
    rank = q * total
    seen = 0
    for i, n in enumerate(counts):
        if n and seen + n >= rank:
            if i >= len(bounds):
                return bounds[-1]
            low = bounds[i - 1] if i else 0.0
            return low + (bounds[i] - low) * (rank - seen) / n
        seen += n
    return bounds[-1]


class _Reading:
    """Cumulative counters at one moment."""

    __slots__ = ("at", "bytes_in", "bytes_out", "fetch", "fetch_buckets", "produce",
                 "produce_buckets")

    def __init__(self, metrics: BrokerMetrics) -> None:
        requests: RequestMetrics = metrics.request_metrics
        self.at = time.monotonic()
        self.produce = requests.count(ApiKey.Produce)
        self.fetch = requests.count(ApiKey.Fetch)
        self.produce_buckets = requests.buckets(ApiKey.Produce)
        self.fetch_buckets = requests.buckets(ApiKey.Fetch)
        self.bytes_in = metrics.bytes_in.get()
        self.bytes_out = metrics.bytes_out.get()


def _point(before: _Reading, after: _Reading) -> dict[str, Any]:
    """One second of the charts: rates per second, Produce and Fetch p50/p99 in ms."""
    span = max(after.at - before.at, 1e-6)
    bounds = RequestMetrics.BOUNDS_MS
    produce = [b - a for a, b in zip(before.produce_buckets, after.produce_buckets, strict=True)]
    fetch = [b - a for a, b in zip(before.fetch_buckets, after.fetch_buckets, strict=True)]
    return {
        "t": round(time.time(), 3),
        "produce_rate": (after.produce - before.produce) / span,
        "fetch_rate": (after.fetch - before.fetch) / span,
        "bytes_in_rate": (after.bytes_in - before.bytes_in) / span,
        "bytes_out_rate": (after.bytes_out - before.bytes_out) / span,
        "produce_p50": quantile(0.5, bounds, produce),
        "produce_p99": quantile(0.99, bounds, produce),
        "fetch_p50": quantile(0.5, bounds, fetch),
        "fetch_p99": quantile(0.99, bounds, fetch),
    }


class LiveSampler:
    """Keeps the last ``HISTORY_S`` one-second points of the broker's traffic."""

    def __init__(self, metrics: BrokerMetrics, interval_s: float = 1.0) -> None:
        self._metrics = metrics
        self.interval_s = interval_s
        self.points: collections.deque[dict[str, Any]] = collections.deque(maxlen=HISTORY_S)
        self._last = _Reading(metrics)

    def sample(self) -> None:
        reading = _Reading(self._metrics)
        self.points.append(_point(self._last, reading))
        self._last = reading

    async def run(self) -> None:
        next_at = trio.current_time()
        while True:
            next_at += self.interval_s
            await trio.sleep_until(next_at)
            self.sample()

    def snapshot(self) -> dict[str, Any]:
        """What ``/api/live`` answers: the points and the current connection count."""
        return {"interval_s": self.interval_s, "points": list(self.points),
                "connections": int(self._metrics.connections.get())}
