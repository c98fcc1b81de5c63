"""Produce and consume throughput and end-to-end latency with confluent-kafka (librdkafka).

Run: ``.venv/bin/python bench/bench_produce_consume.py [--records 2000000]``. Not part of the
test suite. Starts ``trio-broker serve`` as a subprocess on a free loopback port with its data in
a temporary directory, then measures, with one partition and 100-byte values:

1. produce: ``--records`` records, acks=1, linger.ms=5, librdkafka's default batching;
2. consume: all of them back from offset 0, ``consume(num_messages=10000)`` with
   fetch.queue.backoff.ms=1, then in rounds (below);
3. end-to-end latency at a steady ``--rate`` msg/s with linger.ms=0 for ``--seconds``: the
   producer stamps each value with the send time, a consumer in the same process (its own
   thread) reads it back; p50/p99/p99.9 of receive time minus send time.

The same three are measured against librdkafka's own in-process mock broker
(``test.mock.num.brokers=1``), the client-side ceiling, and the ratio is printed. The mock keeps
only the newest ~5 MB of a partition, so a consume of 200 MB from offset 0 cannot be measured on
it: both brokers are also timed consuming ``--records`` in rounds of ``MOCK_ROUND`` records, each
produced (untimed) just before it is consumed, and the consume ratio compares those rounds.

How a round is consumed decides what it measures. The old method kept the consumer assigned
while the round was produced: librdkafka prefetched all of it during the untimed production (the
consumer held all 20,000 records when the clock started), so the timed part was its local
dequeuing, not the broker's fetch. Pausing the partition during the production empties its
queue (librdkafka purges it on pause) but the first record then comes ~0.9 s after ``resume()``
on either broker (the client's own delay). So the partition is unassigned while a round is
produced and assigned at the round's first offset when the clock starts: every record of the
round is fetched inside the timed part, on both brokers alike (the bench prints how many records
the consumer held at the start: 0 is expected). The consume figure of the mock is that; ours is
printed both ways, with the old method's figures and the read from offset 0 for comparison.
Figures go to docs/benchmarks.md ("Produce and consume (confluent-kafka)").
"""

from __future__ import annotations

import argparse
import os
import platform
import select
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

import confluent_kafka

VALUE_BYTES = 100
#: records per consume round against the mock broker (well under its ~5 MB partition limit)
MOCK_ROUND = 20_000
#: the mock answers an empty fetch only when its max wait is over (new data does not wake it),
#: so its consumers poll with a short wait; ours keep librdkafka's default of 500 ms
MOCK_FETCH_WAIT_MS = 1
_STAMP = struct.Struct(">q")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def trio_broker(overrides: list[str], nice: int = 0) -> Iterator[tuple[str, int]]:
    """``trio-broker serve`` in a subprocess: yields (bootstrap servers, pid)."""
    port = _free_port()
    data = tempfile.mkdtemp(prefix="bench-broker-")
    argv = [sys.executable, "-m", "trio_broker", "serve",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={data}", "--override", "log.level=WARNING"]
    for item in overrides:
        argv += ["--override", item]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE)
    if nice:
        os.setpriority(os.PRIO_PROCESS, proc.pid, nice)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        while True:
            ready, _, _ = select.select([proc.stdout], [], [], max(0, deadline - time.monotonic()))
            if not ready:
                raise RuntimeError("the broker did not start within 30 s")
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("the broker exited at start")
            if b"listening on" in line:
                break
        yield f"127.0.0.1:{port}", proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(data, ignore_errors=True)


@contextmanager
def mock_broker() -> Iterator[tuple[str, int]]:
    """librdkafka's in-process mock cluster with one broker."""
    holder = confluent_kafka.Producer({"test.mock.num.brokers": 1, "bootstrap.servers": "",
                                       "log_level": 0})
    brokers = holder.list_topics(timeout=10).brokers
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in brokers.values())
    try:
        yield bootstrap, os.getpid()
    finally:
        holder.flush(1)


