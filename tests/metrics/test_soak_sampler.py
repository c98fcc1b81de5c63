"""The soak's sampler and verdict (bench/soak.py, ``make soak``) on a real broker: one sample
reads this process's RSS and descriptors, the broker's stall detector through its metrics
listener and a real producer's latencies; the verdict passes a flat run and fails each kind of
drift. The hour itself is ``make soak``, never the suite."""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from bench.soak_sampler import (
    FIELDS,
    Counters,
    LatencyRecorder,
    Sampler,
    judge,
    plot,
    write_csv,
)
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker


@pytest.fixture
def broker(tmp_path: Path):
    b = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                          "metrics_listener": "http://127.0.0.1:0"}).start()
    yield b
    b.stop()


def test_a_sample_reads_the_process_the_stall_detector_and_the_clients(broker, tmp_path):
    host, port = broker.broker.metrics_address
    latency, counters = LatencyRecorder(), Counters()
    sampler = Sampler(os.getpid(), f"http://{host}:{port}/metrics", tmp_path / "data",
                      tmp_path / "data" / "soak-0", latency, LatencyRecorder(), counters)
    sampler.sample()
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all"})

    def delivered(t0: float, err: object, _msg: object) -> None:
        assert err is None
        latency.record(time.monotonic() - t0)

    for i in range(20):
        producer.produce("soak", str(i).encode(),
                         on_delivery=functools.partial(delivered, time.monotonic()))
    assert producer.flush(10) == 0
    broker.call(time.sleep, 0.3)  # holds the broker's event loop
    time.sleep(0.05)
    row = sampler.sample()
    # this process is the broker's; the client's threads may open or close one meanwhile
    assert abs(row["fds"] - len(os.listdir("/proc/self/fd"))) <= 2
    assert row["segment_fds"] >= 1  # soak-0's active segment
    assert row["deleted_fds"] == 0
    assert row["rss_mb"] > 10
    assert row["loop_stalls_100ms"] >= 1
    assert row["loop_max_bucket_ms"] >= 250
    assert 0 < row["produce_p99_all_ms"] < 10_000
    assert row["compacted_kb"] > 0
    assert row["log_mb"] >= 0
    write_csv(sampler.rows, tmp_path / "soak.csv")
    assert (tmp_path / "soak.csv").read_text().splitlines()[0] == ",".join(FIELDS)


def _rows(rss, fds, p99, errors=0, segments=None, deleted=0):
    segments = segments or [10] * len(rss)
    return [{"elapsed_s": 60.0 * (i + 1), "rss_mb": r, "fds": f + n, "segment_fds": n,
             "deleted_fds": deleted, "produce_p99_all_ms": p, "errors": errors}
            for i, (r, f, p, n) in enumerate(zip(rss, fds, p99, segments))]


def test_the_verdict_passes_a_flat_run_and_fails_each_drift(tmp_path):
    flat = _rows([50] * 12, [40, 44, 41] * 4, [20, 30] * 6)
    assert judge(flat, warmup_s=60, window_s=180).passed
    grown = _rows([50] * 6 + [53] * 6, [40] * 12, [20] * 12)
    verdict = judge(grown, warmup_s=60, window_s=180)
    assert not verdict.passed
    assert verdict.lines[0].startswith("FAIL: RSS")
    leaking = _rows([50] * 12, list(range(40, 52)), [20] * 12)
    assert not judge(leaking, warmup_s=60, window_s=180).passed
    slower = _rows([50] * 12, [40] * 12, [20] * 6 + [45] * 6)
    assert not judge(slower, warmup_s=60, window_s=180).passed
    assert not judge(_rows([50] * 12, [40] * 12, [20] * 12, errors=1), warmup_s=60,
                     window_s=180).passed
    assert not judge(flat[:3], warmup_s=60, window_s=180).passed  # too short to judge
    # segments held open up to the retention limit: growth by design, not a leak
    filling = _rows([50] * 12, [40] * 12, [20] * 12, segments=list(range(10, 22)))
    assert judge(filling, warmup_s=60, window_s=180).passed
    held_deleted = _rows([50] * 12, [40] * 12, [20] * 12, deleted=1)
    assert not judge(held_deleted, warmup_s=60, window_s=180).passed
    full = [{**r, **{k: 0 for k in FIELDS if k not in r}} for r in flat]
    plot(full, tmp_path / "soak.png", "test")
    assert (tmp_path / "soak.png").read_bytes()[:4] == b"\x89PNG"
