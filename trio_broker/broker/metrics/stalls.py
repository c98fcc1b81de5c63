"""The event loop's stall detector: how late a sleeping task wakes, GC pauses, blocking work.

Why: every connection, handler and timer of the broker shares one Trio loop, so anything that
holds it (an fsync, a big encode, a garbage collection, another thread holding the GIL) delays
every client at once. A task that asks to wake every ``interval`` and records how late it woke
(Trio's clock) measures exactly that delay, whatever its cause; ``gc.callbacks`` times the
collector's pauses; ``on_loop(kind)`` times work known to run on the loop. The figures are
histograms and counters under the JMX exporter's naming of a Kafka-style MBean
(``kafka.server:type=EventLoopMetrics``): ``kafka_server_eventloopmetrics_lateness_seconds``,
``kafka_server_eventloopmetrics_gcpause_seconds`` and
``kafka_server_eventloopmetrics_blocking_seconds_total{operation}`` (with ``_count``).

The task wakes every 5 ms while clients send anything and every 100 ms once they have been
quiet for a second: waking 200 times a second keeps an idle broker busy for nothing
(docs/benchmarks.md, "Event-loop stalls"), and a loop nobody is waiting on delays nobody. A
stall of 100 ms or more is seen either way; a shorter one
while quiet is seen with a chance of its length in 100 ms.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:  # prometheus-client is imported by the first scrape
    from prometheus_client.core import HistogramMetricFamily, Metric

#: upper bounds of the buckets, seconds (Prometheus ``le``); +Inf is implied
BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
#: how often the detector asks to wake (Trio rounds timeouts up to the millisecond)
DEFAULT_INTERVAL_S = 0.005
#: ... once the broker has been quiet (its ``activity`` unchanged) for ``QUIET_AFTER_S``
QUIET_INTERVAL_S = 0.1
QUIET_AFTER_S = 1.0


def _virtual_clock() -> bool:
    testing = sys.modules.get("trio.testing")  # imported by whoever made a MockClock
    return testing is not None and isinstance(trio.lowlevel.current_clock(), testing.MockClock)


class Histogram:
    """Bucket counts, sum, count and the largest value seen, in plain lists (one ``bisect``)."""

    __slots__ = ("count", "counts", "max", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(BOUNDS) + 1)
        self.sum = 0.0
        self.count = 0
        self.max = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(BOUNDS, seconds)] += 1
        self.sum += seconds
        self.count += 1
        if seconds > self.max:
            self.max = seconds

    def over(self, seconds: float) -> int:
        """How many observations exceeded ``seconds`` (rounded to the bucket bounds)."""
        return sum(self.counts[bisect_left(BOUNDS, seconds) + 1:])

    def family(self, name: str, doc: str) -> HistogramMetricFamily:
        from prometheus_client.core import HistogramMetricFamily

        buckets: list[tuple[str, float]] = []
        total = 0
        for bound, n in zip((*BOUNDS, float("inf")), self.counts, strict=True):
            total += n
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), total))
        return HistogramMetricFamily(name, doc, buckets=buckets, sum_value=self.sum)


class LoopStallMeter:
    """Measures what holds the broker's event loop; read at scrape time (``collect``)."""

    def __init__(self, interval_s: float = DEFAULT_INTERVAL_S, *,
                 activity: Callable[[], float] | None = None,
                 quiet_interval_s: float = QUIET_INTERVAL_S,
                 quiet_after_s: float = QUIET_AFTER_S) -> None:
        self.interval_s = interval_s
        #: a number that changes whenever clients send anything (bytes received); None: the
        #: detector always wakes every ``interval_s``
        self.activity = activity
        self.quiet_interval_s = quiet_interval_s
        self.quiet_after_s = quiet_after_s
        #: the interval the detector sleeps now (``interval_s``, or ``quiet_interval_s``)
        self.current_interval_s = interval_s
        #: how late the detector woke, seconds
        self.lateness = Histogram()
        #: garbage collections, seconds each (any thread: they hold the GIL)
        self.gc_pauses = Histogram()
        #: operation -> [times, seconds] of work timed by ``on_loop``
        self.blocking: dict[str, list[float]] = {}
        self._gc_started = 0.0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
                  ) -> None:
        """Wake every ``interval_s`` (``quiet_interval_s`` while ``activity`` stays the same)
        and record how late; times GC pauses while it runs.

        Under a virtual clock (``trio.testing.MockClock``, as tests use) lateness means nothing,
        and a task waking every few virtual milliseconds would make an autojumping clock crawl
        through every deadline: then only GC pauses are timed."""
        gc.callbacks.append(self._on_gc)
        try:
            task_status.started()
            if _virtual_clock():
                await trio.sleep_forever()
            clock = trio.current_time
            observe = self.lateness.observe
            activity = self.activity
            seen = activity() if activity is not None else None
            changed_at = clock()
            while True:
                due = clock() + self.current_interval_s
                await trio.sleep_until(due)
                now = clock()
                observe(max(0.0, now - due))
                if activity is None:
                    continue
                current = activity()
                if current != seen:
                    seen, changed_at = current, now
                    self.current_interval_s = self.interval_s
                elif now - changed_at >= self.quiet_after_s:
                    self.current_interval_s = self.quiet_interval_s
        finally:
            with contextlib.suppress(ValueError):
                gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self._gc_started:
            self.gc_pauses.observe(time.perf_counter() - self._gc_started)
            self._gc_started = 0.0

    @contextlib.contextmanager
    def on_loop(self, operation: str) -> Iterator[None]:
        """Time blocking work that runs on the event loop (counted per ``operation``)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            entry = self.blocking.get(operation)
            if entry is None:
                entry = self.blocking[operation] = [0, 0.0]
            entry[0] += 1
            entry[1] += time.perf_counter() - start

    def collect(self) -> Iterator[Metric]:
        yield self.lateness.family(
            "kafka_server_eventloopmetrics_lateness_seconds",
            "How late a task asking to wake every few milliseconds woke: the time the event "
            "loop was held by other work.")
        yield self.gc_pauses.family(
            "kafka_server_eventloopmetrics_gcpause_seconds",
            "Garbage collection pauses (they hold the interpreter, so the event loop too).")
        from prometheus_client.core import CounterMetricFamily

        seconds = CounterMetricFamily(
            "kafka_server_eventloopmetrics_blocking_seconds",
            "Seconds of blocking work run on the event loop, by operation.",
            labels=["operation"])
        count = CounterMetricFamily(
            "kafka_server_eventloopmetrics_blocking",
            "Blocking operations run on the event loop, by operation.", labels=["operation"])
        for operation, (n, s) in sorted(self.blocking.items()):
            seconds.add_metric([operation], s)
            count.add_metric([operation], n)
        yield seconds
        yield count


__all__ = ["BOUNDS", "DEFAULT_INTERVAL_S", "QUIET_AFTER_S", "QUIET_INTERVAL_S", "Histogram",
           "LoopStallMeter"]
