"""Transactions: small transactions per second, and read_committed consume throughput against
read_uncommitted, with confluent-kafka.

Run: ``.venv/bin/python bench/bench_transactions.py [--txns 1000] [--records 500000]``. Not part
of the test suite. Starts ``trio-broker serve`` as a subprocess on a free loopback port with its
data in a temporary directory, then measures:

1. small transactions: ``--txns`` transactions of one record (begin, produce, commit) by one
   producer, then of ten records over three partitions; transactions per second;
2. consume: ``--records`` 100-byte records written in transactions of 1,000 to one partition,
   read back by a ``read_uncommitted`` and a ``read_committed`` consumer, alternating, best of
   ``--rounds``; once with every transaction committed, once with every tenth aborted (so
   read_committed drops a tenth of what it reads: both records delivered per second and log
   records read per second are printed).
Figures go to docs/benchmarks.md ("Transactions").
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.broker_process import BrokerProcess

VALUE = b"x" * 100


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([confluent_kafka.admin.NewTopic(topic, partitions, 1)])[topic].result(10)


def small_transactions(bootstrap: str, txns: int, per_txn: int, topic: str) -> float:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                                         "transactional.id": f"bench-{topic}"})
    producer.init_transactions(10)
    start = time.perf_counter()
    for _ in range(txns):
        producer.begin_transaction()
        for j in range(per_txn):
            producer.produce(topic, value=VALUE, partition=j % 3)
        producer.commit_transaction(10)
    return txns / (time.perf_counter() - start)


def fill(bootstrap: str, topic: str, records: int, abort_every: int) -> int:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                         "transactional.id": f"fill-{topic}",
                                         "queue.buffering.max.messages": 1_000_000})
    producer.init_transactions(10)
    kept = 0
    for t in range(records // 1000):
        producer.begin_transaction()
        for _ in range(1000):
            producer.produce(topic, value=VALUE, partition=0)
        if abort_every and t % abort_every == abort_every - 1:
            producer.flush(30)  # the aborted records reach the log (abort purges the queue)
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            kept += 1000
    return kept


def consume(bootstrap: str, topic: str, isolation: str, expected: int) -> float:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{isolation}-{time.time()}",
        "enable.auto.commit": False, "isolation.level": isolation,
        "fetch.queue.backoff.ms": 1, "auto.offset.reset": "earliest"})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    count = 0
    start = time.perf_counter()
    deadline = start + 120
    while count < expected and time.perf_counter() < deadline:
        for m in consumer.consume(num_messages=10_000, timeout=1):
            if m.error() is None:
                count += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    if count != expected:
        raise SystemExit(f"{isolation}: read {count} of {expected}")
    return count / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--txns", type=int, default=1000)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, librdkafka {confluent_kafka.libversion()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "data").start()
        try:
            bootstrap = broker.bootstrap_servers
            _create(bootstrap, "small", 3)
            print(f"small transactions, 1 record: "
                  f"{small_transactions(bootstrap, args.txns, 1, 'small'):.0f} txn/s")
            print(f"small transactions, 10 records over 3 partitions: "
                  f"{small_transactions(bootstrap, args.txns // 2, 10, 'small'):.0f} txn/s")
            for topic, abort_every in (("committed", 0), ("mixed", 10)):
                _create(bootstrap, topic, 1)
                kept = fill(bootstrap, topic, args.records, abort_every)
                total = args.records // 1000 * 1000
                best = {"read_uncommitted": 0.0, "read_committed": 0.0}
                expected = {"read_uncommitted": total, "read_committed": kept}
                for _ in range(args.rounds):
                    for isolation in best:
                        rate = consume(bootstrap, topic, isolation, expected[isolation])
                        best[isolation] = max(best[isolation], rate)
                what = ("every transaction committed" if not abort_every
                        else f"every {abort_every}th transaction aborted")
                print(f"consume, {total:,} records, {what}:")
                for isolation, rate in best.items():
                    # log positions per second: what the broker reads, aborted records included
                    positions = rate * total / expected[isolation]
                    print(f"  {isolation}: {rate:,.0f} records/s delivered, "
                          f"{positions:,.0f} log records/s read")
                ratio = best["read_committed"] / best["read_uncommitted"]
                positions_ratio = ratio * total / kept
                print(f"  read_committed / read_uncommitted: {ratio:.2f} delivered, "
                      f"{positions_ratio:.2f} read")
        finally:
            broker.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
