"""Process start -> "listening on" of ``trio-broker serve``, this checkout against other revisions
in alternating rounds: wall time, and the process's on-CPU time at that line (its threads' run
time from ``/proc/PID/task/*/schedstat``), which the machine's load moves far less than the wall
time; each on a new log dir and on a restart over the same dir (its ``meta.properties`` read).

Run: ``.venv/bin/python bench/bench_start.py --base fe8d540 --base main [--rounds 10]``. Each
tree's package is compiled first, as an installed one is.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_pipeline import _free_port, _wait_line, base_checkout

ROOT = Path(__file__).resolve().parent.parent


def on_cpu_ms(pid: int) -> float:
    """Run time so far of every live thread of process ``pid``."""
    total_ns = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            total_ns += int(f.read().split()[0])
    return total_ns / 1e6


def start_once(tree: Path, data: str) -> tuple[float, float]:
    """(wall ms, on-CPU ms) from process start to the "listening on" line."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "trio_broker", "serve", "--override",
         f"listeners=PLAINTEXT://127.0.0.1:{_free_port()}", "--override", f"log.dirs={data}",
         "--override", "log.level=WARNING"], stdout=subprocess.PIPE, text=True, cwd=tree, env=env)
    try:
        wall_ms = (_wait_line(proc, "listening on") - t0) * 1000
        return wall_ms, on_cpu_ms(proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", action="append", default=[], metavar="REV",
                        help="a revision to measure in the same rounds (repeatable)")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        trees: dict[str, Path] = {"this tree": ROOT}
        for rev in args.base:
            checkout = stack.enter_context(base_checkout(rev))
            assert checkout is not None
            trees[rev] = checkout[1]
        for tree in trees.values():
            compileall.compile_dir(tree / "trio_broker", quiet=1)
        figures: dict[str, dict[str, list[float]]] = {
            name: {"new": [], "restart": [], "cpu_new": [], "cpu_restart": []} for name in trees}
        loads = []
        for _ in range(args.rounds):
            for name, tree in trees.items():
                with tempfile.TemporaryDirectory() as data:
                    for kind in ("new", "restart"):
                        wall, cpu = start_once(tree, data)
                        figures[name][kind].append(wall)
                        figures[name]["cpu_" + kind].append(cpu)
            loads.append(os.getloadavg()[0])
    print(f"{args.rounds} rounds, load average {min(loads):.2f}-{max(loads):.2f}; medians "
          "(min), ms")
    for name, f in figures.items():
        print(f"{name}: new log dir {_fmt(f['new'])}, restart {_fmt(f['restart'])}; on-CPU "
              f"{_fmt(f['cpu_new'])}, restart {_fmt(f['cpu_restart'])}")


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f})"


if __name__ == "__main__":
    main()
