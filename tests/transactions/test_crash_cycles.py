"""kill -9 at random points of running transactions, cycle after cycle.

A confluent-kafka transactional producer runs small transactions (commit two, abort the third)
over three partitions while the broker process is killed at a random moment (after
AddPartitionsToTxn, mid-produce, during EndTxn: wherever the moment falls) and restarted on the
same data. At the end: every transaction whose commit was acknowledged is visible to
read_committed, exactly once; no record of an aborted transaction is; a transaction left open
by the last crash is aborted by ``transaction.timeout.ms`` and holds no partition back.

``TXN_CRASH_CYCLES`` sets the number of cycles (3 in the suite; ``make txn-soak`` runs 20).
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time

import confluent_kafka
import confluent_kafka.admin
from confluent_kafka import KafkaException, TopicPartition

from tests.broker_process import BrokerProcess, free_port
from tests.transactions.test_confluent_transactions import _consume_all

CYCLES = int(os.environ.get("TXN_CRASH_CYCLES", "3"))
PARTITIONS = 3
TIMEOUT_MS = 2000


class _Worker:
    def __init__(self, bootstrap: str, cycle: int) -> None:
        self.bootstrap = bootstrap
        self.cycle = cycle
        self.committed: list[bytes] = []
        self.aborted: list[bytes] = []
        self.unknown: list[bytes] = []
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        producer = confluent_kafka.Producer({
            "bootstrap.servers": self.bootstrap, "transactional.id": "crash-cycles",
            "transaction.timeout.ms": TIMEOUT_MS, "linger.ms": 1,
            "message.timeout.ms": TIMEOUT_MS})
        producer.init_transactions(20)
        self.ready.set()
        n = 0
        while not self.stop.is_set():
            values = [b"c%d-t%d-r%d" % (self.cycle, n, j) for j in range(PARTITIONS)]
            commit = n % 3 != 2
            try:
                producer.begin_transaction()
                for j, value in enumerate(values):
                    producer.produce("crash", value=value, partition=j)
                if commit:
                    producer.commit_transaction(1)
                    self.committed += values
                else:
                    producer.flush(1)
                    producer.abort_transaction(1)
                    self.aborted += values
            except KafkaException:
                self.unknown += values  # the crash came mid-transaction
                break
            n += 1
        producer.purge()


def test_kill_9_cycles_lose_no_commit_and_show_no_abort(tmp_path):
    rng = random.Random(int(os.environ.get("TXN_CRASH_SEED", "13")))
    port = free_port()
    broker = BrokerProcess(tmp_path / "data",
                           "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
                           port=port)
    committed: list[bytes] = []
    aborted: list[bytes] = []
    unknown: list[bytes] = []
    try:
        broker.start()
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([confluent_kafka.admin.NewTopic("crash", PARTITIONS, 1)])[
            "crash"].result(10)
        for cycle in range(CYCLES):
            if cycle:
                broker.start()
            worker = _Worker(broker.bootstrap_servers, cycle)
            worker.thread.start()
            assert worker.ready.wait(30), "init_transactions did not finish"
            time.sleep(rng.uniform(0.2, 1.2))
            broker.stop(signal.SIGKILL)
            worker.stop.set()
            worker.thread.join(30)
            committed += worker.committed
            aborted += worker.aborted
            unknown += worker.unknown
        broker.start()
        bootstrap = broker.bootstrap_servers
        # nobody resumes the transactional id: the timeout must end what the last crash left
        deadline = time.monotonic() + TIMEOUT_MS / 1000 + 10
        stable = False
        while time.monotonic() < deadline and not stable:
            stable = _lso_reached_hw(bootstrap)
            time.sleep(0.2)
        assert stable, "a transaction is still open after transaction.timeout.ms"
        seen = _consume_all(bootstrap, "crash", PARTITIONS, "read_committed", len(committed))
        assert len(seen) == len(set(seen)), "a record is visible twice"
        assert set(committed) <= set(seen), "a committed record was lost"
        assert not set(aborted) & set(seen), "an aborted record is visible"
        assert set(seen) <= set(committed) | set(unknown)
        assert len(committed) >= CYCLES  # every cycle committed something
    finally:
        broker.kill()


def _lso_reached_hw(bootstrap: str) -> bool:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    latest = confluent_kafka.admin.OffsetSpec.latest()
    tps = {TopicPartition("crash", p): latest for p in range(PARTITIONS)}
    committed = admin.list_offsets(
        tps, isolation_level=confluent_kafka.IsolationLevel.READ_COMMITTED)
    uncommitted = admin.list_offsets(
        tps, isolation_level=confluent_kafka.IsolationLevel.READ_UNCOMMITTED)
    return all(committed[tp].result(10).offset == uncommitted[tp].result(10).offset
               for tp in tps)
