"""Produce and consume throughput and end-to-end latency with confluent-kafka (librdkafka).

Run: ``.venv/bin/python bench/bench_produce_consume.py [--records 2000000] [--runs 3]``. Not
part of the test suite. Starts ``trio-broker serve`` as a subprocess on a free loopback port with
its data in a temporary directory, then measures, with one partition and 100-byte values:

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

Both brokers run for the whole invocation and take turns: each produce, read and latency figure
is measured on one broker after the other, in an order that alternates from run to run, and the
consume rounds alternate round by round, so both meet the same machine. The figures are bound by
the client and swing from run to run (the produce rate is the CPU time of the thread calling
``produce()``, printed with it): ``--runs N`` repeats everything and prints each ratio's min /
median / max. The process's first produce is an untimed warm-up: it also pays for the client's
queue memory, which would penalise whichever broker came first.

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
from contextlib import ExitStack, contextmanager
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


class Produced(NamedTuple):
    """A produce run: seconds in all, seconds of them in the final ``flush()`` (the records
    still undelivered when the last ``produce()`` returned), and the CPU seconds of the thread
    that called ``produce()`` and the seconds it waited, runnable, for a CPU (Linux
    schedstat; 0 elsewhere): the rate is bound by that thread, so a slow run is either more CPU
    per record on the client's side or less CPU given to it."""

    seconds: float
    flush_seconds: float
    thread_cpu: float
    thread_waited: float


def _thread_waited() -> float:
    """Seconds the calling thread has waited on a run queue (0 without schedstat)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def bench_produce(bootstrap: str, topic: str, records: int) -> Produced:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576})
    value = os.urandom(VALUE_BYTES)
    produce = producer.produce
    poll = producer.poll
    cpu0, waited0 = time.thread_time(), _thread_waited()
    started = time.perf_counter()
    for _ in range(records):
        try:
            produce(topic, value, partition=0)
        except BufferError:
            poll(0.001)
            produce(topic, value, partition=0)
    flushing = time.perf_counter()
    remaining = producer.flush(120)
    ended = time.perf_counter()
    if remaining:
        raise RuntimeError(f"{remaining} records were not delivered")
    return Produced(ended - started, ended - flushing, time.thread_time() - cpu0,
                    _thread_waited() - waited0)


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


class Side(NamedTuple):
    """One broker under test: ``pid`` is the broker's process (``None``: the in-process mock)."""

    name: str
    bootstrap: str
    pid: int | None
    #: the consumers' ``fetch.wait.max.ms`` (see MOCK_FETCH_WAIT_MS)
    fetch_wait_ms: int

    @property
    def mock(self) -> bool:
        return self.pid is None

    def cpu(self) -> tuple[float, float]:
        """CPU seconds so far: (the broker's process, this process)."""
        return (_cpu_s(self.pid) if self.pid else 0.0), _cpu_s(None)


class Rounds(NamedTuple):
    """A consume in rounds: seconds timed; records/s from each round's first fetched record
    to its last (without the time to the first record); median records the consumer held
    already when a round's clock started; median ms from the clock's start to the first
    record; CPU seconds of (the broker, this process) over the rounds, production included."""

    seconds: float
    after_first_rate: float
    queued_at_start: float
    first_ms: float
    cpu: tuple[float, float]


