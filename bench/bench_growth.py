"""How cost grows: memory per idle connection, start-up per topic, throughput per partition/client.

Run: ``.venv/bin/python bench/bench_growth.py [--connections 10000] [--topics 2000]``. Not part
of the test suite. Each figure is printed next to a same-run reference, and each part draws its
plot (PNG, written by this script) into ``docs/img/``:

1. ``connections``: ``trio-broker serve`` in a subprocess and a bare Trio server
   (``trio.serve_tcp`` with a handler waiting in ``receive_some``) each get 0 ... ``--connections``
   idle connections from this process; the resident memory (``VmRSS``) of each server is read
   at every step. The fd limit is raised to the hard limit first.
3. ``sizes``: produce throughput against record size (10 B to 1 MB, about ``--mb`` MB each,
   acks=1, linger.ms=5, confluent-kafka) to ``trio-broker serve`` and, in the same run, to
   librdkafka's in-process mock broker (``test.mock.num.brokers=1``).
4. ``partitions``: produce throughput of 100-byte records spread round-robin over a topic of
   1 ... ``--partitions`` (10,000) partitions, to ``trio-broker serve``, then consume throughput
   of one confluent-kafka consumer reading them all back from every partition's start; the
   reference is the same run's one-partition figure (librdkafka's mock creates no topics
   through CreateTopics). The broker's open descriptors are counted at every step.
5. ``clients``: 1 ... ``--clients`` concurrent connections from one load process (Trio, raw
   Produce v7 frames of one 100-byte record, acks=1, one request in flight per connection) for
   ``--seconds`` each: requests/s and the p99 of request latency, against ``trio-broker serve``
   and, in the same run, a bare Trio server answering each frame with itself
   (``ECHO_FRAME_SERVER``) and librdkafka's in-process mock broker.
2. ``topics``: one data directory grows to 0 ... ``--topics`` one-partition topics (created over
   the wire with confluent-kafka's AdminClient); at every step the broker is stopped (SIGTERM
   to exit) and started again (process start to "listening"). The reference is the same start
   and stop with an empty data directory, in the same run.
6. ``recovery``: start-up and recovery time against log size (``growth_recovery.py``), each
   size's timing under ``flock --lock`` when given, the writing outside it.

Figures go to docs/benchmarks.md ("How cost grows").
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from growth_common import broker_argv as _broker_argv
from growth_common import clients_load
from growth_common import cpu_s as _cpu_s
from growth_common import free_port as _free_port

IMG = Path(__file__).resolve().parent.parent / "docs" / "img"

BARE_SERVER = r"""
import sys, trio
async def handle(stream):
    try:
        while await stream.receive_some(65536):
            pass
    except trio.BrokenResourceError:
        pass
async def main():
    async with trio.open_nursery() as n:
        await n.start(trio.serve_tcp, handle, int(sys.argv[1]))
        print("listening on", flush=True)
trio.run(main)
"""

#: the ``clients`` step's floor: a Trio server that answers each size-prefixed frame with the
#: frame itself (or, given a second argument, with a frame of that many bytes), one task per
#: connection, one request read and answered at a time
ECHO_FRAME_SERVER = r"""
import sys, trio
SIZE = int(sys.argv[2]) if len(sys.argv) > 2 else None
ANSWER = None if SIZE is None else SIZE.to_bytes(4, "big") + bytes(SIZE)
async def handle(stream):
    buf = bytearray()
    try:
        while data := await stream.receive_some(65536):
            buf += data
            while len(buf) >= 4 and len(buf) >= 4 + (size := int.from_bytes(buf[:4], "big")):
                frame = ANSWER or bytes(buf[:4 + size])
                del buf[:4 + size]
                await stream.send_all(frame)
    except trio.BrokenResourceError:
        pass
async def main():
    async with trio.open_nursery() as n:
        await n.start(trio.serve_tcp, handle, int(sys.argv[1]))
        print("listening on", flush=True)
