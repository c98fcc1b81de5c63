"""Where the time of a short ``trio-broker export`` goes: CPU seconds per process kind.

Run: ``.venv/bin/python bench/bench_export_start.py [--records 200000] [--rounds 3]``. Not part
of the test suite. Starts ``trio-broker serve`` as a subprocess (as bench_export.py does),
produces ``--records`` records (100-byte values, 4 partitions), then runs the export command
as a process of its own (Spark started in it, as a user runs it), alternating two ways:

- ``short``: as the command runs it: a batch export of at most ``SHORT_EXPORT_RECORDS`` starts
  its JVM with the quick JIT compiler only (``_session.SHORT_JOB_JAVA_OPTIONS``);
- ``default``: the same command with the JVM's default compilers.

For each run it prints the wall-clock time and the CPU seconds of every process the command
started, by kind (the JVM, each Python worker module, the command's own Python), read from
``/proc`` every 0.1 s while it runs. On a shared machine the wall clock moves with other load;
the CPU seconds much less, and they say what a run costs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_export import produce, trio_broker

_HZ = os.sysconf("SC_CLK_TCK")

_RUN = """
import sys
import trio_broker.spark.job as job
if sys.argv[1] == "default":
    job.SHORT_EXPORT_RECORDS = -1
from trio_broker.cli import main
raise SystemExit(main(sys.argv[2:]))
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


def _watch(root: int, stop: threading.Event, cpu: dict[int, float],
           kinds: dict[int, str]) -> None:
    """Latest CPU seconds of every descendant of ``root`` (and itself), until ``stop``."""
    while True:
        parents: dict[int, int] = {}
        now: dict[int, float] = {}
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
            kinds[pid] = _kind(cmdline) if pid not in kinds or kinds[pid] == "other" else kinds[pid]
        for pid, seconds in now.items():
            ancestor = pid
            while ancestor not in (0, 1, root) and ancestor in parents:
                ancestor = parents[ancestor]
            if ancestor == root:
                cpu[pid] = max(cpu.get(pid, 0.0), seconds)
        if stop.wait(0.1):
            return


def run_export(way: str, bootstrap: str, topic: str, out: Path,
               master: str) -> tuple[float, dict[str, float]]:
    argv = [sys.executable, "-c", _RUN, way, "export", "--bootstrap-server", bootstrap,
            "--topic", topic, "--out", str(out), "--master", master]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stop = threading.Event()
    cpu: dict[int, float] = {}
    kinds: dict[int, str] = {}
    watcher = threading.Thread(target=_watch, args=(proc.pid, stop, cpu, kinds))
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
    return wall, by_kind


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-export-start-"))
    results: dict[str, list[tuple[float, float]]] = {"short": [], "default": []}
    with trio_broker() as bootstrap:
        produce(bootstrap, "bench-export-start", args.records, 4, "none")
        for r in range(args.rounds):
            for way in results:
                load = os.getloadavg()[0]
                wall, by_kind = run_export(way, bootstrap, "bench-export-start",
                                           work / f"{way}-{r}", args.master)
                total = sum(by_kind.values())
                results[way].append((wall, total))
                print(f"round {r} {way:<8} wall {wall:6.2f} s  CPU {total:6.2f} s  "
                      f"(load {load:.1f}): " + ", ".join(f"{k} {v:.2f}" for k, v in
                                  sorted(by_kind.items(), key=lambda x: -x[1]) if v >= 0.05),
                      flush=True)
    for way, runs in results.items():
        walls = sorted(w for w, _ in runs)
        cpus = sorted(c for _, c in runs)
        print(f"{way:<8} wall best {walls[0]:.2f} median {walls[len(walls) // 2]:.2f} s; "
              f"CPU best {cpus[0]:.2f} median {cpus[len(cpus) // 2]:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
