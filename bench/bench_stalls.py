"""Event-loop stalls of the broker, read from its own stall detector, and shutdown time.

Run: ``.venv/bin/python bench/bench_stalls.py [--topics 1000]``. Not part of the test suite.
Starts ``trio-broker serve`` as a subprocess (loopback, data in a temporary directory, a metrics
listener) and reads ``kafka_server_eventloopmetrics_lateness_seconds`` (how late a task asking
to wake every 5 ms woke; every 100 ms after a second without bytes received) from ``/metrics``
before and after each phase:

1. ``idle``: nothing but the detector, ``--idle`` seconds (so mostly 100 ms wake-ups);
2. ``create``: ``--topics`` one-partition topics created with confluent-kafka's AdminClient,
   ``--batch`` topics per CreateTopics request, one request at a time;
3. ``produce``: ``--rate`` records/s of 100 bytes for ``--seconds`` (linger.ms=0, acks=1) to a
   topic of its own;
4. ``shutdown``: SIGTERM to process exit, with every topic above still there.

Same-run reference: a bare Trio process running the same detector loop at the same time (the
machine's own noise: other processes taking the CPU delay it too). Figures go to
docs/benchmarks.md ("Event-loop stalls").
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

METRIC = "kafka_server_eventloopmetrics_lateness_seconds"
_BUCKET = re.compile(METRIC + r'_bucket\{le="([^"]+)"\} ([0-9.e+]+)')
_GC = re.compile(r'kafka_server_eventloopmetrics_gcpause_seconds_(count|sum) ([0-9.e+-]+)')

#: the bare Trio reference: prints its bucket counts (same bounds) on every line of stdin
_REFERENCE = r"""
import sys, threading, trio
from bisect import bisect_left
from trio_broker.broker.metrics.stalls import BOUNDS
counts = [0] * (len(BOUNDS) + 1)
def answer():
    for _ in sys.stdin:
        print(" ".join(map(str, counts)), flush=True)
async def main():
    threading.Thread(target=answer, daemon=True).start()
    print("ready", flush=True)
    while True:
        due = trio.current_time() + 0.005
        await trio.sleep_until(due)
        counts[bisect_left(BOUNDS, max(0.0, trio.current_time() - due))] += 1
trio.run(main)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _buckets(metrics_url: str) -> dict[str, float]:
    """The lateness buckets, and the GC pauses' count and sum (as ``gc_count``, ``gc_sum``)."""
    with urllib.request.urlopen(metrics_url + "/metrics", timeout=30) as response:
        text = response.read().decode()
    out = {le: float(n) for le, n in _BUCKET.findall(text)}
    out.update((f"gc_{kind}", float(n)) for kind, n in _GC.findall(text))
    return out


def _summary(before: dict[str, float], after: dict[str, float]) -> str:
    """Wake-ups, and how many were later than 5 / 25 / 100 ms, and the worst bucket."""
    def diff(le: str) -> float:
        return after[le] - before.get(le, 0.0)
    total = diff("+Inf")
    over = {ms: total - diff(repr(ms / 1000)) for ms in (5, 25, 100)}
    worst = "0"
    for le in after:
        if not le.startswith(("+Inf", "gc_")) and diff(le) < total:
            worst = le
    worst_ms = "> 5000" if diff("5.0") < total else f"<= {float(worst) * 1000:g}"
    gc = ""
    if "gc_count" in after:
        gc = (f", GC {int(diff('gc_count'))} pauses, {diff('gc_sum') * 1000:.1f} ms in all")
    return (f"{int(total):6d} wake-ups, late > 5 ms: {int(over[5]):4d}, > 25 ms: "
            f"{int(over[25]):4d}, > 100 ms: {int(over[100]):3d}, worst {worst_ms} ms{gc}")


class Reference:
    """The bare Trio detector in a process of its own."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _REFERENCE], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "ready"

    def buckets(self) -> dict[str, float]:
        from trio_broker.broker.metrics.stalls import BOUNDS
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        counts = [float(n) for n in self.proc.stdout.readline().split()]
        out, total = {}, 0.0
        for bound, n in zip((*BOUNDS, float("inf")), counts, strict=True):
            total += n
            out["+Inf" if bound == float("inf") else repr(bound)] = total
        return out

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--idle", type=float, default=5.0)
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()

    port, metrics_port = _free_port(), _free_port()
    metrics_url = f"http://127.0.0.1:{metrics_port}"
    data = tempfile.mkdtemp(prefix="bench-stalls-")
    argv = [sys.executable, "-m", "trio_broker", "serve",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"metrics.listener={metrics_url}",
            "--override", f"log.dirs={data}", "--override", "log.level=WARNING"]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {_load()}")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE)
    reference = Reference()
    try:
        assert proc.stdout is not None
        while b"listening on" not in (line := proc.stdout.readline()):
            if not line:
                raise RuntimeError("the broker exited at start")
        bootstrap = f"127.0.0.1:{port}"

        def phase(name: str, run: object) -> None:
            before, ref_before = _buckets(metrics_url), reference.buckets()
            started = time.perf_counter()
            detail = run()  # type: ignore[operator]
            took = time.perf_counter() - started
            after, ref_after = _buckets(metrics_url), reference.buckets()
            print(f"{name:8s} {took:7.2f} s  {detail or ''}")
            print(f"   broker    {_summary(before, after)}")
            print(f"   bare Trio {_summary(ref_before, ref_after)}   (load {_load()})")

        phase("idle", lambda: time.sleep(args.idle))

        admin = AdminClient({"bootstrap.servers": bootstrap})

        def create() -> str:
            for first in range(0, args.topics, args.batch):
                names = [f"t{i:05d}" for i in range(first, min(args.topics, first + args.batch))]
                futures = admin.create_topics([NewTopic(n, 1, 1) for n in names],
                                              operation_timeout=60, request_timeout=120)
                for f in futures.values():
                    f.result()
            return f"{args.topics} topics, {args.batch} per request"

        phase("create", create)

        def produce() -> str:
            producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                                 "linger.ms": 0, "acks": 1})
            value = b"x" * 100
            sent, started = 0, time.perf_counter()
            while (elapsed := time.perf_counter() - started) < args.seconds:
                due = int(elapsed * args.rate)
                while sent < due:
                    producer.produce("produce-phase", value)
                    sent += 1
                producer.poll(0)
                time.sleep(0.001)
            producer.flush(30)
            return f"{sent} records at {args.rate}/s"

        phase("produce", produce)
    finally:
        started = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        print(f"shutdown {time.perf_counter() - started:7.2f} s  SIGTERM to exit "
              f"({args.topics} topics; shutdown.timeout.ms 5000)   (load {_load()})")
        reference.close()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
