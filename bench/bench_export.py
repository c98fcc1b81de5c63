"""Export throughput: topic to Parquet with the export's two writers, next to Spark's ceiling.

Run: ``.venv/bin/python bench/bench_export.py [--records 2000000] [--partitions 4]``. Not part
of the test suite. Starts ``trio-broker serve`` as a subprocess on a free loopback port (data in
a temporary directory), produces ``--records`` records with 100-byte random values and 8-byte
keys (confluent-kafka, ``--compression``, default none), then on a ``local[2]`` SparkSession:

1. warm-up: small exports by each path, so the JVM and Python workers are started (and have
   imported what each path needs) before anything is timed;
2. source -> Parquet: ``spark.read.format("trio_broker")...load().write.parquet(...)`` with the
   export's Parquet options (``PARQUET_WRITE_OPTIONS``);
3. ``trio-broker export --writer spark`` end to end (planning, the Spark job through the source
   and Spark's Parquet writer, staging, manifest), in this process's running session;
4. ``trio-broker export`` (its default: pyarrow writes the files in the Spark tasks, the records
   never enter the JVM), the same way;
5. ceiling: the same rows cached in memory (``df.cache()``) written to Parquet by Spark alone,
   with the same options;
6. pyarrow's Parquet writer alone, in this process, on the exported rows: snappy (what the
   export writes) and uncompressed, CPU s per million records;
7. with ``--e2e-records N`` (default 200,000; 0 skips it): ``trio-broker export`` of a topic of
   N such records as a command in a process of its own, from process start to exit, Spark's
   start included (the time a user waits), with each writer.

Each figure is the best of ``--repeat`` runs (default 3), each into a fresh directory, in
records/s of wall-clock time over the write. Figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import confluent_kafka
import pyarrow.parquet as pq
from confluent_kafka.admin import AdminClient, NewTopic

VALUE_BYTES = 100


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def trio_broker() -> Iterator[str]:
    """``trio-broker serve`` in a subprocess; yields its bootstrap servers."""
    port = _free_port()
    data = tempfile.mkdtemp(prefix="bench-export-broker-")
    argv = [sys.executable, "-m", "trio_broker", "serve",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={data}", "--override", "log.level=WARNING"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        while True:
            ready, _, _ = select.select([proc.stdout], [], [], max(0, deadline - time.monotonic()))
            if not ready:
                raise RuntimeError("the broker did not start within 30 s")
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("the broker exited at start")
            if b"listening on" in line:
                break
        yield f"127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(data, ignore_errors=True)


def produce(bootstrap: str, topic: str, records: int, partitions: int, compression: str) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": compression,
        "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000})
    values = [os.urandom(VALUE_BYTES) for _ in range(1024)]
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, values[i & 1023], b"k%07d" % (i % 10_000_000),
                                 partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise RuntimeError("records left unsent")
    return time.perf_counter() - started


def cpu_seconds() -> dict[str, float]:
    """CPU time used so far by this process's descendants, by kind (Linux ``/proc``).

    Wall-clock figures on a shared machine move with other load; CPU seconds per record do not,
    and show where the time goes: the broker, Spark's JVM, or the Python workers.
    """
    hz = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    stats: dict[int, tuple[str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        pid = int(entry)
        parents[pid] = int(fields[1])
        # utime + stime + cutime + cstime: children that exited count towards their parent
        stats[pid] = (cmd, sum(int(x) for x in fields[11:15]) / hz)
    me = os.getpid()
    totals: dict[str, float] = {}
    for pid, (cmd, secs) in stats.items():
        ancestor = parents.get(pid)
        while ancestor not in (None, 0, 1, me):
            ancestor = parents.get(ancestor)
        if ancestor != me:
            continue
        program = os.path.basename(cmd.split(" ", 1)[0])
        kind = ("broker" if "trio_broker serve" in cmd else "jvm" if program == "java"
                else "python workers" if "pyspark" in cmd else "other")
        totals[kind] = totals.get(kind, 0.0) + secs
    return totals


def best_of(label: str, repeat: int,
            run: Callable[[int], None]) -> tuple[float, dict[str, float]]:
    """Fastest of ``repeat`` runs (each into a fresh directory): other load only slows a run.
    Also the CPU seconds per run, by kind, averaged over the runs."""
    times = []
    before = cpu_seconds()
    for i in range(repeat):
        started = time.perf_counter()
        run(i)
        times.append(time.perf_counter() - started)
    after = cpu_seconds()
    cpu = {k: (after.get(k, 0.0) - before.get(k, 0.0)) / repeat for k in after}
    print(f"  {label}: " + ", ".join(f"{t:.2f}" for t in times) + " s; CPU s per run: "
          + ", ".join(f"{k} {v:.2f}" for k, v in sorted(cpu.items()) if v >= 0.005), flush=True)
    return min(times), cpu


def _export(bootstrap: str, topic: str, out: Path, master: str, writer: str,
            *extra: str) -> None:
    from trio_broker.cli import main as cli_main

    code = cli_main(["export", "--bootstrap-server", bootstrap, "--topic", topic, "--out",
                     str(out), "--master", master, "--writer", writer, *extra])
    if code:
        raise RuntimeError(f"trio-broker export exited {code}")


def _export_command(bootstrap: str, topic: str, out: Path, master: str, writer: str) -> None:
    """``trio-broker export`` as a user runs it: a process of its own, Spark started in it."""
    done = subprocess.run([sys.executable, "-m", "trio_broker", "export", "--bootstrap-server",
                           bootstrap, "--topic", topic, "--out", str(out), "--master", master,
                           "--writer", writer],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"trio-broker export exited {done.returncode}: {done.stderr}")


def _pyarrow_writer(exported: Path, out: Path) -> dict[str, float]:
    """CPU seconds pyarrow's writer takes for the exported rows, per codec, with the export's
    writer options (best of 3)."""
    from trio_broker.spark._arrow_export import file_schema, writer_options

    table = pq.read_table(exported, partitioning=None)
    schema = file_schema(True, ())
    table = table.select(schema.names).cast(schema)
    out.mkdir(parents=True, exist_ok=True)
    result = {}
    for codec in ("snappy", "none"):
        options = {**writer_options(schema), "compression": codec}
        times = []
        for _ in range(3):
            started = time.process_time()
            pq.write_table(table, out / f"{codec}.parquet", row_group_size=131_072, **options)
            times.append(time.process_time() - started)
        result[codec] = min(times)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--compression", default="none")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; the best counts")
    parser.add_argument("--e2e-records", type=int, default=200_000,
                        help="records of the end-to-end export command (0: skip it)")
    args = parser.parse_args()

    from trio_broker.spark import register
    from trio_broker.spark._session import build_session
    from trio_broker.spark.job import PARQUET_WRITE_OPTIONS

    work = Path(tempfile.mkdtemp(prefix="bench-export-"))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    with trio_broker() as bootstrap:
        topic = "bench-export"
        seconds = produce(bootstrap, topic, args.records, args.partitions, args.compression)
        print(f"produced {args.records:,} records ({VALUE_BYTES}-byte values, "
              f"{args.partitions} partitions, {args.compression}) in {seconds:.1f} s", flush=True)
        e2e = {}
        if args.e2e_records:
            small = "bench-export-e2e"
            produce(bootstrap, small, args.e2e_records, args.partitions, args.compression)
            for writer in ("arrow", "spark"):
                e2e[writer] = best_of(
                    f"trio-broker export --writer {writer} command, {args.e2e_records:,} "
                    "records, Spark start included", args.repeat,
                    lambda i, w=writer: _export_command(bootstrap, small, work / f"e2e-{w}-{i}",
                                                        args.master, w))
        spark, log = build_session(master=args.master, app_name="bench-export",
                                   log_dir=str(work / "log"))
        register(spark)

        def reader() -> Any:  # a new reader each time: DataFrameReader.option mutates it
            return (spark.read.format("trio_broker")
                    .option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", topic).option("minPartitions", "4"))

        ends = json.dumps({topic: {str(p): 10_000 for p in range(args.partitions)}})
        best_of("warm-up (small export)", 1,
                lambda i: reader().option("endingOffsets", ends).load().write.parquet(
                    str(work / "warm")))
        for writer in ("spark", "arrow"):  # and the Python workers' imports of each path
            best_of(f"warm-up (small export --writer {writer})", 1, lambda i, w=writer: _export(
                bootstrap, topic, work / f"warm-{w}", args.master, w, "--ending-offsets", ends))

        df = reader().load()
        source = best_of("source -> parquet", args.repeat, lambda i: df.write.options(
            **PARQUET_WRITE_OPTIONS).parquet(str(work / f"source-{i}")))
        written = spark.read.parquet(str(work / "source-0")).count()
        if written != args.records:
            raise RuntimeError(f"wrote {written:,} rows, expected {args.records:,}")
        cli_spark = best_of("trio-broker export --writer spark", args.repeat, lambda i: _export(
            bootstrap, topic, work / f"export-spark-{i}", args.master, "spark"))
        cli = best_of("trio-broker export (arrow writer)", args.repeat, lambda i: _export(
            bootstrap, topic, work / f"export-{i}", args.master, "arrow"))
        exported = sum(pq.read_metadata(p).num_rows for p in (work / "export-0").rglob(
            "*.parquet"))
        if exported != args.records:
            raise RuntimeError(f"exported {exported:,} rows, expected {args.records:,}")
        cached = df.cache()
        best_of("cache the rows in memory", 1, lambda i: cached.count())
        memory = best_of("in-memory -> parquet (ceiling)", args.repeat,
                           lambda i: cached.write.options(**PARQUET_WRITE_OPTIONS).parquet(
                               str(work / f"memory-{i}")))
        spark.stop()
    writer_alone = _pyarrow_writer(work / "export-0", work / "pyarrow")

    import pyspark

    n = args.records
    print()
    print(f"machine: {os.cpu_count()} cores, {platform.python_implementation()} "
          f"{platform.python_version()}, Spark {pyspark.__version__} {args.master}; "
          f"load average before: {load}")
    print(f"{'path':<34}{'seconds':>9}{'records/s':>12}   CPU s per million records")
    for label, (secs, cpu) in (("trio_broker source -> Parquet", source),
                               ("export --writer spark (end to end)", cli_spark),
                               ("export, arrow writer (end to end)", cli),
                               ("in-memory DataFrame -> Parquet", memory)):
        per_million = ", ".join(f"{k} {v * 1e6 / n:.2f}" for k, v in sorted(cpu.items())
                                if k != "other" and v >= 0.005)
        print(f"{label:<34}{secs:>9.2f}{n / secs:>12,.0f}   {per_million}")
    cores = os.cpu_count() or 1
    for label, (_, cpu) in (("source -> Parquet", source), ("export, arrow writer", cli),
                            ("in-memory -> Parquet", memory)):
        busy = sum(v for k, v in cpu.items() if k != "other")
        print(f"CPU-bound limit of {label} on {cores} otherwise idle cores: "
              f"{n * cores / busy:,.0f} records/s")
    print(f"source / ceiling (wall clock): {memory[0] / source[0]:.0%}; export (arrow) / "
          f"ceiling: {memory[0] / cli[0]:.0%}; Spark log: {log}")
    for codec, cpu_s in writer_alone.items():
        print(f"pyarrow's Parquet writer alone, {codec}: {cpu_s * 1e6 / n:.2f} CPU s per "
              "million records")
    for writer, (secs, _) in e2e.items():
        print(f"trio-broker export --writer {writer} of {args.e2e_records:,} records, process "
              f"start to exit (Spark start included): {secs:.1f} s")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
