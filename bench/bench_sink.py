"""Sink throughput: a DataFrame written to a topic through the trio_broker sink, next to Spark
writing the same rows without it.

Run: ``.venv/bin/python bench/bench_sink.py [--records 2000000] [--partitions 4]``. Not part of
the test suite. Starts ``trio-broker serve`` as a subprocess on a free loopback port (data in a
temporary directory) and a ``local[2]`` SparkSession, builds ``--records`` rows with 100-byte
random values and 8-byte keys (no partition column: Java's partitioner places them by key),
caches them, then times, each the best of ``--repeat`` runs:

1. sink: ``df.write.format("trio_broker").mode("append")...save()`` into a fresh topic of
   ``--partitions`` partitions (acks=all, idempotence on, the sink's 256 KiB batch.size: the
   defaults), every record acknowledged before the job ends; alternating run by run with the
   same write at Kafka's producer default ``kafka.batch.size=16384`` (unless ``--option`` sets
   a batch size);
2. Spark alone: the same rows to Spark's ``noop`` format (what producing the rows costs Spark);
3. Parquet: the same rows to Parquet (the ceiling the export bench also measures);
4. without Spark: the same rows as Arrow batches of 10,000 (Spark's
   ``spark.sql.execution.arrow.maxRecordsPerBatch``), built in this process, then written
   by the sink's task code (``produce_batches``: encoding, partitioning, the blocking client's
   producer) in this one process, one core: what a sink task costs without Spark around it
   (CPU seconds of this process per million records).

It prints records/s of wall-clock time, CPU seconds per million records by process kind
(Spark's JVM, its Python workers, the broker) and the load average at the start; figures go to
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
from bench_export import best_of, trio_broker

KEY_BYTES = 8
VALUE_BYTES = 100


def same_rows_as_arrow(n: int) -> list[pa.RecordBatch]:
    """The rows ``main`` builds in Spark, built here (collecting 2 M rows through Spark's
    driver is a job of its own, and fails at this size with its default limits)."""
    out = []
    for first in range(0, n, 10_000):
        ids = range(first, min(first + 10_000, n))
        keys = [str(i % 10_000_000).rjust(KEY_BYTES, "k")[:KEY_BYTES].encode() for i in ids]
        values = [hashlib.sha512(str(i).encode()).hexdigest()[:VALUE_BYTES].encode()
                  for i in ids]
        out.append(pa.RecordBatch.from_arrays([pa.array(keys, pa.binary()),
                                               pa.array(values, pa.binary())],
                                              names=["key", "value"]))
    return out


def _merged(runs: list[tuple[float, dict[str, float]]]) -> tuple[float, dict[str, float]]:
    """Runs of one figure taken one at a time: the fastest, and the mean CPU by kind."""
    kinds = {kind for _, cpu in runs for kind in cpu}
    return (min(secs for secs, _ in runs),
            {kind: sum(cpu.get(kind, 0.0) for _, cpu in runs) / len(runs) for kind in kinds})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; the best counts")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="extra sink option, e.g. kafka.batch.size=262144")
    args = parser.parse_args()

    from confluent_kafka.admin import AdminClient, NewTopic

    from trio_broker.spark import register
    from trio_broker.spark._session import build_session
    from trio_broker.spark.sink import parse_sink_options, produce_batches

    work = Path(tempfile.mkdtemp(prefix="bench-sink-"))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    extra = dict(item.split("=", 1) for item in args.option)
    n = args.records
    with trio_broker() as bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = [f"bench-sink-{i}" for i in range(3 * args.repeat + 1)]
        for future in admin.create_topics([NewTopic(t, args.partitions, 1)
                                           for t in topics]).values():
            future.result(30)
        spark, log = build_session(master=args.master, app_name="bench-sink",
                                   log_dir=str(work / "log"))
        register(spark)
        rows = spark.range(n, numPartitions=4).selectExpr(
            f"cast(lpad(cast(id % 10000000 AS string), {KEY_BYTES}, 'k') AS binary) AS key",
            f"cast(substr(sha2(cast(id AS string), 512), 1, {VALUE_BYTES}) AS binary) AS value"
        ).cache()
        best_of("cache the rows in memory", 1, lambda i: rows.count())

        def sink(topic: str, **more: str) -> Callable[[int], None]:
            return lambda i: (rows.write.format("trio_broker").mode("append")
                              .option("kafka.bootstrap.servers", bootstrap)
                              .option("topic", topic).options(**more, **extra).save())

        # a warm-up over all four partitions, so that Spark has started both Python workers
        # (a run that starts one pays its imports, ~1 CPU s per million records here) and the
        # JVM has compiled the conversion to Arrow
        best_of("warm-up (sink, 5% of the rows)", 1, lambda i: (
            rows.sample(fraction=0.05, seed=1).write.format("trio_broker").mode("append")
            .option("kafka.bootstrap.servers", bootstrap).option("topic", topics[0])
            .options(**extra).save()))
        small = None
        if "kafka.batch.size" in extra:
            sunk = best_of("sink", args.repeat, sink(topics[1]))
        else:  # the sink's default and Kafka's batch.size, alternating run by run
            runs: dict[str, list[tuple[float, dict[str, float]]]] = {"sink": [], "small": []}
            for i in range(args.repeat):
                runs["sink"].append(best_of("sink", 1, sink(topics[i + 1])))
                runs["small"].append(best_of("sink, kafka.batch.size=16384", 1, sink(
                    topics[2 * args.repeat + i + 1], **{"kafka.batch.size": "16384"})))
            sunk, small = (_merged(runs["sink"]), _merged(runs["small"]))
        noop = best_of("Spark alone (noop format)", args.repeat,
                       lambda i: rows.write.format("noop").mode("overwrite").save())
        parquet = best_of("Parquet", args.repeat, lambda i: rows.write.parquet(
            str(work / f"parquet-{i}")))
        batches = same_rows_as_arrow(n)
        cpu_before = time.process_time()
        bare = best_of("without Spark (the sink's task code, one process)", args.repeat,
                       lambda i: produce_batches(parse_sink_options({
                           "kafka.bootstrap.servers": bootstrap,
                           "topic": topics[args.repeat + i + 1], **extra}), iter(batches)))
        bare_cpu = (time.process_time() - cpu_before) / args.repeat
        spark.stop()

    import pyspark

    print()
    print(f"machine: {os.cpu_count()} cores, {platform.python_implementation()} "
          f"{platform.python_version()}, Spark {pyspark.__version__} {args.master}; "
          f"load average before: {load}; sink options: {extra or 'defaults'}")
    print(f"{'path':<34}{'seconds':>9}{'records/s':>12}   CPU s per million records")
    figures = [("DataFrame -> trio_broker sink", sunk)]
    if small is not None:
        figures.append(("  the same, batch.size 16384", small))
    figures += [("DataFrame -> noop (Spark alone)", noop), ("DataFrame -> Parquet", parquet)]
    for label, (secs, cpu) in figures:
        per_million = ", ".join(f"{k} {v * 1e6 / n:.2f}" for k, v in sorted(cpu.items())
                                if k != "other" and v >= 0.005)
        print(f"{label:<34}{secs:>9.2f}{n / secs:>12,.0f}   {per_million}")
    print(f"{'without Spark, one process':<34}{bare[0]:>9.2f}{n / bare[0]:>12,.0f}   "
          f"this process {bare_cpu * 1e6 / n:.2f}")
    print(f"Spark log: {log}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
