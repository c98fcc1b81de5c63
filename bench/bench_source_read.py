"""The Spark source's read path without Spark: fetch from the leader and decode to Arrow.

Run: ``.venv/bin/python bench/bench_source_read.py [--records 1000000] [--partitions 4]``. Not
part of the test suite. Starts ``trio-broker serve`` as a subprocess (as bench_export.py does),
produces ``--records`` records with 100-byte values, then in this process reads every partition
with ``trio_broker.spark.source.read_range``, exactly as an executor task does (pipelined
Fetch requests, ``recv_into`` one buffer per response, decode to Arrow), one partition after
the other. Each figure is the best of ``--repeat`` runs: wall-clock records/s, and this
process's CPU seconds per million records, which other load on the machine moves far less.
"""

from __future__ import annotations

import argparse
import os
import time

from bench_export import VALUE_BYTES, produce, trio_broker


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--compression", default="none")
    parser.add_argument("--repeat", type=int, default=5, help="runs; the best counts")
    args = parser.parse_args()

    from trio_broker.spark._options import OffsetRange, parse_options
    from trio_broker.spark.source import _ReadSettings, read_range

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    with trio_broker() as bootstrap:
        topic = "bench-source-read"
        seconds = produce(bootstrap, topic, args.records, args.partitions, args.compression)
        print(f"produced {args.records:,} records ({VALUE_BYTES}-byte values, "
              f"{args.partitions} partitions, {args.compression}) in {seconds:.1f} s", flush=True)
        settings = _ReadSettings.of(parse_options(
            {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=False))
        per_partition = [sum(1 for i in range(p, args.records, args.partitions))
                         for p in range(args.partitions)]
        ranges = [OffsetRange(topic, p, 0, n) for p, n in enumerate(per_partition)]
        walls, cpus = [], []
        for run in range(args.repeat + 1):  # the first run warms up and is not counted
            wall, cpu = time.perf_counter(), time.process_time()
            rows = sum(batch.num_rows for r in ranges for batch in read_range(settings, r))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            if rows != args.records:
                raise RuntimeError(f"read {rows:,} records, expected {args.records:,}")
            if run:
                walls.append(wall)
                cpus.append(cpu)
            print(f"  run {run}{' (warm-up)' if not run else ''}: {wall:.2f} s wall, "
                  f"{cpu:.2f} s CPU", flush=True)
    best_wall, best_cpu = min(walls), min(cpus)
    print(f"read path: {args.records / best_wall:,.0f} records/s wall, "
          f"{best_cpu / args.records * 1e6:.2f} CPU s per million records "
          f"(best of {args.repeat}; load average at start {load})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
