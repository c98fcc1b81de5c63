"""Where the time of a short ``trio-broker export`` goes: its phases and CPU seconds per process.

Run: ``.venv/bin/python bench/bench_export_start.py [--records 200000] [--rounds 3]
[--timeline]``. Not part of the test suite. Starts ``trio-broker serve`` as a subprocess (as
bench_export.py does), produces ``--records`` records (100-byte values, 4 partitions), then runs
the export command as a process of its own (Spark started in it, as a user runs it), in turn
each of ``--ways``:

- ``short``: as the command runs it: a batch export of at most ``SHORT_EXPORT_RECORDS`` starts
  its driver JVM for a short job (``_session.SHORT_JOB_JAVA_OPTIONS`` and the class archive
  of ``_class_archive``). The runs use a cache directory of their own (``--cache`` to reuse
  one): when it holds no archive, the first run is reported apart (``creating``): it starts the
  archive's writer in the background as it exits, and the next round waits for the writer;
- ``no-archive``: the short way without the class archive;
- ``default``: the same command with the JVM's defaults (no short-job options, no archive);
- ``variant``: the short way with ``--java-options`` added (``-D spark.*`` settings work too).

For each run it prints the wall-clock time and the CPU seconds of every process the command
started, by kind (the JVM, each Python worker module, the command's own Python), read from
``/proc`` every 0.1 s while it runs; with ``--timeline`` also when each phase began and ended
(Python imports, the broker's metadata, the JVM's launch, the SparkContext, the Spark job,
``spark.stop()``, the exit) and when each process started. On a shared machine the wall clock
moves with other load; the CPU seconds much less, and they say what a run costs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_export import produce, trio_broker

_HZ = os.sysconf("SC_CLK_TCK")

_RUN = """
import sys, time
T0 = float(sys.argv[2])
def mark(name):
    print(f"@phase {time.time() - T0:.3f} {name}", file=sys.stderr, flush=True)
mark("python started")
import trio_broker.spark.job as job
from trio_broker.cli import main
mark("trio_broker imported")
import numpy, pyarrow, pyspark.sql.datasource
mark("pyspark, pyarrow imported")
import os, trio_broker.spark._session as session
if sys.argv[1] == "default":
    job.SHORT_EXPORT_RECORDS = -1
if sys.argv[1] == "creating":  # the short way, the first time
    sys.argv[1] = "short"
if sys.argv[1] == "no-archive":
    os.environ["TRIOBROKER_SPARK_CLASS_ARCHIVE"] = "off"
if sys.argv[1] == "variant":  # the short way with more driver options
    session.SHORT_JOB_JAVA_OPTIONS += " " + os.environ["BENCH_JAVA_OPTIONS"]

def timed(owner, name, label):
    original = getattr(owner, name)
    def wrapper(*args, **kwargs):
        mark(label + " begins")
        try:
            return original(*args, **kwargs)
        finally:
            mark(label + " ends")
    setattr(owner, name, wrapper)