class _RoundConsumer:
    """One broker's consumer of rounds; ``fresh``: see ``consume_rounds``."""

    def __init__(self, side: Side, topic: str, fresh: bool) -> None:
        self.side, self.topic, self.fresh = side, topic, fresh
        self.consumer = confluent_kafka.Consumer({
            "bootstrap.servers": side.bootstrap, "group.id": "bench-rounds",
            "enable.auto.commit": False, "fetch.queue.backoff.ms": 1,
            "fetch.wait.max.ms": side.fetch_wait_ms})
        part = confluent_kafka.TopicPartition(topic, 0)
        self.next_offset = self.consumer.get_watermark_offsets(part, timeout=10)[1]
        self.elapsed = self.from_first = 0.0
        self.after_first = 0
        self.queued: list[int] = []
        self.firsts: list[float] = []
        self.broker_cpu = self.client_cpu = 0.0

    def round(self, n: int, timed: bool) -> None:
        """Produce ``n`` records (untimed), then consume them (timed)."""
        consumer, topic = self.consumer, self.topic
        where = [confluent_kafka.TopicPartition(topic, 0, self.next_offset)]
        cpu0 = self.side.cpu()
        if not self.fresh:
            consumer.assign(where)
        bench_produce(self.side.bootstrap, topic, n)
        started = time.perf_counter()
        if self.fresh:
            consumer.assign(where)
        # what the consumer holds already when the clock starts (non-blocking)
        got = len(consumer.consume(num_messages=n, timeout=0))
        self.queued.append(got)
        first, first_got = (started, 0) if got else (0.0, 0)
        while got < n:
            batch = consumer.consume(num_messages=min(10_000, n - got), timeout=1.0)
            got += len(batch)
            if batch and not first:
                first, first_got = time.perf_counter(), got
            if time.perf_counter() - started > 60:
                raise RuntimeError(f"consumed only {got} of {n} records in 60 s")
        ended = time.perf_counter()
        # Unassigned between its rounds: an assigned consumer of the mock fetches every
        # MOCK_FETCH_WAIT_MS, which would load the client while the other broker's round runs.
        consumer.unassign()
        self.next_offset += n
        if timed:
            self.elapsed += ended - started
            self.from_first += ended - first
            self.after_first += n - first_got
            self.firsts.append((first - started) * 1000)
            cpu1 = self.side.cpu()
            self.broker_cpu += cpu1[0] - cpu0[0]
            self.client_cpu += cpu1[1] - cpu0[1]

    def close(self) -> Rounds:
        self.consumer.close()
        return Rounds(self.elapsed, self.after_first / self.from_first,
                      statistics.median(self.queued[1:]), statistics.median(self.firsts),
                      (self.broker_cpu, self.client_cpu))


def consume_rounds(sides: list[Side], topic: str, records: int, round_size: int,
                   fresh: bool) -> dict[str, Rounds]:
    """Consume time for ``records`` produced in rounds of ``round_size`` (timed: consume only),
    on each broker, the brokers' rounds interleaved (one round each in turn) so that both meet
    the same machine: measured one broker after the other, the time to a round's first record
    drifted by 2-4 ms between the two halves of a run, more than the brokers differ.

    For the mock broker, which keeps only the newest ~5 MB of a partition: a consumer starting
    at the beginning of 200 MB would find its offsets deleted and jump to the end. ``fresh``:
    the partition is unassigned while a round is produced and assigned at the round's first
    offset when the clock starts, so every record is fetched inside the timed part; without it
    (the old method) the consumer is assigned before the round is produced and prefetches it.
    Either way it is unassigned when its round is over.
    """
    consumers = [_RoundConsumer(side, topic, fresh) for side in sides]
    done = -round_size  # one untimed warm-up round: connections and the fetch path set up
    while done < records:
        n = min(round_size, records - max(done, 0))
        for c in consumers:
            c.round(n, timed=done >= 0)
        consumers.reverse()  # neither broker always goes first
        done += n
    return {c.side.name: c.close() for c in consumers}


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


def _per_m(cpu0: tuple[float, float], cpu1: tuple[float, float], side: Side,
           records: int) -> str:
    broker, client = ((b - a) * 1e6 / records for a, b in zip(cpu0, cpu1))
    if side.mock:
        return f"client process with the mock inside {client:.2f}"
    return f"broker {broker:.2f}, client process {client:.2f}"


