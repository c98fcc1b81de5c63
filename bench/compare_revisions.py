"""Same-run comparison of two revisions: each benchmark run alternately on a base revision and on
the working tree, so both see the same machine load.

Run: ``.venv/bin/python bench/compare_revisions.py --base 6ee5d16 [--rounds 2] [--only pipeline]``.

The base revision is checked out into a temporary git worktree and run with this checkout's
virtualenv (``PYTHONPATH`` puts its package first, so its ``serve`` subprocesses run its code
too); each revision runs its own copy of the benchmark script, so the figures are what each
revision's own benchmark reports. Rounds alternate base, head, base, head, ... and every run's
output is printed whole under a label; figures go to docs/benchmarks.md ("Same-run comparisons").
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: name -> the benchmark's command line (relative to a checkout), sized to take about a minute
BENCHES: dict[str, list[str]] = {
    "pipeline": ["bench/bench_pipeline.py", "--seconds", "3"],
    "requests": ["bench/bench_pipeline.py", "--requests-only", "--seconds", "3", "--api",
                 "metadata", "--api", "produce"],
    "produce_consume": ["bench/bench_produce_consume.py", "--records", "500000", "--no-mock",
                        "--seconds", "5"],
    "clients": ["bench/bench_clients.py", "--records", "50000", "--clients",
                "trio-broker client,aiokafka"],
    "export": ["bench/bench_export.py", "--records", "500000", "--repeat", "1"],
    "growth_clients": ["bench/bench_growth.py", "--only", "clients", "--clients", "1000",
                       "--seconds", "5"],
}


def run(label: str, checkout: Path, argv: list[str]) -> None:
    """Run one benchmark in ``checkout`` with its package first on the path, printing its output."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    started = time.monotonic()
    done = subprocess.run([sys.executable, *argv], cwd=checkout, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    load = os.getloadavg()[0]
    print(f"--- {label} ({time.monotonic() - started:.0f} s, exit {done.returncode}, "
          f"load average {load:.1f})", flush=True)
    print(done.stdout.rstrip(), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the revision to compare against")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", action="append", choices=sorted(BENCHES),
                        help="run only these benchmarks (repeatable)")
    args = parser.parse_args()
    names = args.only or list(BENCHES)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                          capture_output=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="trio-broker-base-") as tmp:
        base_tree = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(base_tree), args.base],
                       cwd=ROOT, check=True)
        try:
            for name in names:
                for round_ in range(1, args.rounds + 1):
                    run(f"{name} base {args.base} round {round_}", base_tree, BENCHES[name])
                    run(f"{name} head {head} round {round_}", ROOT, BENCHES[name])
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base_tree)], cwd=ROOT,
                           check=False)


if __name__ == "__main__":
    main()
