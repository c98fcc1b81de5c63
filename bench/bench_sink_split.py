"""Where a sink task's CPU goes, without Spark: encoding, the producer, the wire, the broker.

Run: ``.venv/bin/python bench/bench_sink_split.py [--records 1000000] [--rounds 3]
[--batch-size 16384 --batch-size default]``. Not part of the test suite. Starts ``trio-broker
serve`` as a subprocess (as bench_export.py does) and, for each round and each ``--batch-size``
in turn (``default``: the sink's own), a fresh Python process that:

1. builds ``--records`` rows as bench_sink.py does (8-byte keys, 100-byte values) in Arrow
   batches of 10,000 (Spark's ``spark.sql.execution.arrow.maxRecordsPerBatch``);
2. encodes them with the sink's task code alone (partitions, ``_encode.BatchEncoder``; nothing
   sent): the CPU seconds of *encoding*;
3. writes them to a fresh 4-partition topic with ``produce_batches`` (``acks=all``, idempotence
   on), the whole of a sink task: its CPU seconds, of which *wire* is the kernel's share beyond
   what encoding alone needed (the socket calls: sending, receiving, polling) and *producer*
   the rest after encoding (sealing batches with their CRC, building requests, reading
   answers, the producer's bookkeeping).

The broker's CPU seconds over step 3 come from ``/proc``. Figures are CPU seconds per million
records (the wall-clock rate moves with other load on a shared machine; CPU seconds much less).
No profiler splits the task: counting every call costs more than the calls themselves and
changes how full the requests are.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from bench_export import cpu_seconds, trio_broker
from confluent_kafka.admin import AdminClient, NewTopic

_CHILD = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[5])
from bench_sink import same_rows_as_arrow
from trio_broker.spark.sink import _Task, parse_sink_options, produce_batches

records, bootstrap, topic, batch_size = sys.argv[1:5]
options = {"kafka.bootstrap.servers": bootstrap, "topic": topic}
if batch_size != "default":
    options["kafka.batch.size"] = batch_size
settings = parse_sink_options(options)
batches = same_rows_as_arrow(int(records))
produce_batches(parse_sink_options({**options, "topic": topic + "-warm"}), iter(batches[:3]))
with settings.client() as client:  # encoding alone: the task's split and encoders
    task = _Task(settings, client)
    before = os.times()
    sent = 0
    for batch in batches:
        for name, rows in task.split(batch):
            sent += len(task.encoder(name).add(rows))
    for encoder in task.encoders.values():
        sent += len(encoder.drain())
    after = os.times()
    task.progress.close()
encoding = (after.user - before.user, after.system - before.system)
print("READY", flush=True)
sys.stdin.readline()
before, wall = os.times(), time.perf_counter()
commit = produce_batches(settings, iter(batches))
after, wall = os.times(), time.perf_counter() - wall
print(json.dumps({"wall": wall, "task": after.user - before.user + after.system - before.system,
                  "encoding": sum(encoding),
                  "wire": max(after.system - before.system - encoding[1], 0.0),
                  "batches": sent, "records": commit.records}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", action="append", default=[],
                        help="kafka.batch.size to run (repeatable; 'default': the sink's own)")
    args = parser.parse_args()
    sizes = args.batch_size or ["16384", "default"]
    n = args.records
    bench_dir = str(Path(__file__).resolve().parent)
    results: dict[str, list[dict[str, float]]] = {size: [] for size in sizes}
    with trio_broker() as bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for r in range(args.rounds):
            for size in sizes:
                topic = f"split-{size}-{r}"
                for future in admin.create_topics([NewTopic(t, 4, 1) for t in
                                                   (topic, topic + "-warm")]).values():
                    future.result(30)
                child = subprocess.Popen(
                    [sys.executable, "-c", _CHILD, str(n), bootstrap, topic, size, bench_dir],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                assert child.stdin is not None
                assert child.stdout is not None
                if child.stdout.readline().strip() != "READY":
                    raise RuntimeError("the task process failed before its run")
                before = cpu_seconds()
                child.stdin.write("\n")
                child.stdin.flush()
                found = json.loads(child.stdout.readline())
                if child.wait():
                    raise RuntimeError("the task process failed")
                after = cpu_seconds()
                if found["records"] != n:
                    raise RuntimeError(f"wrote {found['records']:,} records, expected {n:,}")
                found["broker"] = after.get("broker", 0.0) - before.get("broker", 0.0)
                results[size].append(found)
                print(f"round {r} batch.size {size:>8}: {n / found['wall']:>10,.0f} records/s, "
                      f"{found['batches']:,} batches; CPU s per million records: "
                      + _split(found, n) + f"; load {os.getloadavg()[0]:.1f}", flush=True)
    print()
    for size, runs in results.items():
        median = {k: sorted(run[k] for run in runs)[len(runs) // 2] for k in runs[0]}
        print(f"batch.size {size:>8}, medians: {n / median['wall']:>10,.0f} records/s; CPU s per "
              f"million records: " + _split(median, n))
    return 0


def _split(found: dict[str, float], n: int) -> str:
    scale = 1e6 / n
    producer = found["task"] - found["encoding"] - found["wire"]
    return (f"task {found['task'] * scale:.2f} (encoding {found['encoding'] * scale:.2f}, "
            f"producer {producer * scale:.2f}, wire {found['wire'] * scale:.2f}), "
            f"broker {found['broker'] * scale:.2f}")


if __name__ == "__main__":
    sys.exit(main())