def run(sides: list[Side], args: argparse.Namespace, index: int) -> dict[str, dict[str, float]]:
    """One run: each figure measured on every broker, one broker after the other (the order
    alternates from run to run; consume rounds alternate round by round)."""
    order = sides if index % 2 == 0 else sides[::-1]
    records = args.records
    mb = records * VALUE_BYTES / 1e6
    topic = f"bench-{index}"
    out: dict[str, dict[str, float]] = {side.name: {} for side in sides}
    for side in order:
        create_topic(side.bootstrap, topic, side.mock)
    for side in order:
        cpu0 = side.cpu()
        produced = bench_produce(side.bootstrap, topic, records)
        out[side.name]["produce"] = records / produced.seconds
        print(f"[{side.name}] produce {records:,} x {VALUE_BYTES} B: "
              f"{records / produced.seconds:,.0f} rec/s, {mb / produced.seconds:,.1f} MB/s "
              f"({produced.seconds:.2f} s, {produced.flush_seconds:.2f} s of it in flush(); "
              f"the thread calling produce() on CPU {produced.thread_cpu:.2f} s, waiting for "
              f"a CPU {produced.thread_waited:.2f} s); "
              f"CPU s per million records: "
              f"{_per_m(cpu0, side.cpu(), side, records)}", flush=True)
    for side in order:
        if side.mock:
            continue  # its partition keeps only the newest ~5 MB
        cpu0 = side.cpu()
        consume_s = bench_consume(side.bootstrap, topic, records)
        out[side.name]["consume_read"] = records / consume_s
        print(f"[{side.name}] consume {records:,} from offset 0 (one read): "
              f"{records / consume_s:,.0f} rec/s, {mb / consume_s:,.1f} MB/s "
              f"({consume_s:.2f} s); CPU s per million records: "
              f"{_per_m(cpu0, side.cpu(), side, records)}", flush=True)
    fresh = consume_rounds(order, "rounds", records, MOCK_ROUND, fresh=True)
    prefetched = consume_rounds(order, "rounds", records, MOCK_ROUND, fresh=False)
    for side in order:
        for label, r in (("assigned per round, every record fetched in the timed part",
                          fresh[side.name]),
                         ("old method: assigned while the round is produced, which it "
                          "prefetches", prefetched[side.name])):
            cpu = r.cpu
            print(f"[{side.name}] consume {records:,} in rounds of {MOCK_ROUND:,} ({label}): "
                  f"{records / r.seconds:,.0f} rec/s ({r.seconds:.2f} s); from each round's "
                  f"first record {r.after_first_rate:,.0f} rec/s; median records held at the "
                  f"clock's start {r.queued_at_start:,.0f}, ms to the first record "
                  f"{r.first_ms:.2f}; CPU s per million records, production included: "
                  f"{_per_m((0.0, 0.0), cpu, side, records)}", flush=True)
        r = fresh[side.name]
        out[side.name].update(consume=records / r.seconds, consume_first=r.after_first_rate,
                              first_ms=r.first_ms,
                              consume_prefetched=records / prefetched[side.name].seconds)
    for side in order:
        latencies = bench_latency(side.bootstrap, "latency", args.rate, args.seconds,
                                  side.fetch_wait_ms)
        p50, p99, p999 = (_pct(latencies, q) for q in (0.5, 0.99, 0.999))
        out[side.name].update(p50=p50, p99=p99, p999=p999)
        print(f"[{side.name}] end-to-end latency at {args.rate:,} msg/s, linger.ms=0, "
              f"{args.seconds:g} s: p50 {p50:.2f} ms, p99 {p99:.2f} ms, p99.9 {p999:.2f} ms, "
              f"max {max(latencies):.2f} ms, mean {statistics.fmean(latencies):.2f} ms",
              flush=True)
    if len(sides) == 2:
        ours, theirs = (out[side.name] for side in sides)
        ratios = _ratios(ours, theirs)
        print("trio-broker / mock{}: produce {produce:.2f}x, consume {consume:.2f}x (rounds "
              "assigned per round; from the first record {consume_first:.2f}x; ms to the first "
              "record {ours:.2f} / {theirs:.2f}), p99 latency {p99:.2f}x".format(
                  f" (run {index + 1} of {args.runs})" if args.runs > 1 else "",
                  ours=ours["first_ms"], theirs=theirs["first_ms"], **ratios))
        print("  not the same measurement, for comparison with earlier runs: our read from "
              "offset 0 / the mock's prefetched rounds {:.2f}x; prefetched rounds on both "
              "{:.2f}x; load average {:.2f}".format(
                  ours["consume_read"] / theirs["consume_prefetched"],
                  ours["consume_prefetched"] / theirs["consume_prefetched"],
                  os.getloadavg()[0]), flush=True)
    return out


