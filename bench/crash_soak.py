"""Crash soak: N kill -9 / restart cycles under an idempotent producer, both flush policies.

Usage: .venv/bin/python bench/crash_soak.py [--cycles 50] [--policy both|flush|default]
       [--seed S] [--work-dir DIR]

Each cycle: the broker process runs for a random 0.3-1.5 s under a confluent-kafka producer
(enable.idempotence=true, acks=all) that never stops, consumer-group offsets are committed, the
broker gets SIGKILL, restarts on the same port, and the committed offsets are read back. At the
end every acknowledged record is checked through a consumer and in the segment files (CRC,
exactly once, in offset order). Prints figures for docs/reliability.md; exits 1 on any problem.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.hostile.crash import run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--policy", choices=["both", "flush", "default"], default="both")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--work-dir", type=Path, default=None)
    args = parser.parse_args()
    policies = {"both": [True, False], "flush": [True], "default": [False]}[args.policy]
    failed = False
    for flush in policies:
        name = "log.flush.interval.messages=1" if flush else "default flush policy"
        with tempfile.TemporaryDirectory() as tmp:
            work = (args.work_dir / ("flush" if flush else "default")) if args.work_dir \
                else Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            t0 = time.monotonic()
            report = run(work, cycles=args.cycles, flush_every_message=flush, seed=args.seed)
            summary = report.summary()
            summary["wall_s"] = round(time.monotonic() - t0, 1)
        print(f"{name}: {json.dumps(summary)}", flush=True)
        failed |= bool(report.problems)
    print("FAILED" if failed else "OK: no acknowledged record lost or duplicated")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
