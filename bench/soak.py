"""Soak: one broker under every kind of client at once for SOAK_SECONDS, sampled once a minute.

Usage: .venv/bin/python bench/soak.py [--seconds 3600] [--sample-s 60] [--out build/soak]
       [--plot docs/img/soak.png]      (``make soak``; SOAK_SECONDS=180 for a smoke run)
       .venv/bin/python bench/soak.py --judge build/soak/soak.csv [--seconds S]  (judge again)

`trio-broker serve` runs as a child process on loopback with a temporary log dir, the web
console and the metrics listener on. At the same time, each at a bounded rate:
- confluent-kafka producers with acks=all and acks=1 (their delivery latencies are the
  produce p99 the verdict watches);
- consumers in two groups that join, consume for 15-45 s and leave, two at a time per group
  (confluent-kafka in one, kafka-python in the other);
- a transactional confluent-kafka producer (every fifth transaction aborted) and a
  read_committed consumer that must never see an aborted record;
- a compacted topic (200 keys rewritten) with small segments, so the cleaner keeps working;
- web console page loads and /metrics scrapes (httpx);
- connection churn: connect, one Metadata request, close.
Each sample (bench/soak_sampler.py) reads the broker's RSS and descriptors from /proc, its
event-loop stall detector from /metrics and the clients' produce latencies, and appends a CSV
row; at the end (or at Ctrl-C) the CSV, the plots and the verdict are written. Exit status 1
when the verdict fails. The figures of a full run are in docs/reliability.md ("Soak").
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.growth_common import broker_argv, free_port
from bench.soak_sampler import (
    Counters,
    LatencyRecorder,
    Sampler,
    judge,
    plot,
    read_csv,
    write_csv,
)

#: (topic, partitions, topic configs)
TOPICS = (("soak-all", 3, {"segment.bytes": str(8 << 20), "retention.bytes": str(32 << 20)}),
          ("soak-one", 3, {"segment.bytes": str(8 << 20), "retention.bytes": str(32 << 20)}),
          ("soak-txn", 1, {"segment.bytes": str(8 << 20), "retention.bytes": str(32 << 20)}),
          ("soak-compact", 1, {"cleanup.policy": "compact", "segment.bytes": str(256 << 10),
                               "min.cleanable.dirty.ratio": "0.1", "segment.ms": "30000"}))
PRODUCE_RATE = 100       # records/s for each of the two plain producers
COMPACT_RATE = 50        # records/s to the compacted topic
COMPACT_KEYS = 200
TXN_RATE = 2             # transactions/s, 5 records each
CHURN_RATE = 5           # connections/s
HTTP_INTERVAL_S = 2.0
VALUE = b"v" * 1000


class Workloads:
    """The client loops, each in its own thread, all stopping when ``stop`` is set."""

    def __init__(self, bootstrap: str, console: str, metrics: str, stop: threading.Event,
                 latency_all: LatencyRecorder, latency_one: LatencyRecorder,
                 counters: Counters) -> None:
        self.bootstrap, self.console, self.metrics = bootstrap, console, metrics
        self.stop, self.counters = stop, counters
        self.latency_all, self.latency_one = latency_all, latency_one
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        loops: list[tuple[str, Callable[[], None]]] = [
            ("produce-acks-all", functools.partial(self.produce, "soak-all", "all",
                                                   self.latency_all, "produced_all")),
            ("produce-acks-1", functools.partial(self.produce, "soak-one", "1",
                                                 self.latency_one, "produced_one")),
            ("produce-compact", self.produce_compacted),
            ("transactions", self.transactions),
            ("read-committed", self.read_committed),
            ("connection-churn", self.connection_churn),
            ("http", self.http),
        ]
        for slot in range(2):
            loops.append((f"group-ck-{slot}", functools.partial(self.group_churn, self.ck_member)))
            loops.append((f"group-kp-{slot}", functools.partial(self.group_churn, self.kp_member)))
        for name, target in loops:
            t = threading.Thread(target=self._guard, args=(name, target), name=name, daemon=True)
            t.start()
            self.threads.append(t)

    def join(self, timeout_s: float) -> list[str]:
        deadline = time.monotonic() + timeout_s
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return [t.name for t in self.threads if t.is_alive()]

    def _guard(self, name: str, target: Callable[[], None]) -> None:
        while not self.stop.is_set():
            try:
                target()
            except Exception as exc:
                self.counters.add("errors")
                print(f"[{name}] {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                self.stop.wait(1.0)

    def _pace(self, started: float, n: int, rate: float) -> None:
        """Sleep until record ``n`` is due at ``rate`` a second (never bursts to catch up)."""
        delay = started + n / rate - time.monotonic()
        if delay > 0:
            self.stop.wait(delay)

    def _on_delivery(self, recorder: LatencyRecorder, counter: str, t0: float, err: object,
                     _msg: object) -> None:
        if err is not None:
            self.counters.add("errors")
            print(f"[delivery] {err}", file=sys.stderr, flush=True)
            return
        recorder.record(time.monotonic() - t0)
        self.counters.add(counter)

    def produce(self, topic: str, acks: str, recorder: LatencyRecorder, counter: str) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "acks": acks, "linger.ms": 5,
                      "client.id": f"soak-{topic}"})
        started, n = time.monotonic(), 0
        while not self.stop.is_set():
            t0 = time.monotonic()
            p.produce(topic, VALUE, key=str(n).encode(),
                      on_delivery=functools.partial(self._on_delivery, recorder, counter, t0))
            p.poll(0)
            n += 1
            self._pace(started, n, PRODUCE_RATE)
        p.flush(10)

    def produce_compacted(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5})
        started, n = time.monotonic(), 0
        while not self.stop.is_set():
            p.produce("soak-compact", VALUE, key=f"key-{random.randrange(COMPACT_KEYS)}".encode())
            p.poll(0)
            n += 1
            self._pace(started, n, COMPACT_RATE)
        p.flush(10)

    def transactions(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": "soak-txn",
                      "linger.ms": 5})
        p.init_transactions(30)
        started, n = time.monotonic(), 0
        while not self.stop.is_set():
            abort = n % 5 == 4
            p.begin_transaction()
            for i in range(5):
                p.produce("soak-txn", (b"abort-" if abort else b"commit-") + str(i).encode())
            if abort:
                p.abort_transaction(30)
                self.counters.add("txn_aborted")
            else:
                p.commit_transaction(30)
                self.counters.add("txn_committed")
            n += 1
            self._pace(started, n, TXN_RATE)

    def read_committed(self) -> None:
        from confluent_kafka import Consumer

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "soak-read-committed",
                      "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
        c.subscribe(["soak-txn"])
        try:
            while not self.stop.is_set():
                for m in c.consume(500, 0.5):
                    if m.error():
                        continue
                    if (m.value() or b"").startswith(b"abort-"):
                        self.counters.add("errors")
                        print("[read-committed] saw an aborted record", file=sys.stderr)
                    self.counters.add("read_committed")
        finally:
            c.close()

    def group_churn(self, member: Callable[[float], None]) -> None:
        while not self.stop.is_set():
            member(random.uniform(15, 45))
            self.counters.add("group_joins")

    def ck_member(self, lifetime_s: float) -> None:
        from confluent_kafka import Consumer

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "soak-group-ck",
                      "auto.offset.reset": "latest", "session.timeout.ms": 10000})
        c.subscribe(["soak-all"])
        try:
            until = time.monotonic() + lifetime_s
            while not self.stop.is_set() and time.monotonic() < until:
                self.counters.add("consumed_ck",
                                  sum(1 for m in c.consume(500, 0.5) if not m.error()))
        finally:
            c.close()

    def kp_member(self, lifetime_s: float) -> None:
        from kafka import KafkaConsumer

        c = KafkaConsumer("soak-one", bootstrap_servers=self.bootstrap, group_id="soak-group-kp",
                          auto_offset_reset="latest", session_timeout_ms=10000)
        try:
            until = time.monotonic() + lifetime_s
            while not self.stop.is_set() and time.monotonic() < until:
                batches = c.poll(timeout_ms=500)
                self.counters.add("consumed_kp", sum(len(v) for v in batches.values()))
        finally:
            c.close()

    def connection_churn(self) -> None:
        host, port = self.bootstrap.rsplit(":", 1)
        client_id = b"soak-churn"
        # Metadata v0 for all topics: api_key 3, version 0, correlation id, client id, [] topics
        body = struct.pack(">hhih", 3, 0, 1, len(client_id)) + client_id + struct.pack(">i", 0)
        frame = struct.pack(">i", len(body)) + body
        started, n = time.monotonic(), 0
        while not self.stop.is_set():
            with socket.create_connection((host, int(port)), timeout=10) as s:
                s.sendall(frame)
                size = struct.unpack(">i", _recv_exactly(s, 4))[0]
                answer = _recv_exactly(s, size)
                if struct.unpack(">i", answer[:4])[0] != 1:
                    raise RuntimeError("Metadata answer with another correlation id")
            self.counters.add("churn_connections")
            n += 1
            self._pace(started, n, CHURN_RATE)

    def http(self) -> None:
        pages = ["/", "/topics", "/groups", "/topics/soak-all", "/metrics"]
        with httpx.Client(timeout=10) as client:
            n = 0
            while not self.stop.is_set():
                base = self.metrics if n % 3 == 2 else self.console
                path = "/metrics" if base == self.metrics else pages[n % len(pages)]
                client.get(base + path).raise_for_status()
                self.counters.add("http_gets")
                n += 1
                self.stop.wait(HTTP_INTERVAL_S)


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = s.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks += chunk
    return bytes(chunks)


def create_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=cfg)
                                   for name, partitions, cfg in TOPICS])
    for f in futures.values():
        f.result(30)


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the broker exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.2)
    raise RuntimeError(f"the broker did not listen on {port} within {timeout_s} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float,
                        default=float(os.environ.get("SOAK_SECONDS", "3600")))
    parser.add_argument("--sample-s", type=float, default=None,
                        help="seconds between samples (default: 60, shorter for short runs)")
    parser.add_argument("--out", type=Path, default=Path("build/soak"))
    parser.add_argument("--plot", type=Path, default=None,
                        help="PNG of the plots (default: OUT/soak.png)")
    parser.add_argument("--judge", type=Path, default=None, metavar="CSV",
                        help="run nothing: judge and plot the samples of an earlier run")
    args = parser.parse_args()
    sample_s = args.sample_s or min(60.0, max(5.0, args.seconds / 30))
    warmup_s, window_s = min(300.0, args.seconds / 12), min(600.0, args.seconds / 6)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    plot_path = args.plot or out / "soak.png"
    if args.judge:
        return report(read_csv(args.judge), warmup_s, window_s, args.judge, plot_path)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        port, console_port, metrics_port = free_port(), free_port(), free_port()
        argv = [
            *broker_argv(port, f"{tmp}/data"),
            "--override", f"http.listener=http://127.0.0.1:{console_port}",
            "--override", f"metrics.listener=http://127.0.0.1:{metrics_port}",
            "--override", "log.cleaner.backoff.ms=2000",
            "--override", "log.retention.check.interval.ms=30000"]
        with (out / "broker.log").open("wb") as broker_log:
            # its own session: Ctrl-C reaches the driver only, which stops the broker after
            # writing what it has
            broker = subprocess.Popen(argv, stdout=broker_log, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        rows: list[dict[str, float]] = []
        workloads = None
        try:
            wait_for_port(port, broker)
            wait_for_port(metrics_port, broker)
            bootstrap = f"127.0.0.1:{port}"
            create_topics(bootstrap)
            latency_all, latency_one, counters = LatencyRecorder(), LatencyRecorder(), Counters()
            sampler = Sampler(broker.pid, f"http://127.0.0.1:{metrics_port}/metrics",
                              Path(tmp) / "data", Path(tmp) / "data" / "soak-compact-0",
                              latency_all, latency_one, counters)
            rows = sampler.rows
            sampler.sample()  # the stall detector's baseline; not a row of the run
            rows.clear()
            workloads = Workloads(bootstrap, f"http://127.0.0.1:{console_port}",
                                  f"http://127.0.0.1:{metrics_port}", stop, latency_all,
                                  latency_one, counters)
            workloads.start()
            print(f"soak: {args.seconds:.0f} s, a sample every {sample_s:.0f} s, broker pid "
                  f"{broker.pid}, CSV in {out / 'soak.csv'}", flush=True)
            deadline = time.monotonic() + args.seconds
            next_sample = time.monotonic() + sample_s
            while not stop.is_set() and time.monotonic() < deadline:
                stop.wait(max(0.0, min(next_sample, deadline) - time.monotonic()))
                if time.monotonic() >= next_sample and not stop.is_set():
                    if broker.poll() is not None:
                        raise RuntimeError(f"the broker exited with {broker.returncode}")
                    row = sampler.sample()
                    write_csv(rows, out / "soak.csv")
                    print(" ".join(f"{k}={row[k]}" for k in (
                        "elapsed_s", "rss_mb", "fds", "segment_fds", "loop_p99_ms",
                        "loop_stalls_100ms", "produce_p99_all_ms", "produce_p99_one_ms",
                        "compacted_kb", "load1", "errors")), flush=True)
                    next_sample += sample_s
        except KeyboardInterrupt:
            print("soak: interrupted, writing what it has", flush=True)
        finally:
            stop.set()
            stuck = workloads.join(30) if workloads else []
            if stuck:
                print(f"soak: workloads still running after 30 s: {stuck}", flush=True)
            broker.send_signal(signal.SIGTERM)
            try:
                broker.wait(30)
            except subprocess.TimeoutExpired:
                broker.kill()
                broker.wait()
    write_csv(rows, out / "soak.csv")
    return report(rows, warmup_s, window_s, out / "soak.csv", plot_path)


def report(rows: list[dict[str, float]], warmup_s: float, window_s: float, csv_path: Path,
           plot_path: Path) -> int:
    verdict = judge(rows, warmup_s=warmup_s, window_s=window_s)
    if rows:
        plot(rows, plot_path, f"trio-broker soak, {rows[-1]['elapsed_s'] / 60:.0f} min "
             f"({'pass' if verdict.passed else 'FAIL'})")
    print("\n".join(verdict.lines))
    print(f"soak: {'PASS' if verdict.passed else 'FAIL'} ({len(rows)} samples; CSV "
          f"{csv_path}, plots {plot_path})", flush=True)
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