trio.run(main)
"""


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def _start(argv: list[str]) -> tuple[subprocess.Popen[str], float]:
    """Start a server; (process, seconds from start to its "listening" line)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "listening on" in line:
            return proc, time.perf_counter() - t0
    raise RuntimeError(f"{argv[:4]} exited at start")


def _stop(proc: subprocess.Popen[str]) -> float:
    """SIGTERM; seconds to exit."""
    t0 = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    proc.wait(120)
    return time.perf_counter() - t0


def _steps(limit: int, candidates: tuple[int, ...]) -> list[int]:
    return sorted({0, *[c for c in candidates if c < limit], limit})


def connections(limit: int) -> tuple[list[int], dict[str, list[float]]]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # this process holds the client ends of both servers' connections, one server at a time
    limit = min(limit, hard - 200)
    steps = _steps(limit, (100, 1000, 2500, 5000, 7500))
    rss: dict[str, list[float]] = {}
    data = tempfile.mkdtemp(prefix="bench-growth-")
    try:
        for name in ("trio-broker", "bare Trio"):
            port = _free_port()
            argv = (_broker_argv(port, data) if name == "trio-broker"
                    else [sys.executable, "-c", BARE_SERVER, str(port)])
            proc, _ = _start(argv)
            socks: list[socket.socket] = []
            rss[name] = []
            try:
                for step in steps:
                    while len(socks) < step:
                        socks.append(socket.create_connection(("127.0.0.1", port)))
                    time.sleep(1.0 + step / 5000)  # every accept handled, every task parked
                    rss[name].append(_rss_kib(proc.pid) / 1024)
                    print(f"[{name}] {step:6d} idle connections: RSS {rss[name][-1]:7.1f} MiB"
                          f"   (load {_load()})", flush=True)
            finally:
                for s in socks:
                    s.close()
                _stop(proc)
    finally:
        shutil.rmtree(data, ignore_errors=True)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    for name, values in rss.items():
        per = (values[-1] - values[0]) * 1024 / max(1, steps[-1])
        print(f"[{name}] memory per idle connection at {steps[-1]:,}: {per:.1f} KiB")
    return steps, rss


def topics(limit: int) -> tuple[list[int], dict[str, list[float]]]:
    from confluent_kafka.admin import AdminClient, NewTopic

    steps = _steps(limit, (100, 250, 500, 1000))
    data = tempfile.mkdtemp(prefix="bench-growth-")
    empty = tempfile.mkdtemp(prefix="bench-growth-empty-")
    out: dict[str, list[float]] = {"start": [], "stop": [], "start, empty": [],
                                   "stop, empty": []}
    try:
        created = 0
        for step in steps:
            port = _free_port()
            proc, _ = _start(_broker_argv(port, data))
            if step > created:
                admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
                for first in range(created, step, 100):
                    names = [f"t{i:05d}" for i in range(first, min(step, first + 100))]
                    futures = admin.create_topics([NewTopic(n, 1, 1) for n in names],
                                                  request_timeout=300)
                    for f in futures.values():
                        f.result()
                created = step
                del admin
            out["stop"].append(_stop(proc))
            proc, took = _start(_broker_argv(_free_port(), data))
            out["start"].append(took)
            _stop(proc)
            proc, took = _start(_broker_argv(_free_port(), empty))
            out["start, empty"].append(took)
            out["stop, empty"].append(_stop(proc))
            print(f"{step:6d} topics: start {out['start'][-1] * 1000:7.0f} ms, stop "
                  f"{out['stop'][-1] * 1000:7.0f} ms   (empty data dir, same run: start "
                  f"{took * 1000:5.0f} ms, stop {out['stop, empty'][-1] * 1000:5.0f} ms)"
                  f"   (load {_load()})", flush=True)
    finally:
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(empty, ignore_errors=True)
    return steps, out


SIZES = (10, 100, 1_000, 10_000, 100_000, 1_000_000)