def _wait_for_topic(bootstrap: str, topic: str) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 10
    while True:
        md = producer.list_topics(topic, timeout=5).topics.get(topic)
        if md is not None and md.error is None and 0 in md.partitions:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} did not appear: {md and md.error}")
        time.sleep(0.05)


def create_topic(bootstrap: str, topic: str, mock: bool) -> None:
    if not mock:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    _wait_for_topic(bootstrap, topic)  # the mock cluster auto-creates on Metadata


def bench_produce(bootstrap: str, topic: str, records: int) -> float:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576})
    value = os.urandom(VALUE_BYTES)
    produce = producer.produce
    poll = producer.poll
    started = time.perf_counter()
    for _ in range(records):
        try:
            produce(topic, value, partition=0)
        except BufferError:
            poll(0.001)
            produce(topic, value, partition=0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - started
    if remaining:
        raise RuntimeError(f"{remaining} records were not delivered")
    return elapsed


def bench_consume(bootstrap: str, topic: str, records: int) -> float:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
        "fetch.queue.backoff.ms": 1})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    got = 0
    started = time.perf_counter()
    deadline = started + 120
    while got < records:
        batch = consumer.consume(num_messages=10_000, timeout=1.0)
        got += len(batch)
        if time.perf_counter() > deadline:
            raise RuntimeError(f"consumed only {got} of {records} records in 120 s")
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


class Rounds(NamedTuple):
    """A consume in rounds: seconds timed; records/s from each round's first fetched record
    to its last (without the time to the first record); median records the consumer held
    already when a round's clock started; median ms from the clock's start to the first
    record."""

    seconds: float
    after_first_rate: float
    queued_at_start: float
    first_ms: float


def bench_consume_rounds(bootstrap: str, topic: str, records: int, round_size: int,
                         fetch_wait_ms: int, fresh: bool) -> Rounds:
    """Consume time for ``records`` produced in rounds of ``round_size`` (timed: consume only).

    For the mock broker, which keeps only the newest ~5 MB of a partition: a consumer starting
    at the beginning of 200 MB would find its offsets deleted and jump to the end. ``fresh``:
    the partition is unassigned while a round is produced and assigned at the round's first
    offset when the clock starts, so every record is fetched inside the timed part; without it
    (the old method) the consumer stays assigned and prefetches the round while it is produced.
    """
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench-rounds", "enable.auto.commit": False,
        "fetch.queue.backoff.ms": 1, "fetch.wait.max.ms": fetch_wait_ms})
    part = confluent_kafka.TopicPartition(topic, 0)
    next_offset = consumer.get_watermark_offsets(part, timeout=10)[1]
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, next_offset)])
    elapsed = from_first = 0.0
    after_first = 0
    queued: list[int] = []
    firsts: list[float] = []
    done = -round_size  # one untimed warm-up round: connections and the fetch path set up
    while done < records:
        n = min(round_size, records - max(done, 0))
        if fresh:
            consumer.unassign()
        bench_produce(bootstrap, topic, n)
        started = time.perf_counter()
        if fresh:
            consumer.assign([confluent_kafka.TopicPartition(topic, 0, next_offset)])
        # what the consumer holds already when the clock starts (non-blocking)
        got = len(consumer.consume(num_messages=n, timeout=0))
        queued.append(got)
        first, first_got = (started, 0) if got else (0.0, 0)
        while got < n:
            batch = consumer.consume(num_messages=min(10_000, n - got), timeout=1.0)
            got += len(batch)
            if batch and not first:
                first, first_got = time.perf_counter(), got
            if time.perf_counter() - started > 60:
                raise RuntimeError(f"consumed only {got} of {n} records in 60 s")
        ended = time.perf_counter()
        if done >= 0:
            elapsed += ended - started
            from_first += ended - first
            after_first += n - first_got
            firsts.append((first - started) * 1000)
        done += n
        next_offset += n
    consumer.close()
    return Rounds(elapsed, after_first / from_first, statistics.median(queued[1:]),
                  statistics.median(firsts))