def _ratios(ours: dict[str, float], theirs: dict[str, float]) -> dict[str, float]:
    return {key: ours[key] / theirs[key] for key in ("produce", "consume", "consume_first", "p99")}


def _summary(results: list[dict[str, dict[str, float]]], sides: list[Side]) -> None:
    """Each ratio's min / median / max over the runs (the figures swing from run to run)."""
    per_run = [_ratios(*(r[side.name] for side in sides)) for r in results]

    def spread(values: list[float], fmt: str = "{:.2f}") -> str:
        return " / ".join(fmt.format(v) for v in
                          (min(values), statistics.median(values), max(values)))

    print(f"trio-broker / mock over {len(results)} runs, min / median / max:")
    for key, label in (("produce", "produce"), ("consume", "consume (rounds assigned per round)"),
                       ("consume_first", "consume from each round's first record"),
                       ("p99", "p99 latency")):
        print(f"  {label}: {spread([r[key] for r in per_run])}")
    for side in sides:
        figures = [r[side.name] for r in results]
        print(f"  [{side.name}] produce {spread([f['produce'] for f in figures], '{:,.0f}')} "
              f"rec/s; consume {spread([f['consume'] for f in figures], '{:,.0f}')} rec/s; "
              f"ms to the first record {spread([f['first_ms'] for f in figures])}; p99 "
              f"{spread([f['p99'] for f in figures])} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--rate", type=int, default=10_000, help="latency run msg/s")
    parser.add_argument("--seconds", type=float, default=10.0, help="latency run length")
    parser.add_argument("--runs", type=int, default=1,
                        help="runs of every figure on both brokers, their order alternating; "
                             "prints each ratio's min / median / max")
    parser.add_argument("--no-mock", action="store_true", help="skip the mock-broker baseline")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="broker config override (repeatable)")
    parser.add_argument("--nice", type=int, default=0,
                        help="scheduling priority of the broker and this process (e.g. -10, "
                             "needs root): on a shared machine, keeps other load from "
                             "preempting the measurement")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.nice:
        os.setpriority(os.PRIO_PROCESS, 0, args.nice)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpu(s), Python "
          f"{platform.python_version()}, librdkafka {confluent_kafka.libversion()[0]}, "
          f"load average {os.getloadavg()[0]:.2f}, nice {args.nice}", flush=True)
    with ExitStack() as stack:
        bootstrap, pid = stack.enter_context(trio_broker(args.override, args.nice))
        print(f"trio-broker pid {pid} on {bootstrap}", flush=True)
        sides = [Side("trio-broker", bootstrap, pid, 500)]
        if not args.no_mock:
            bootstrap, _ = stack.enter_context(mock_broker())
            sides.append(Side("librdkafka mock", bootstrap, None, MOCK_FETCH_WAIT_MS))
        for side in sides:
            for topic in ("latency", "rounds"):
                create_topic(side.bootstrap, topic, side.mock)
        # The process's first produce also pays for the client's queue memory (~78,000 page
        # faults on the producing thread): untimed here, on the mock if there (no disk writes).
        warm = sides[-1]
        create_topic(warm.bootstrap, "warm-up", warm.mock)
        produced = bench_produce(warm.bootstrap, "warm-up", args.records)
        print(f"warm-up (untimed): produce {args.records:,} to {warm.name} in "
              f"{produced.seconds:.2f} s", flush=True)
        results = [run(sides, args, index) for index in range(args.runs)]
    if len(sides) == 2 and args.runs > 1:
        _summary(results, sides)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
