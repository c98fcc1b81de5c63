"""Performance at scale, each figure beside a reference measured in the same run.

Run: ``.venv/bin/python bench/bench_scale.py [--only clients|big|export|latency]``. Not part of
the test suite; ``make bench`` runs it. Four steps:

1. ``clients``: Produce requests/s and p99 at 1 / 100 / 1,000 connections (``--clients``), one
   request in flight each, one 100-byte record per Produce v7 request with acks=1, the
   connections spread over ``--load-processes`` load processes (Trio, raw frames) that start
   measuring together. Against the same load, one server after the other: trio-broker, a bare
   Trio server answering each size-prefixed frame with a small frame (one task per connection:
   the floor a Trio broker pays) and librdkafka's mock broker. Each server's CPU seconds per
   request are printed beside its rate: when a server's CPU is under one core its rate is the
   load's, not its own.
2. ``big``: confluent-kafka producing ``--mb`` MB of 10 KB, 100 KB and 1 MB records (acks=1,
   linger.ms=5) to trio-broker and to the mock, then consuming them back from trio-broker; the
   broker's CPU seconds per GB produced and consumed (the mock keeps only the newest ~5 MB of a
   partition, so it has no consume figure).
3. ``export``: ``trio-broker export`` of ``--records`` records with a cache directory that holds
   no class archive (a new user's first export), then again once the archive its first run
   started writing in the background is there; ``--writer spark`` once as the reference.
4. ``latency``: ``--producers`` confluent-kafka producers (each its own connection, spread over
   ``--load-processes`` processes; acks=1 and ``--linger-ms``, 0 as in the 10,000 msg/s latency
   goal of bench_produce_consume.py, the rest at librdkafka's defaults) producing ``--rate``
   msg/s in all (each ``--rate``) to one partition for ``--seconds``, each value stamped with
   its send time; one consumer reads them back with ``poll()`` (fetch.queue.backoff.ms=1; on
   the mock fetch.wait.max.ms=1 too, as new data does not wake its waiting fetches): p50 / p99
   / p99.9 of receive minus send, on trio-broker and on the mock, ``--runs`` runs each,
   alternating; the servers' and the load processes' CPU seconds beside them, and (counted by
   the broker's metrics endpoint) the Produce requests a record and each side's CPU a record:
   what the rate asks of this machine's two cores.

Plots go to ``docs/img/scale-*.png``; figures to docs/benchmarks.md ("Scale").
"""

from __future__ import annotations

import argparse
import math
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench_growth import (
    ECHO_FRAME_SERVER,
    _load,
    _produce_mb_s,
    _start,
    _stop,
    plot,
)
from growth_common import broker_argv, clients_load, free_port, percentile
from growth_common import cpu_s as _cpu_s

IMG = Path(__file__).resolve().parent.parent / "docs" / "img"

#: a Produce v7 answer's size: the bare server's answer to each frame
SMALL_ANSWER_BYTES = 56

def _raise_fd_limit() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


#: librdkafka's mock cluster of one broker in a process of its own (its CPU is its own, and no
#: client of the benchmark shares its process); prints its bootstrap servers
MOCK_BROKER = r"""
import sys, time, confluent_kafka
handle = confluent_kafka.Producer({"test.mock.num.brokers": 1, "bootstrap.servers": "",
                                   "log_level": 0})
brokers = handle.list_topics(timeout=10).brokers.values()
print("listening on " + ",".join(f"{b.host}:{b.port}" for b in brokers), flush=True)
sys.stdin.read()
"""


