"""Start-up of an embedded test cluster: ``open_cluster(brokers=N)`` to every listener ready.

Measures, in one process and one Trio loop, the time from entering ``open_cluster`` to the
yielded ``Cluster`` (storage loaded, coordinators running, every node's listener bound and
accepting), fresh data directories each time; then connects to every node to check it accepts.
The single-broker ``open_broker`` is timed the same way, for comparison.

    .venv/bin/python bench/bench_cluster.py --runs 20 --brokers 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import trio

from trio_broker import open_broker
from trio_broker.testing import open_cluster


async def _cluster_once(brokers: int) -> float:
    with tempfile.TemporaryDirectory() as data:
        started = time.perf_counter()
        async with open_cluster(brokers, log_dirs=data) as cluster:
            elapsed = time.perf_counter() - started
            for b in cluster.brokers:
                stream = await trio.open_tcp_stream(b.host, b.port)
                await stream.aclose()
        return elapsed


async def _broker_once() -> float:
    with tempfile.TemporaryDirectory() as data:
        started = time.perf_counter()
        async with open_broker(log_dirs=data):
            elapsed = time.perf_counter() - started
        return elapsed


def _summary(name: str, samples: list[float]) -> None:
    ms = sorted(s * 1000 for s in samples)
    print(f"{name}: median {statistics.median(ms):.1f} ms (min {ms[0]:.1f}, max {ms[-1]:.1f}, "
          f"n={len(ms)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--brokers", type=int, default=3)
    args = parser.parse_args()

    async def run() -> None:
        await _cluster_once(args.brokers)  # imports and first-use caches, not timed
        await _broker_once()
        cluster = [await _cluster_once(args.brokers) for _ in range(args.runs)]
        single = [await _broker_once() for _ in range(args.runs)]
        _summary(f"open_cluster({args.brokers}) -> all listeners ready", cluster)
        _summary("open_broker() -> listening", single)

    trio.run(run)


if __name__ == "__main__":
    main()