import pyspark.java_gateway, pyspark.sql, trio_broker.spark.source as source
timed(source, "plan_batch", "planning (broker metadata)")
timed(pyspark.java_gateway, "launch_gateway", "JVM launch")
timed(pyspark.SparkContext, "_do_init", "SparkContext")
timed(pyspark.SparkContext, "stop", "spark.stop()")
timed(job.ExportJob, "_write_batch", "the Spark job")
import atexit
atexit.register(mark, "python exits")
raise SystemExit(main(sys.argv[3:]))
"""


def _kind(cmdline: str) -> str:
    words = cmdline.split()
    if not words:
        return "?"
    if os.path.basename(words[0]) == "java":
        return "JVM"
    if "pyspark.daemon" in words:  # the daemon and its forked workers: by worker module
        return "Python " + words[-1].rsplit(".", 1)[-1]
    if "-c" in words and "trio_broker.spark.job" in cmdline:
        return "export command"
    return "other"


def _boot_time() -> float:
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return float(line.split()[1])
    raise RuntimeError("no btime in /proc/stat")


def _watch(root: int, stop: threading.Event, cpu: dict[int, float],
           kinds: dict[int, str], starts: dict[int, float]) -> None:
    """Latest CPU seconds of every descendant of ``root`` (and itself), until ``stop``;
    ``starts``: when each started (seconds since the epoch)."""
    boot = _boot_time()
    while True:
        parents: dict[int, int] = {}
        now: dict[int, float] = {}
        started: dict[int, float] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            pid = int(entry)
            parents[pid] = int(fields[1])
            now[pid] = (int(fields[11]) + int(fields[12])) / _HZ
            started[pid] = int(fields[19]) / _HZ
            kinds[pid] = (_kind(cmdline) if kinds.get(pid, "other") in ("other", "?")
                       else kinds[pid])
        for pid, seconds in now.items():
            ancestor = pid
            while ancestor not in (0, 1, root) and ancestor in parents:
                ancestor = parents[ancestor]
            if ancestor == root:
                cpu[pid] = max(cpu.get(pid, 0.0), seconds)
                starts.setdefault(pid, boot + started[pid])
        if stop.wait(0.1):
            return


def run_export(way: str, bootstrap: str, topic: str, out: Path, master: str,
               env: dict[str, str] | None = None
               ) -> tuple[float, dict[str, float], list[tuple[float, str]]]:
    """Wall seconds, CPU seconds by process kind, and the run's timeline: (seconds since the
    start, event) for the command's phases and each process's start."""
    t0 = time.time()
    argv = [sys.executable, "-c", _RUN, way, repr(t0), "export", "--bootstrap-server",
            bootstrap, "--topic", topic, "--out", str(out), "--master", master]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    stop = threading.Event()
    cpu: dict[int, float] = {}
    kinds: dict[int, str] = {}
    starts: dict[int, float] = {}
    watcher = threading.Thread(target=_watch, args=(proc.pid, stop, cpu, kinds, starts))
    watcher.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - started
    stop.set()
    watcher.join()
    if proc.returncode:
        raise RuntimeError(f"export exited {proc.returncode}: {err[-2000:]}")
    by_kind: dict[str, float] = {}
    for pid, seconds in cpu.items():
        by_kind[kinds.get(pid, "?")] = by_kind.get(kinds.get(pid, "?"), 0.0) + seconds
    timeline = [(float(line.split()[1]), line.split(None, 2)[2])
                for line in err.splitlines() if line.startswith("@phase ")]
    # /proc's boot time is in whole seconds: process starts are taken relative to the command's
    root = starts.get(proc.pid, t0)
    timeline += [(at - root, f"{kinds.get(pid, '?')} process starts") for pid, at in starts.items()
                 if kinds.get(pid) not in (None, "other", "export command")]
    timeline.append((wall, "command exited"))
    return wall, by_kind, sorted(timeline, key=lambda event: event[0])


def wait_for_archive(directory: Path, timeout_s: float = 300) -> float:
    """Seconds until the first run's background writer published the archive and let go of
    its lock (or ``timeout_s``)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if list(directory.glob("*.jsa")) and not list(directory.glob("*.lock")):
            break
        time.sleep(0.2)
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--ways", default="short,default",
                        help="comma list of short, no-archive, default, variant (default: "
                             "short,default, alternating)")
    parser.add_argument("--cache", default=None, metavar="DIR",
                        help="XDG_CACHE_HOME of the runs, to reuse a class archive (default: "
                             "a new directory: the first short run creates the archive)")
    parser.add_argument("--java-options", default="", metavar="OPTIONS",
                        help="the way 'variant': the short way with these driver options")
    parser.add_argument("--timeline", action="store_true",
                        help="print each run's phases and process starts")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-export-start-"))
    # a cache of its own: the first ``short`` run creates the class archive, later ones use it
    cache = Path(args.cache) if args.cache else work / "cache"
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), BENCH_JAVA_OPTIONS=args.java_options)
    results: dict[str, list[tuple[float, float]]] = {way: [] for way in args.ways.split(",")}
    with trio_broker() as bootstrap:
        produce(bootstrap, "bench-export-start", args.records, 4, "none")
        rounds = [(r, way) for r in range(args.rounds) for way in results]
        if "short" in results and not list(cache.glob("trio-broker/*.jsa")):
            # first, the run that creates the archive: reported apart
            results = {"creating": [], **results}
            rounds.insert(0, (-1, "creating"))
        for r, way in rounds:
            load = os.getloadavg()[0]
            wall, by_kind, timeline = run_export(way, bootstrap, "bench-export-start",
                                                 work / f"{way}-{r}", args.master, env)
            total = sum(by_kind.values())
            results[way].append((wall, total))
            print(f"round {r} {way:<10} wall {wall:6.2f} s  CPU {total:6.2f} s  "
                  f"(load {load:.1f}): " + ", ".join(f"{k} {v:.2f}" for k, v in
                              sorted(by_kind.items(), key=lambda x: -x[1]) if v >= 0.05),
                  flush=True)
            if args.timeline:
                for at, event in timeline:
                    print(f"    {at:7.2f} s  {event}")
            if way == "creating":
                waited = wait_for_archive(cache / "trio-broker")
                print(f"the archive's writer, in the background, finished {waited:.1f} s "
                      "after the first run", flush=True)
    if not args.cache:
        shutil.rmtree(work / "cache", ignore_errors=True)  # the archive: ~150 MB
    for way, runs in results.items():
        walls = sorted(w for w, _ in runs)
        cpus = sorted(c for _, c in runs)
        print(f"{way:<8} wall best {walls[0]:.2f} median {walls[len(walls) // 2]:.2f} s; "
              f"CPU best {cpus[0]:.2f} median {cpus[len(cpus) // 2]:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