def _mock() -> tuple[subprocess.Popen[str], str]:
    """librdkafka's mock broker in a process of its own, and its bootstrap servers; it exits
    when its stdin closes (``_stop_mock``)."""
    proc = subprocess.Popen([sys.executable, "-c", MOCK_BROKER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        raise RuntimeError("the mock broker did not start")
    return proc, line.split()[-1]


def _stop_mock(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(30)


def clients(limit: int, seconds: float, processes: int) -> None:
    """Step 1: trio-broker, the bare Trio server and the mock at 1 ... ``limit`` connections."""
    import confluent_kafka

    _raise_fd_limit()
    steps = sorted({c for c in (1, 100, 1000) if c < limit} | {limit})
    names = ("trio-broker", "bare Trio", "librdkafka mock")
    rates: dict[str, list[float]] = {name: [] for name in names}
    p99s: dict[str, list[float]] = {name: [] for name in names}
    data = tempfile.mkdtemp(prefix="bench-scale-")
    port, bare_port = free_port(), free_port()
    broker, _ = _start(broker_argv(port, data))
    bare, _ = _start([sys.executable, "-c", ECHO_FRAME_SERVER, str(bare_port),
                      str(SMALL_ANSWER_BYTES)])
    mock, mock_bootstrap = _mock()
    servers = {"trio-broker": (f"127.0.0.1:{port}", broker.pid),
               "bare Trio": (f"127.0.0.1:{bare_port}", bare.pid),
               "librdkafka mock": (mock_bootstrap, mock.pid)}
    try:
        for bootstrap in (f"127.0.0.1:{port}", mock_bootstrap):
            confluent_kafka.Producer({"bootstrap.servers": bootstrap}).list_topics(
                "clients", timeout=10)  # auto-created by both
        for n in steps:
            line = []
            for name in names:
                bootstrap, pid = servers[name]
                rate, p99, cpu_us = clients_load(bootstrap, n, seconds, processes, pid)
                rates[name].append(rate)
                p99s[name].append(p99)
                cost = "" if cpu_us is None else f", {cpu_us:.0f} µs CPU/req"
                line.append(f"{name} {rate:8,.0f} req/s p99 {p99:8.2f} ms{cost}")
            ratio = rates["trio-broker"][-1] / rates["bare Trio"][-1]
            tail = p99s["trio-broker"][-1] / p99s["librdkafka mock"][-1]
            print(f"{n:5,d} connections ({processes} load processes): " + "; ".join(line)
                  + f"; broker/bare {ratio:.2f}x, p99 broker/mock {tail:.1f}x"
                  f"   (load {_load()})", flush=True)
    finally:
        _stop(broker)
        _stop(bare)
        _stop_mock(mock)
        shutil.rmtree(data, ignore_errors=True)
    plot(IMG / "scale-clients.png", "Produce requests/s vs connections (100 B, acks=1)",
         "connections", "requests/s", steps, rates, logx=True)
    plot(IMG / "scale-clients-p99.png", "Produce p99 vs connections (100 B, acks=1)",
         "connections", "p99 ms", steps, p99s, logx=True)


def _consume_mb_s(bootstrap: str, topic: str, records: int) -> float:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"scale-{time.time_ns()}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 0,
        "fetch.message.max.bytes": 2_000_000})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got = size = 0
    started = time.perf_counter()
    deadline = started + 300
    while got < records and time.perf_counter() < deadline:
        # never more than the records left: consume(N) returns once it has N or times out
        for message in consumer.consume(min(1000, records - got), 1.0):
            if message.error() is None:
                got += 1
                size += len(message.value())
    elapsed = time.perf_counter() - started
    consumer.close()
    if got < records:
        raise RuntimeError(f"consumed {got} of {records} records")
    return size / 1e6 / elapsed


def big(total_mb: float) -> None:
    """Step 2: big records, trio-broker against the mock; the broker's CPU per GB."""
    sizes = (10_000, 100_000, 1_000_000)
    series: dict[str, list[float]] = {"trio-broker": [], "librdkafka mock": []}
    data = tempfile.mkdtemp(prefix="bench-scale-")
    port = free_port()
    broker, _ = _start([*broker_argv(port, data), "--override", "message.max.bytes=2000000"])
    mock, mock_bootstrap = _mock()
    bootstrap = f"127.0.0.1:{port}"
    try:
        for size in sizes:
            records = max(100, int(total_mb * 1e6 / size))
            topic = f"big-{size}"
            cpu = _cpu_s(broker.pid)
            ours = _produce_mb_s(bootstrap, topic, size, records)
            produce_cpu = (_cpu_s(broker.pid) - cpu) / (records * size / 1e9)
            theirs = _produce_mb_s(mock_bootstrap, topic, size, records)
            cpu = _cpu_s(broker.pid)
            consumed = _consume_mb_s(bootstrap, topic, records + 1)  # + the warm-up record
            consume_cpu = (_cpu_s(broker.pid) - cpu) / (records * size / 1e9)
            series["trio-broker"].append(ours)
            series["librdkafka mock"].append(theirs)
            print(f"{size:9,d} B x {records:6,d}: produce trio-broker {ours:7.1f} MB/s "
                  f"(broker CPU {produce_cpu:.2f} s/GB), mock {theirs:7.1f} MB/s, ratio "
                  f"{ours / theirs:.2f}; consume trio-broker {consumed:7.1f} MB/s (broker CPU "
                  f"{consume_cpu:.2f} s/GB)   (load {_load()})", flush=True)
    finally:
        _stop(broker)
        _stop_mock(mock)
        shutil.rmtree(data, ignore_errors=True)
    plot(IMG / "scale-big-records.png", f"Produce MB/s by record size ({total_mb:.0f} MB each)",
         "record bytes", "MB/s", list(sizes), series, logx=True)


def export(records: int) -> None:
    """Step 3: the first export with no class archive, the second, and Spark's writer."""
    from bench_export import produce, trio_broker
    from bench_export_start import run_export, wait_for_archive

    cache = Path(tempfile.mkdtemp(prefix="bench-scale-cache-"))
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "BENCH_JAVA_OPTIONS": ""}
    out_root = Path(tempfile.mkdtemp(prefix="bench-scale-export-"))
    try:
        with trio_broker() as bootstrap:
            produce(bootstrap, "exported", records, 4, "none")
            runs = [("first (no class archive)", "creating"), ("second", "short"),
                    ("--writer spark reference", "default")]
            for i, (label, way) in enumerate(runs):
                wall, cpu, _ = run_export(way, bootstrap, "exported", out_root / str(i),
                                          "local[2]", env=env)
                print(f"export of {records:,d} records, {label}: {wall:.1f} s end to end, "
                      f"CPU {sum(cpu.values()):.1f} s   (load {_load()})", flush=True)
                if way == "creating":
                    waited = wait_for_archive(cache / "trio-broker")
                    print(f"  the class archive was written {waited:.1f} s after the first "
                          "export returned", flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(out_root, ignore_errors=True)


#: one latency load process: ``producers`` confluent-kafka producers at their defaults, each
#: sending ``rate`` msg/s stamped with the send time, from ``start_at`` for ``seconds``
LATENCY_PRODUCERS = r"""
import sys, time, confluent_kafka
bootstrap, producers, rate, start_at, seconds, linger = (sys.argv[1], int(sys.argv[2]),
    float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), sys.argv[6])
clients = [confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1,
                                     "linger.ms": linger}) for _ in range(producers)]
for p in clients:
    p.list_topics("latency", timeout=30)
pad = bytes(84)
interval = 1 / (rate * producers)
time.sleep(max(0.0, start_at - time.time()))
sent, started = 0, time.perf_counter()
while (elapsed := time.perf_counter() - started) < seconds:
    due = int(elapsed / interval)
    while sent < due:
        clients[sent % producers].produce("latency", time.time_ns().to_bytes(16, "big") + pad,
                                          partition=0)
        sent += 1
    for p in clients:
        p.poll(0)
    time.sleep(0.0005)
for p in clients:
    p.flush(30)
print(sent, time.process_time())
"""


def _latency_run(bootstrap: str, rate: int, producers: int, seconds: float, processes: int,
                 linger_ms: float, mock: bool) -> tuple[int, int, float, list[float]]:
    """(records sent, received, the load processes' CPU seconds, sorted end-to-end latencies
    in ms) of one run; warm-up excluded."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"latency-{time.time_ns()}",
        "enable.auto.commit": False, "log_level": 0, "fetch.queue.backoff.ms": 1,
        "fetch.wait.max.ms": 1 if mock else 500})
    _, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition("latency", 0),
                                                timeout=10)
    consumer.assign([confluent_kafka.TopicPartition("latency", 0, high)])
    warm_up = 1.0
    start_at = time.time() + 3 + producers / 50
    shares = [producers // processes + (i < producers % processes) for i in range(processes)]
    procs = [subprocess.Popen([sys.executable, "-c", LATENCY_PRODUCERS, bootstrap, str(n),
                               repr(rate / producers), repr(start_at), str(seconds + warm_up),
                               str(linger_ms)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for n in shares if n]
    measure_from = int((start_at + warm_up) * 1e9)
    latencies: list[float] = []
    received = 0
    deadline = start_at + seconds + warm_up + 30
    total = None  # records the producers sent, once they have all exited
    while time.time() < deadline and (total is None or received < total):
        # poll() hands each record over as soon as it is there (consume(N) holds them back)
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            now = time.time_ns()
            sent = int.from_bytes(message.value()[:16], "big")
            received += 1
            if sent >= measure_from:
                latencies.append((now - sent) / 1e6)
        if (total is None and (message is None or received % 1000 == 0)
                and all(p.poll() is not None for p in procs)):
            total, load_cpu = 0, 0.0
            for proc in procs:
                out, err = proc.communicate()
                if proc.returncode:
                    raise RuntimeError(err[-2000:])
                total += int(out.split()[0])
                load_cpu += float(out.split()[1])
    consumer.close()
    if total is None:
        raise RuntimeError("the producers did not finish")
    if received < total and not mock:
        raise RuntimeError(f"received {received} of {total} records")
    latencies.sort()
    return total, received, load_cpu, latencies


def _produce_requests(metrics_port: int) -> float:
    """Produce requests the broker has counted (``RequestsPerSec``, every version)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(float(m[1]) for m in re.finditer(
        r'kafka_network_requestmetrics_requests_total\{request="Produce"[^}]*\} (\S+)', text))


def latency(rates: list[int], producers: int, seconds: float, processes: int, runs: int,
            linger_ms: float) -> None:
    """Step 4: end-to-end latency under each of ``rates`` msg/s from ``producers``
    connections."""
    import confluent_kafka

    data = tempfile.mkdtemp(prefix="bench-scale-")
    port, metrics_port = free_port(), free_port()
    broker, _ = _start([*broker_argv(port, data),
                        "--override", f"metrics.listener=http://127.0.0.1:{metrics_port}"])
    mock, mock_bootstrap = _mock()
    p99s: dict[str, list[float]] = {"trio-broker": [], "librdkafka mock": []}
    try:
        for bootstrap in (f"127.0.0.1:{port}", mock_bootstrap):
            confluent_kafka.Producer({"bootstrap.servers": bootstrap}).list_topics(
                "latency", timeout=10)
        for rate in rates:
            best: dict[str, float] = {}
            for run in range(runs):
                order = [("trio-broker", f"127.0.0.1:{port}"),
                         ("librdkafka mock", mock_bootstrap)]
                for name, bootstrap in order if run % 2 == 0 else order[::-1]:
                    pid = broker.pid if name == "trio-broker" else mock.pid
                    cpu = _cpu_s(pid)
                    requests = _produce_requests(metrics_port)
                    sent, received, load_cpu, ms = _latency_run(
                        bootstrap, rate, producers, seconds, processes, linger_ms,
                        mock=name != "trio-broker")
                    used = _cpu_s(pid) - cpu
                    per_record = (
                        f"; {(_produce_requests(metrics_port) - requests) / sent:.2f} Produce "
                        f"requests, {used / sent * 1e6:.0f} µs of broker CPU and "
                        f"{load_cpu / sent * 1e6:.0f} µs of load CPU a record"
                        if name == "trio-broker" else "")
                    lost = (f" ({sent - received:,d} lost to the mock's retention: its consumer "
                            "fell behind)" if received < sent else "")
                    p99 = percentile(ms, 0.99)
                    if not lost:  # a run that lost records has no latency to plot
                        best[name] = min(best.get(name, p99), p99)
                    print(f"{rate:,d} msg/s run {run + 1} {name}: {producers} producers "
                          f"(linger.ms={linger_ms:g}), {received:,d} of {sent:,d} received"
                          f"{lost}: p50 {percentile(ms, 0.5):.2f} ms, p99 {p99:.2f} ms, "
                          f"p99.9 {percentile(ms, 0.999):.2f} ms; server CPU {used:.1f} s, "
                          f"load processes' CPU {load_cpu:.1f} s{per_record}   (load {_load()})",
                          flush=True)
            for name, values in p99s.items():
                values.append(best.get(name, math.nan))
    finally:
        _stop(broker)
        _stop_mock(mock)
        shutil.rmtree(data, ignore_errors=True)
    plot(IMG / "scale-latency-p99.png",
         f"End-to-end p99 vs rate, {producers} producers (best of {runs} runs)", "msg/s",
         "p99 ms", rates, p99s, logx=True, logy=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("clients", "big", "export", "latency"))
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5.0,
                        help="seconds per clients step and per latency run")
    parser.add_argument("--load-processes", type=int, default=2)
    parser.add_argument("--mb", type=float, default=150, help="MB per record size (big)")
    parser.add_argument("--records", type=int, default=200_000, help="records exported")
    parser.add_argument("--rate", type=int, action="append",
                        help="latency: msg/s in all (repeatable; default 10,000, 20,000, "
                             "50,000)")
    parser.add_argument("--producers", type=int, default=100)
    parser.add_argument("--linger-ms", type=float, default=0, help="latency: producers' linger.ms")
    parser.add_argument("--runs", type=int, default=3, help="latency runs per broker")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, load {_load()}",
          flush=True)
    if args.only in (None, "clients"):
        clients(args.clients, args.seconds, args.load_processes)
    if args.only in (None, "big"):
        big(args.mb)
    if args.only in (None, "export"):
        export(args.records)
    if args.only in (None, "latency"):
        latency(args.rate or [10_000, 20_000, 50_000], args.producers, args.seconds,
                args.load_processes, args.runs, args.linger_ms)


if __name__ == "__main__":
    main()
