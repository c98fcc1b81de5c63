"""Producer and consumer throughput of the Trio client, aiokafka and kafka-python.

All three clients talk to the same broker in the same run: trio-broker started as a subprocess
(so it has its own interpreter and core), or with ``--mock`` librdkafka's in-process mock cluster,
or any broker given with ``--bootstrap``. Each client produces ``--records`` values of
``--size`` bytes (no key, no compression, acks=all, linger.ms=5, batch.size=16384) to its own
topic, waits until every record is acknowledged, then consumes them all from the beginning
without a group. Rates are records per second over the whole run (best of ``--repeat``
runs, interleaved across clients).

    .venv/bin/python bench/bench_clients.py                 # trio-broker subprocess
    .venv/bin/python bench/bench_clients.py --mock --records 100000   # librdkafka mock cluster
                  (it keeps only ~45,000 records per partition, and the topic has 4 partitions)
    .venv/bin/python bench/bench_clients.py --profile trio-produce   # py-spy-free cProfile

Note: the Trio client is idempotent by default (as Java's and kafka-python's producers are);
aiokafka's default is not. ``--no-idempotence`` turns it off for all three.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import os
import pstats
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import trio

# --- brokers ---------------------------------------------------------------------------------

@contextlib.contextmanager
def trio_broker_subprocess(partitions: int) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="bench-broker-") as data:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trio_broker", "serve",
             "--override", "listeners=PLAINTEXT://127.0.0.1:0",
             "--override", f"log.dirs={data}",
             "--override", f"num.partitions={partitions}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert proc.stdout is not None
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                line = proc.stdout.readline()
                match = re.search(r"listening on PLAINTEXT://([\d.]+:\d+)", line)
                if match:
                    break
                if not line and proc.poll() is not None:
                    raise RuntimeError("trio-broker exited before listening")
            else:
                raise RuntimeError("trio-broker did not start within 30 s")
            yield match.group(1)
        finally:
            proc.terminate()
            proc.wait(10)


@contextlib.contextmanager
def mock_cluster() -> Iterator[str]:
    import confluent_kafka

    handle = confluent_kafka.Producer({"test.mock.num.brokers": 3, "bootstrap.servers": "",
                                       "log_level": 0})
    metadata = handle.list_topics(timeout=10)
    yield ",".join(f"{b.host}:{b.port}" for b in metadata.brokers.values())
    del handle


# --- the Trio client -------------------------------------------------------------------------

def trio_produce(bootstrap: str, topic: str, count: int, value: bytes, idempotent: bool,
                 ) -> tuple[float, float]:
    from trio_broker.client import open_producer

    async def run() -> tuple[float, float]:
        async with open_producer(bootstrap, acks="all", linger_ms=5,
                                 enable_idempotence=idempotent) as producer:
            await producer.send(topic, value)  # metadata and connections warm
            start = time.perf_counter(), time.process_time()
            send = producer.send_soon
            for _ in range(count):
                await send(topic, value)
            await producer.flush()
            return time.perf_counter() - start[0], time.process_time() - start[1]

    return trio.run(run)


def trio_consume(bootstrap: str, topic: str, count: int, partitions: int) -> tuple[float, float]:
    from trio_broker.client import TopicPartition, open_consumer

    async def run() -> tuple[float, float]:
        async with open_consumer(bootstrap_servers=bootstrap,
                                 auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
            start = time.perf_counter(), time.process_time()
            seen = 0
            while seen < count:
                batch = await consumer.getmany(timeout_ms=5000, max_records=10000)
                if not batch:
                    raise RuntimeError(f"trio consumer stalled at {seen}")
                for records in batch.values():
                    seen += len(records)
            return time.perf_counter() - start[0], time.process_time() - start[1]

    return trio.run(run)


# --- aiokafka ------------------------------------------------------------------------------

def aiokafka_produce(bootstrap: str, topic: str, count: int, value: bytes, idempotent: bool,
                     ) -> tuple[float, float]:
    from aiokafka import AIOKafkaProducer

    async def run() -> tuple[float, float]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                                    enable_idempotence=idempotent)
        await producer.start()
        try:
            await producer.send_and_wait(topic, value)
            start = time.perf_counter(), time.process_time()
            for _ in range(count):
                await producer.send(topic, value)
            await producer.flush()
            return time.perf_counter() - start[0], time.process_time() - start[1]
        finally:
            await producer.stop()

    return asyncio.run(run())


def aiokafka_consume(bootstrap: str, topic: str, count: int,
                     partitions: int) -> tuple[float, float]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> tuple[float, float]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
            start = time.perf_counter(), time.process_time()
            seen = 0
            while seen < count:
                batch = await consumer.getmany(timeout_ms=5000, max_records=10000)
                if not batch:
                    raise RuntimeError(f"aiokafka consumer stalled at {seen}")
                for records in batch.values():
                    seen += len(records)
            return time.perf_counter() - start[0], time.process_time() - start[1]
        finally:
            await consumer.stop()

    return asyncio.run(run())


# --- kafka-python --------------------------------------------------------------------------

def kafka_python_produce(bootstrap: str, topic: str, count: int, value: bytes,
                         idempotent: bool) -> tuple[float, float]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                             enable_idempotence=idempotent)
    try:
        producer.send(topic, value).get(30)
        start = time.perf_counter(), time.process_time()
        for _ in range(count):
            producer.send(topic, value)
        producer.flush()
        return time.perf_counter() - start[0], time.process_time() - start[1]
    finally:
        producer.close()


def kafka_python_consume(bootstrap: str, topic: str, count: int,
                         partitions: int) -> tuple[float, float]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        start = time.perf_counter(), time.process_time()
        seen = 0
        while seen < count:
            batch = consumer.poll(timeout_ms=5000, max_records=10000)
            if not batch:
                raise RuntimeError(f"kafka-python consumer stalled at {seen}")
            for records in batch.values():
                seen += len(records)
        return time.perf_counter() - start[0], time.process_time() - start[1]
    finally:
        consumer.close()


CLIENTS: dict[str, tuple[Callable[..., tuple[float, float]],
                         Callable[..., tuple[float, float]]]] = {
    "trio-broker client": (trio_produce, trio_consume),
    "aiokafka": (aiokafka_produce, aiokafka_consume),
    "kafka-python": (kafka_python_produce, kafka_python_consume),
}
PROFILE_TARGETS = {"trio-produce": ("trio-broker client", 0),
                   "trio-consume": ("trio-broker client", 1)}


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    from trio_broker.client.trio.admin import NewTopic, open_admin

    async def run() -> None:
        async with open_admin(bootstrap) as admin:
            await admin.create_topics([NewTopic(n, partitions, 1) for n in names])

    trio.run(run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100, help="value bytes")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--clients", default=",".join(CLIENTS),
                        help="comma list of: " + ", ".join(CLIENTS))
    parser.add_argument("--no-idempotence", action="store_true")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--mock", action="store_true", help="librdkafka's mock cluster")
    target.add_argument("--bootstrap", help="an already running broker")
    parser.add_argument("--profile", choices=sorted(PROFILE_TARGETS),
                        help="cProfile one Trio client phase and print the top functions")
    args = parser.parse_args(argv)
    value = os.urandom(args.size)
    idempotent = not args.no_idempotence
    if args.bootstrap:
        broker_cm: Any = contextlib.nullcontext(args.bootstrap)
        where = f"broker at {args.bootstrap}"
    elif args.mock:
        broker_cm = mock_cluster()
        where = "librdkafka mock cluster (3 brokers, in-process)"
        args.partitions = 4  # what the mock gives an auto-created topic
    else:
        broker_cm = trio_broker_subprocess(args.partitions)
        where = "trio-broker (subprocess)"
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    with broker_cm as bootstrap:
        print(f"target: {where}; {args.records} records of {args.size} B, "
              f"{args.partitions} partitions, acks=all, idempotence "
              f"{'on' if idempotent else 'off'}")
        run_id = int(time.time())
        if args.profile:
            name, phase = PROFILE_TARGETS[args.profile]
            topic = f"bench-profile-{run_id}"
            if not args.mock:
                create_topics(bootstrap, [topic], args.partitions)
            produce, consume = CLIENTS[name]
            profiler = cProfile.Profile()
            if phase == 0:
                profiler.runcall(produce, bootstrap, topic, args.records, value, idempotent)
            else:
                produce(bootstrap, topic, args.records, value, idempotent)
                profiler.runcall(consume, bootstrap, topic, args.records, args.partitions)
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
            return 0
        topics = {(c, r): f"bench-{re.sub(r'[^a-z]', '', c)}-{run_id}-{r}"
                  for c in clients for r in range(args.repeat)}
        if not args.mock:
            create_topics(bootstrap, list(topics.values()), args.partitions)
        # per client: best produce wall, its CPU; best consume wall, its CPU
        best: dict[str, list[float]] = {c: [float("inf"), 0.0, float("inf"), 0.0]
                                        for c in clients}
        failed: dict[str, str] = {}
        for r in range(args.repeat):  # interleaved, so a busy moment hurts every client alike
            for client in clients:
                if client in failed:
                    continue
                produce, consume = CLIENTS[client]
                topic = topics[(client, r)]
                try:
                    wall, cpu = produce(bootstrap, topic, args.records, value, idempotent)
                    if wall < best[client][0]:
                        best[client][0:2] = [wall, cpu]
                    wall, cpu = consume(bootstrap, topic, args.records, args.partitions)
                    if wall < best[client][2]:
                        best[client][2:4] = [wall, cpu]
                except Exception as exc:  # a client that cannot talk to this broker at all
                    failed[client] = f"{type(exc).__name__}: {exc}"[:100]
    n = args.records
    rows = [(c, n / pw, pc / n * 1e6, n / cw, cc / n * 1e6) for c, (pw, pc, cw, cc) in best.items()
            if c not in failed]
    cpu_note = "" if not args.mock else " (includes the in-process mock's threads)"
    print(f"{'client':<20} {'produce rec/s':>14} {'CPU us/rec':>11} {'consume rec/s':>14} "
          f"{'CPU us/rec':>11}")
    for client, produced, produce_cpu, consumed, consume_cpu in rows:
        print(f"{client:<20} {produced:>14,.0f} {produce_cpu:>11.2f} {consumed:>14,.0f} "
              f"{consume_cpu:>11.2f}")
    for client, reason in failed.items():
        print(f"{client:<20} failed: {reason}")
    print(f"CPU us/rec: this process's CPU time per record{cpu_note}")
    base = {r[0]: r for r in rows}
    if "trio-broker client" in base and "aiokafka" in base:
        ours, theirs = base["trio-broker client"], base["aiokafka"]
        print(f"trio-broker client vs aiokafka: rate produce {ours[1] / theirs[1]:.2f}x, "
              f"consume {ours[3] / theirs[3]:.2f}x; CPU per record produce "
              f"{ours[2] / theirs[2]:.2f}x, consume {ours[4] / theirs[4]:.2f}x (lower is better)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