def _produce_mb_s(bootstrap: str, topic: str, size: int, records: int,
                  partitions: int = 1) -> float:
    import confluent_kafka

    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "log_level": 0,
        "message.max.bytes": 2_000_000, "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576})
    producer.produce(topic, b"warm-up", partition=0)
    producer.flush(30)
    value = os.urandom(size)
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.001)
    if producer.flush(300):
        raise RuntimeError("records were not delivered")
    return records * size / 1e6 / (time.perf_counter() - started)


def sizes(total_mb: float) -> tuple[list[int], dict[str, list[float]]]:
    import confluent_kafka

    out: dict[str, list[float]] = {"trio-broker": [], "librdkafka mock": []}
    data = tempfile.mkdtemp(prefix="bench-growth-")
    port = _free_port()
    proc, _ = _start([*_broker_argv(port, data), "--override", "message.max.bytes=2000000"])
    mock = confluent_kafka.Producer({"test.mock.num.brokers": 1, "bootstrap.servers": "",
                                     "log_level": 0})
    mock_bootstrap = ",".join(f"{b.host}:{b.port}"
                              for b in mock.list_topics(timeout=10).brokers.values())
    try:
        for size in SIZES:
            records = max(100, min(500_000, int(total_mb * 1e6 / size)))
            cpu_before = _cpu_s(proc.pid)
            out["trio-broker"].append(_produce_mb_s(f"127.0.0.1:{port}", f"size-{size}", size,
                                                    records))
            cpu_per_gb = (_cpu_s(proc.pid) - cpu_before) / (records * size / 1e9)
            out["librdkafka mock"].append(_produce_mb_s(mock_bootstrap, f"size-{size}", size,
                                                        records))
            ours, theirs = out["trio-broker"][-1], out["librdkafka mock"][-1]
            print(f"{size:9,d} B x {records:7,d}: trio-broker {ours:7.1f} MB/s "
                  f"({ours * 1e6 / size:10,.0f} rec/s, broker CPU {cpu_per_gb:.2f} s/GB), "
                  f"mock {theirs:7.1f} MB/s, ratio {ours / theirs:.2f}   (load {_load()})",
                  flush=True)
    finally:
        _stop(proc)
        shutil.rmtree(data, ignore_errors=True)
    return list(SIZES), out


