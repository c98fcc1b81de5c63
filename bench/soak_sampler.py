"""What the soak measures and how it judges: one sample a minute, a CSV, plots and a verdict.

A sample reads the broker process from the outside (``/proc/PID/status`` for RSS,
``/proc/PID/fd`` for open descriptors), scrapes its Prometheus endpoint for the event-loop stall
detector (``kafka_server_eventloopmetrics_lateness_seconds``, docs/benchmarks.md "Event-loop
stalls") and takes the produce latencies the clients saw since the previous sample.

The verdict compares a window at the start (right after the warm-up, while topics, groups,
segments and caches fill) with a window at the end:
- RSS: the last window's median within 5% of the first window's median;
- descriptors: besides segment files, the last window's median no higher than the first
  window's maximum (connection churn makes the count jitter by a few; a leak makes it climb
  past any early maximum), and no deleted log-dir file held open in the last window. Segment files
  are counted apart: each segment holds one descriptor (docs/storage.md, "Open files"), so
  their number climbs until retention deletes as many as roll, which is growth by design;
- produce p99 (acks=all): the last window's median per-sample p99 within 2x of the first's.
"""

from __future__ import annotations

import csv
import math
import os
import statistics
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import attrs
import httpx
from prometheus_client.parser import text_string_to_metric_families

LATENESS = "kafka_server_eventloopmetrics_lateness_seconds"

FIELDS = ("elapsed_s", "rss_mb", "fds", "segment_fds", "deleted_fds", "loop_p99_ms",
          "loop_stalls_100ms", "loop_max_bucket_ms",
          "produce_p99_all_ms", "produce_p99_one_ms", "compacted_kb", "log_mb", "load1",
          "produced_all", "produced_one", "consumed_ck", "consumed_kp", "txn_committed",
          "txn_aborted", "read_committed", "group_joins", "churn_connections", "http_gets",
          "errors")


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (``q`` in 0..1); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


class LatencyRecorder:
    """Latencies (seconds) recorded by client callbacks, taken out once per sample."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: list[float] = []

    def record(self, seconds: float) -> None:
        with self._lock:
            self._values.append(seconds)

    def take(self) -> list[float]:
        with self._lock:
            values, self._values = self._values, []
        return values


class Counters:
    """Thread-safe event counts of the workloads (cumulative)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] = self._counts.get(name, 0) + n

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


def read_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def count_fds(pid: int, log_dir: Path) -> tuple[int, int, int]:
    """(all open descriptors, segment files among them, files of the log dir held open after
    their deletion: a segment that retention or the cleaner removed but nobody closed)."""
    prefix = str(log_dir) + "/"
    total = segments = deleted = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:  # closed meanwhile
            continue
        total += 1
        segments += target.startswith(prefix) and target.endswith(".log")
        deleted += target.startswith(prefix) and target.endswith(" (deleted)")
    return total, segments, deleted