def bench_latency(bootstrap: str, topic: str, rate: int, seconds: float,
                  fetch_wait_ms: int = 500) -> list[float]:
    """Latencies (ms) of records produced at ``rate`` msg/s, linger.ms=0."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench-latency", "enable.auto.commit": False,
        "fetch.queue.backoff.ms": 1, "fetch.wait.max.ms": fetch_wait_ms})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_END)])
    # wait until the consumer sits at the end of the partition before producing
    while consumer.consume(num_messages=1, timeout=0.5):
        pass
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1,
                                         "linger.ms": 0})
    # Warm up: connections, metadata and the first fetch at the new end are set up before the
    # clock starts, or the first records' latency would be the producer's start-up time.
    producer.produce(topic, b"warm-up", partition=0)
    producer.flush(10)
    while consumer.poll(0.5) is None:
        pass
    total = int(rate * seconds)
    latencies: list[float] = []
    done = threading.Event()

    def receive() -> None:
        deadline = time.monotonic() + seconds + 30
        # poll() returns each record as soon as it is there; consume(num_messages=N) would
        # hold records back until N arrived or its timeout passed
        while len(latencies) < total and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is not None and m.error() is None:
                now = time.perf_counter_ns()
                latencies.append((now - _STAMP.unpack_from(m.value())[0]) / 1e6)
        done.set()

    thread = threading.Thread(target=receive)
    thread.start()
    padding = os.urandom(VALUE_BYTES - _STAMP.size)
    # Paced in 1 ms ticks: each tick sends the records due by then (10 at 10,000 msg/s) and
    # sleeps; a busy-wait per record would take a whole core from the broker on 2 cores.
    sent = 0
    started = time.perf_counter()
    while sent < total:
        due = min(total, int((time.perf_counter() - started) * rate) + 1)
        while sent < due:
            producer.produce(topic, _STAMP.pack(time.perf_counter_ns()) + padding, partition=0)
            sent += 1
        producer.poll(0)
        time.sleep(0.001)
    producer.flush(30)
    done.wait(seconds + 40)
    thread.join()
    consumer.close()
    if len(latencies) < total:
        raise RuntimeError(f"latency run received {len(latencies)} of {total} records")
    return latencies


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) of process ``pid``; ``None``: this process."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(name: str, bootstrap: str, args: argparse.Namespace, mock: bool,
        broker_pid: int | None = None) -> dict[str, float]:
    create_topic(bootstrap, "bench", mock)
    create_topic(bootstrap, "latency", mock)
    create_topic(bootstrap, "rounds", mock)
    mb = args.records * VALUE_BYTES / 1e6
    cpu = [(_cpu_s(broker_pid) if broker_pid else 0.0, _cpu_s(None))]
    produce_s = bench_produce(bootstrap, "bench", args.records)
    cpu.append((_cpu_s(broker_pid) if broker_pid else 0.0, _cpu_s(None)))
    print(f"[{name}] produce {args.records:,} x {VALUE_BYTES} B: {args.records / produce_s:,.0f} "
          f"rec/s, {mb / produce_s:,.1f} MB/s ({produce_s:.2f} s)", flush=True)
    if mock:
        fresh = bench_consume_rounds(bootstrap, "rounds", args.records, MOCK_ROUND,
                                     MOCK_FETCH_WAIT_MS, fresh=True)
        consume_s = fresh.seconds
    else:
        consume_s = bench_consume(bootstrap, "bench", args.records)
        print(f"[{name}] consume {args.records:,} from offset 0 (one read): "
              f"{args.records / consume_s:,.0f} rec/s, {mb / consume_s:,.1f} MB/s "
              f"({consume_s:.2f} s)", flush=True)
    cpu.append((_cpu_s(broker_pid) if broker_pid else 0.0, _cpu_s(None)))
    if not mock:
        fresh = bench_consume_rounds(bootstrap, "rounds", args.records, MOCK_ROUND, 500,
                                     fresh=True)
    prefetched = bench_consume_rounds(bootstrap, "rounds", args.records, MOCK_ROUND,
                                      MOCK_FETCH_WAIT_MS if mock else 500, fresh=False)
    for label, r in (("assigned per round, every record fetched in the timed part", fresh),
                     ("old method: assigned throughout, the round prefetched while produced",
                      prefetched)):
        print(f"[{name}] consume {args.records:,} in rounds of {MOCK_ROUND:,} ({label}): "
              f"{args.records / r.seconds:,.0f} rec/s ({r.seconds:.2f} s); from each round's "
              f"first record {r.after_first_rate:,.0f} rec/s; median records held at the "
              f"clock's start {r.queued_at_start:,.0f}, ms to the first record "
              f"{r.first_ms:.2f}", flush=True)
    per_m = 1e6 / args.records
    (b0, c0), (b1, c1), (b2, c2) = cpu
    where = "broker {:.2f}, client process {:.2f}" if broker_pid else (
        "client process with the mock inside {1:.2f}")
    print(f"[{name}] CPU s per million records: produce "
          f"{where.format((b1 - b0) * per_m, (c1 - c0) * per_m)}; consume "
          f"{where.format((b2 - b1) * per_m, (c2 - c1) * per_m)}"
          + (" (the mock's: the rounds assigned per round, their production included)"
             if mock else " (the read from offset 0)"),
          flush=True)
    latencies = bench_latency(bootstrap, "latency", args.rate, args.seconds,
                              MOCK_FETCH_WAIT_MS if mock else 500)
    p50, p99, p999 = (_pct(latencies, q) for q in (0.5, 0.99, 0.999))
    print(f"[{name}] end-to-end latency at {args.rate:,} msg/s, linger.ms=0, {args.seconds:g} s: "
          f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, p99.9 {p999:.2f} ms, "
          f"max {max(latencies):.2f} ms, mean {statistics.fmean(latencies):.2f} ms", flush=True)
    return {"produce": args.records / produce_s, "consume_read": args.records / consume_s,
            "consume": args.records / fresh.seconds, "consume_first": fresh.after_first_rate,
            "consume_prefetched": args.records / prefetched.seconds,
            "p50": p50, "p99": p99, "p999": p999}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--rate", type=int, default=10_000, help="latency run msg/s")
    parser.add_argument("--seconds", type=float, default=10.0, help="latency run length")
    parser.add_argument("--no-mock", action="store_true", help="skip the mock-broker baseline")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="broker config override (repeatable)")
    parser.add_argument("--nice", type=int, default=0,
                        help="scheduling priority of the broker and this process (e.g. -10, "
                             "needs root): on a shared machine, keeps other load from "
                             "preempting the measurement")
    args = parser.parse_args()
    if args.nice:
        os.setpriority(os.PRIO_PROCESS, 0, args.nice)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpu(s), Python "
          f"{platform.python_version()}, librdkafka {confluent_kafka.libversion()[0]}, "
          f"load average {os.getloadavg()[0]:.2f}, nice {args.nice}", flush=True)
    with trio_broker(args.override, args.nice) as (bootstrap, pid):
        print(f"trio-broker pid {pid} on {bootstrap}", flush=True)
        ours = run("trio-broker", bootstrap, args, mock=False, broker_pid=pid)
    if args.no_mock:
        return 0
    with mock_broker() as (bootstrap, _):
        theirs = run("librdkafka mock", bootstrap, args, mock=True)
    print("trio-broker / mock: produce {:.2f}x, consume {:.2f}x (rounds assigned per round; "
          "from the first record {:.2f}x), p99 latency {:.2f}x".format(
              ours["produce"] / theirs["produce"], ours["consume"] / theirs["consume"],
              ours["consume_first"] / theirs["consume_first"], ours["p99"] / theirs["p99"]))
    print("  not the same measurement, for comparison with earlier runs: our read from offset 0 "
          "/ the mock's prefetched rounds {:.2f}x; prefetched rounds on both {:.2f}x".format(
              ours["consume_read"] / theirs["consume_prefetched"],
              ours["consume_prefetched"] / theirs["consume_prefetched"]))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