def _consume_rec_s(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    """Records/s of one confluent-kafka consumer reading ``records`` from every partition's
    start (``fetch.queue.backoff.ms=1``, as bench_produce_consume.py; ``poll`` per record)."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "growth", "enable.auto.commit": False,
        "fetch.queue.backoff.ms": 1, "log_level": 0})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 600
    try:
        while got < records and time.monotonic() < deadline:
            for message in consumer.consume(min(10_000, records - got), 1.0):
                if message.error() is None:
                    got += 1
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    if got < records:
        raise RuntimeError(f"consumed {got} of {records} records")
    return records / elapsed


def _produce_p99_ms(bootstrap: str, topic: str, partitions: int, rate: int = 5000,
                    seconds: float = 3.0) -> float:
    """p99 of produce() -> delivery report, 100 B records round-robin over ``partitions`` at
    ``rate`` records/s (linger.ms=0, acks=1): the produce latency a paced producer sees."""
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1,
                                         "linger.ms": 0, "log_level": 0})
    producer.produce(topic, b"warm-up", partition=0)
    producer.flush(30)
    latencies: list[float] = []
    value = bytes(100)
    count = int(rate * seconds)
    started = time.perf_counter()
    for i in range(count):
        due = started + i / rate
        while (now := time.perf_counter()) < due:
            producer.poll(min(0.001, due - now))
        producer.produce(topic, value, partition=i % partitions,
                         on_delivery=lambda err, msg, t0=now: latencies.append(
                             time.perf_counter() - t0))
        producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("records were not delivered")
    latencies.sort()
    return latencies[int(0.99 * (len(latencies) - 1))] * 1000


def partitions(limit: int, records: int,
               ) -> tuple[list[int], dict[str, list[float]], list[float]]:
    from confluent_kafka.admin import AdminClient, NewTopic

    steps = sorted({c for c in (1, 10, 100, 1000, 10_000) if c < limit} | {limit})
    out: dict[str, list[float]] = {"trio-broker produce": [], "trio-broker consume": []}
    p99s: list[float] = []
    data = tempfile.mkdtemp(prefix="bench-growth-")
    port = _free_port()
    bootstrap = f"127.0.0.1:{port}"
    proc, _ = _start(_broker_argv(port, data))
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        base_fds = len(os.listdir(f"/proc/{proc.pid}/fd"))
        total = 0
        for n in steps:
            started = time.perf_counter()
            admin.create_topics([NewTopic(f"p-{n}", n, 1)],
                                request_timeout=600)[f"p-{n}"].result(600)
            created = time.perf_counter() - started
            total += n
            fds = len(os.listdir(f"/proc/{proc.pid}/fd"))
            print(f"{n:6,d} partitions created in {created:.1f} s; the broker holds {fds:,d} "
                  f"descriptors ({base_fds} before any topic): "
                  f"{(fds - base_fds) / total:.2f} per partition over {total:,d}", flush=True)
            produced = out["trio-broker produce"]
            produced.append(_produce_mb_s(bootstrap, f"p-{n}", 100, records, n) * 1e4)
            consumed = out["trio-broker consume"]
            # + 1: the warm-up record of _produce_mb_s
            consumed.append(_consume_rec_s(bootstrap, f"p-{n}", n, records + 1))
            p99s.append(_produce_p99_ms(bootstrap, f"p-{n}", n))
            print(f"{n:6,d} partitions: produce {produced[-1]:10,.0f} rec/s "
                  f"({produced[-1] / produced[0]:.2f} of one partition's), consume "
                  f"{consumed[-1]:10,.0f} rec/s ({consumed[-1] / consumed[0]:.2f}), produce p99 "
                  f"at 5,000 rec/s {p99s[-1]:.2f} ms ({p99s[-1] / p99s[0]:.2f})   "
                  f"(load {_load()})", flush=True)
    finally:
        _stop(proc)
        shutil.rmtree(data, ignore_errors=True)
    return steps, out, p99s




def clients(limit: int, seconds: float) -> tuple[list[int], dict[str, list[float]]]:
    """Produce requests/s and p99 against concurrent connections, trio-broker and the mock."""
    import confluent_kafka

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    steps = sorted({c for c in (1, 10, 100, 1000) if c < limit} | {limit})
    names = ("trio-broker", "bare Trio", "librdkafka mock")
    out: dict[str, list[float]] = {f"{name} {unit}": [] for unit in ("req/s", "p99 ms")
                                   for name in names}
    data = tempfile.mkdtemp(prefix="bench-growth-")
    port, echo_port = _free_port(), _free_port()
    proc, _ = _start(_broker_argv(port, data))
    echo, _ = _start([sys.executable, "-c", ECHO_FRAME_SERVER, str(echo_port)])
    mock = confluent_kafka.Producer({"test.mock.num.brokers": 1, "bootstrap.servers": "",
                                     "log_level": 0})
    mock_bootstrap = ",".join(f"{b.host}:{b.port}"
                              for b in mock.list_topics(timeout=10).brokers.values())
    try:
        for bootstrap in (f"127.0.0.1:{port}", mock_bootstrap):
            confluent_kafka.Producer({"bootstrap.servers": bootstrap}).list_topics(
                "clients", timeout=10)  # auto-created by both
        for n in steps:
            for name, bootstrap in zip(names, (f"127.0.0.1:{port}", f"127.0.0.1:{echo_port}",
                                               mock_bootstrap), strict=True):
                rate, p99, _ = clients_load(bootstrap, n, seconds, 1)
                out[f"{name} req/s"].append(rate)
                out[f"{name} p99 ms"].append(p99)
            figures = "; ".join(f"{name} {out[f'{name} req/s'][-1]:8,.0f} req/s, p99 "
                                f"{out[f'{name} p99 ms'][-1]:7.2f} ms" for name in names)
            broker, bare = out["trio-broker req/s"][-1], out["bare Trio req/s"][-1]
            print(f"{n:5,d} clients: {figures}; broker/bare {broker / bare:.2f}x, p99 broker/mock "
                  f"{out['trio-broker p99 ms'][-1] / out['librdkafka mock p99 ms'][-1]:.1f}x"
                  f"   (load {_load()})", flush=True)
    finally:
        _stop(proc)
        _stop(echo)
        mock.flush(1)
        shutil.rmtree(data, ignore_errors=True)
    return steps, out


def plot(path: Path, title: str, xlabel: str, ylabel: str, steps: list[int],
         series: dict[str, list[float]], scale: float = 1.0, logx: bool = False,
         logy: bool = False) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    for name, values in series.items():
        ax.plot(steps, [v * scale for v in values], marker="o", label=name)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    IMG.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"plot: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=2000)
    parser.add_argument("--mb", type=float, default=50.0, help="MB per record size")
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--records", type=int, default=300_000,
                        help="records per partition count")
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per clients step")
    parser.add_argument("--gb", type=float, nargs="+", default=[1, 2, 5, 10, 20],
                        help="log sizes of the recovery part")
    parser.add_argument("--lock", help="flock this file around each recovery timing")
    parser.add_argument("--only", choices=("connections", "topics", "sizes", "partitions",
                                           "clients", "recovery"))
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {_load()}")
    if args.only in (None, "connections"):
        steps, rss = connections(args.connections)
        plot(IMG / "growth-connections.png", "Resident memory vs idle connections",
             "idle connections", "RSS (MiB)", steps, rss)
    if args.only in (None, "topics"):
        steps, times = topics(args.topics)
        plot(IMG / "growth-topics.png", "Start-up and shutdown vs topics (1 partition each)",
             "topics", "seconds", steps, times)
    if args.only in (None, "sizes"):
        steps, rates = sizes(args.mb)
        plot(IMG / "growth-record-size.png", "Produce throughput vs record size (acks=1)",
             "record size (bytes)", "MB/s", steps, rates, logx=True)
    if args.only in (None, "partitions"):
        steps, rates, p99s = partitions(args.partitions, args.records)
        plot(IMG / "growth-partitions.png",
             "Produce and consume throughput vs partitions (100 B, acks=1)",
             "partitions", "records/s", steps, rates, logx=True)
        plot(IMG / "growth-partitions-p99.png",
             "Produce p99 vs partitions (100 B at 5,000 records/s, linger.ms=0)",
             "partitions", "p99 (ms)", steps, {"trio-broker": p99s}, logx=True)

    if args.only in (None, "clients"):
        steps, series = clients(args.clients, args.seconds)
        plot(IMG / "growth-clients.png", "Produce requests/s vs concurrent clients (100 B, acks=1)",
             "concurrent connections, one request in flight each", "requests/s", steps,
             {k: v for k, v in series.items() if k.endswith("req/s")}, logx=True)
        plot(IMG / "growth-clients-p99.png", "Produce p99 vs concurrent clients (100 B, acks=1)",
             "concurrent connections, one request in flight each", "p99 (ms)", steps,
             {k: v for k, v in series.items() if k.endswith("p99 ms")}, logx=True)
    if args.only in (None, "recovery"):
        recovery(args.gb, args.lock)


def recovery(sizes_gb: list[float], lock: str | None) -> None:
    import growth_recovery

    runs = [growth_recovery.run_size(gb, lock) for gb in sizes_gb]
    gbs = [r["bytes"] / 1e9 for r in runs]
    series = {"read the log once (cold cache)": [r["read"] for r in runs],
              "clean start, to first fetch": [r["clean fetch"] for r in runs],
              "after kill -9, to first fetch": [r["kill -9 fetch"] for r in runs],
              "kill -9, no checkpoint (re-reads all)": [r["no checkpoint fetch"] for r in runs],
              "empty log dir, to first fetch": [r["empty fetch"] for r in runs]}
    plot(IMG / "growth-recovery.png", "Start-up and recovery vs log size (one partition)",
         "log size (GB)", "seconds", gbs, series)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