def dir_bytes(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def lateness_buckets(metrics_text: str) -> dict[float, float]:
    """The stall detector's cumulative bucket counts, by upper bound (seconds; inf for +Inf)."""
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        if family.name != LATENESS:
            continue
        for sample in family.samples:
            if sample.name == LATENESS + "_bucket":
                buckets[float(sample.labels["le"])] = sample.value
    if not buckets:
        raise RuntimeError(f"the metrics endpoint has no {LATENESS}")
    return buckets


def window_lateness(before: dict[float, float], after: dict[float, float]) -> tuple[float, int,
                                                                                       float]:
    """(p99 bound ms, wake-ups later than 100 ms, largest non-empty bound ms) between scrapes."""
    bounds = sorted(after)
    cumulative = [after[b] - before.get(b, 0.0) for b in bounds]
    total = cumulative[-1] if cumulative else 0.0
    if total <= 0:
        return math.nan, 0, math.nan
    p99 = next(b for b, c in zip(bounds, cumulative) if c >= 0.99 * total)
    at_100ms = next(c for b, c in zip(bounds, cumulative) if b >= 0.1)
    prev, largest = 0.0, bounds[0]
    for b, c in zip(bounds, cumulative):
        if c > prev:
            largest = b
        prev = c
    return p99 * 1000, int(total - at_100ms), largest * 1000


@attrs.define
class Sampler:
    """Takes one row a call: the broker process, its metrics, the clients' latencies."""

    pid: int
    metrics_url: str
    log_dir: Path
    compacted_dir: Path
    latency_all: LatencyRecorder
    latency_one: LatencyRecorder
    counters: Counters
    started: float = attrs.field(factory=time.monotonic)
    rows: list[dict[str, float]] = attrs.field(factory=list)
    _buckets: dict[float, float] = attrs.field(factory=dict)

    def sample(self) -> dict[str, float]:
        text = httpx.get(self.metrics_url, timeout=10).text
        buckets = lateness_buckets(text)
        loop_p99, stalls, loop_max = window_lateness(self._buckets, buckets)
        self._buckets = buckets
        fds, segment_fds, deleted_fds = count_fds(self.pid, self.log_dir)
        row: dict[str, float] = {
            "elapsed_s": round(time.monotonic() - self.started, 1),
            "rss_mb": round(read_rss_mb(self.pid), 1),
            "fds": fds, "segment_fds": segment_fds, "deleted_fds": deleted_fds,
            "loop_p99_ms": loop_p99, "loop_stalls_100ms": stalls, "loop_max_bucket_ms": loop_max,
            "produce_p99_all_ms": round(percentile(self.latency_all.take(), 0.99) * 1000, 1),
            "produce_p99_one_ms": round(percentile(self.latency_one.take(), 0.99) * 1000, 1),
            "compacted_kb": round(dir_bytes(self.compacted_dir) / 1024, 1),
            "log_mb": round(dir_bytes(self.log_dir) / 2**20, 1),
            "load1": os.getloadavg()[0],
        }
        counts = self.counters.snapshot()
        row.update({k: counts.get(k, 0) for k in FIELDS if k not in row})
        self.rows.append(row)
        return row


def write_csv(rows: Sequence[dict[str, float]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)


def read_csv(path: Path) -> list[dict[str, float]]:
    with path.open(newline="") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


@attrs.frozen
class Verdict:
    passed: bool
    lines: list[str]


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if not math.isnan(v)]


def judge(rows: Sequence[dict[str, float]], *, warmup_s: float, window_s: float) -> Verdict:
    """Pass or fail by the rules in the module docstring, with one line per rule."""
    if not rows:
        return Verdict(False, ["no samples"])
    end = rows[-1]["elapsed_s"]
    first = [r for r in rows if warmup_s <= r["elapsed_s"] < warmup_s + window_s]
    last = [r for r in rows if r["elapsed_s"] > end - window_s and r not in first]
    if not first or not last:
        return Verdict(False, [f"too short to judge: {len(rows)} samples, warm-up {warmup_s:.0f}"
                               f" s, windows {window_s:.0f} s"])
    lines, passed = [], True
    rss0 = statistics.median(r["rss_mb"] for r in first)
    rss1 = statistics.median(r["rss_mb"] for r in last)
    growth = rss1 / rss0 - 1
    ok = growth < 0.05
    passed &= ok
    lines.append(f"{'ok' if ok else 'FAIL'}: RSS median {rss0:.1f} MB -> {rss1:.1f} MB "
                 f"({growth:+.1%}; limit +5%)")
    # a row without the per-kind count (NaN: a CSV from before it was sampled) is left out
    fd0 = [r for r in first if not math.isnan(r["segment_fds"])]
    fd1 = [r for r in last if not math.isnan(r["segment_fds"])]
    if not fd0 or not fd1:
        passed = False
        lines.append("FAIL: descriptors: no per-kind count in a window")
    else:
        other_max0 = max(r["fds"] - r["segment_fds"] for r in fd0)
        other1 = statistics.median(r["fds"] - r["segment_fds"] for r in fd1)
        deleted = max(r["deleted_fds"] for r in fd1)
        ok = other1 <= other_max0 and deleted == 0
        passed &= ok
        seg0 = statistics.median(r["segment_fds"] for r in fd0)
        seg1 = statistics.median(r["segment_fds"] for r in fd1)
        lines.append(f"{'ok' if ok else 'FAIL'}: descriptors besides segment files: first "
                     f"window max {other_max0:.0f}, last window median {other1:.0f}; deleted "
                     f"log files held open: {deleted:.0f} (segment files, bounded by retention: "
                     f"median {seg0:.0f} -> {seg1:.0f})")
    p0 = _finite([r["produce_p99_all_ms"] for r in first])
    p1 = _finite([r["produce_p99_all_ms"] for r in last])
    if not p0 or not p1:
        passed = False
        lines.append("FAIL: produce p99: no acknowledged produce in a window")
    else:
        m0, m1 = statistics.median(p0), statistics.median(p1)
        ok = m1 <= 2 * m0
        passed &= ok
        lines.append(f"{'ok' if ok else 'FAIL'}: produce p99 (acks=all) median {m0:.1f} ms -> "
                     f"{m1:.1f} ms (limit 2x)")
    errors = rows[-1]["errors"]
    ok = errors == 0
    passed &= ok
    lines.append(f"{'ok' if ok else 'FAIL'}: client errors: {errors:.0f}")
    return Verdict(passed, lines)


def plot(rows: Sequence[dict[str, float]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [r["elapsed_s"] / 60 for r in rows]
    panels = (("rss_mb", "RSS (MB)"), ("fds", "open descriptors (all)"),
              ("segment_fds", "open segment files"),
              ("produce_p99_all_ms", "produce p99, acks=all (ms)"),
              ("produce_p99_one_ms", "produce p99, acks=1 (ms)"),
              ("loop_p99_ms", "event-loop lateness p99 bucket (ms)"),
              ("loop_stalls_100ms", "loop wake-ups > 100 ms / sample"),
              ("compacted_kb", "compacted partition on disk (KB)"),
              ("log_mb", "log dirs on disk (MB)"), ("load1", "machine load (1 min)"))
    fig, axes = plt.subplots(5, 2, figsize=(11, 13), sharex=True)
    for ax, (key, label) in zip(axes.flat, panels):
        ax.plot(minutes, [r[key] for r in rows], marker=".", linewidth=1)
        ax.set_title(label, fontsize=10)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("minutes")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
