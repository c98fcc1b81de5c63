"""The broker's CPU per GB produced in big records, this checkout against another revision.

Run: ``.venv/bin/python bench/bench_big_records.py [--base REV] [--sizes 1000000,100000]
[--mb 300] [--rounds 3]``. Not part of the test suite. For each round and size, in turn for
``--base`` (checked out with ``git worktree`` into a temporary directory) and this checkout:
``trio-broker serve`` from that tree in a subprocess (``message.max.bytes=2000000``), one
confluent-kafka producer (acks=1, linger.ms=5) sending ``--mb`` MB of records of that size to a
new topic, and the broker process's user + system CPU seconds read from ``/proc`` before the
first record and after the flush. CPU seconds per GB move much less with the machine's other
load than MB/s do. Figures go to docs/benchmarks.md ("Big records").
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from growth_common import broker_argv, free_port

ROOT = Path(__file__).resolve().parent.parent


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_listening(port: int, timeout_s: float = 30) -> None:
    import socket

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"the broker did not listen on {port}")


def run(tree: Path, size: int, total_mb: float) -> tuple[float, float]:
    """(MB/s, broker CPU s per GB) of one producer sending ``total_mb`` MB of ``size``-byte
    records to a broker running ``tree``'s code."""
    import confluent_kafka

    data = tempfile.mkdtemp(prefix="bench-big-")
    port = free_port()
    # the tree first on the path: ``python -m`` puts the working directory first
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.Popen([*broker_argv(port, data), "--override",
                             "message.max.bytes=2000000"], env=env, cwd=tree,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_listening(port)
        producer = confluent_kafka.Producer({
            "bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 5, "acks": 1,
            "message.max.bytes": 2_000_000, "log_level": 0})
        value = b"x" * size
        records = max(1, int(total_mb * 1e6 / size))
        before = _cpu_s(proc.pid)
        started = time.perf_counter()
        for _ in range(records):
            while True:
                try:
                    producer.produce("big", value)
                    break
                except BufferError:
                    producer.poll(0.001)
        if producer.flush(120):
            raise RuntimeError("records were not delivered")
        elapsed = time.perf_counter() - started
        gb = records * size / 1e9
        return gb * 1e3 / elapsed, (_cpu_s(proc.pid) - before) / gb
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(data, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="e1f3cc0")
    parser.add_argument("--sizes", default="1000000,100000")
    parser.add_argument("--mb", type=float, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-big-base-")) / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base),
                    args.base], check=True)
    try:
        results: dict[tuple[str, int], list[tuple[float, float]]] = {}
        for r in range(args.rounds):
            for size in (int(s) for s in args.sizes.split(",")):
                for name, tree in ((args.base, base), ("this checkout", ROOT)):
                    mb_s, cpu = run(tree, size, args.mb)
                    results.setdefault((name, size), []).append((mb_s, cpu))
                    print(f"round {r} {name:>13} {size:9,d} B: {mb_s:7.1f} MB/s, broker CPU "
                          f"{cpu:5.2f} s/GB (load {os.getloadavg()[0]:.1f})", flush=True)
        for (name, size), runs in results.items():
            cpus = sorted(c for _, c in runs)
            rates = sorted(m for m, _ in runs)
            print(f"{name:>13} {size:9,d} B: CPU median {cpus[len(cpus) // 2]:.2f} s/GB, "
                  f"MB/s median {rates[len(rates) // 2]:.1f}")
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
                       check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
