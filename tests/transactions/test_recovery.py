"""Transactions across a broker crash and restart, and the transaction timeout."""

from __future__ import annotations

import signal
import time

import confluent_kafka.admin
import pytest

from tests.broker_process import BrokerProcess
from tests.transactions.test_confluent_transactions import _consume_all, _producer
from trio_broker.broker.coordinator.txn_log import TXN_DIR_NAME, TransactionLog
from trio_broker.broker.coordinator.txn_metadata import TxnState


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([confluent_kafka.admin.NewTopic(topic, partitions, 1)])
    futures[topic].result(10)


def test_kill_9_leaves_committed_records_and_aborts_the_open_transaction(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        bootstrap = broker.bootstrap_servers
        _create_topic(bootstrap, "crash", 2)
        producer = _producer(bootstrap, "crash-txn")
        producer.begin_transaction()
        producer.produce("crash", value=b"committed", partition=0)
        producer.commit_transaction(10)
        producer.begin_transaction()
        producer.produce("crash", value=b"open-0", partition=0)
        producer.produce("crash", value=b"open-1", partition=1)
        producer.flush(10)
        broker.stop(signal.SIGKILL)
        broker.start()
        # the transaction survived the crash as Ongoing; the producer's next instance aborts it
        successor = _producer(bootstrap, "crash-txn")
        successor.begin_transaction()
        successor.produce("crash", value=b"after", partition=1)
        successor.commit_transaction(10)
        assert sorted(_consume_all(bootstrap, "crash", 2, "read_committed", 2)) == [
            b"after", b"committed"]
        assert len(_consume_all(bootstrap, "crash", 2, "read_uncommitted", 4)) == 4
    finally:
        broker.kill()


def test_a_prepared_commit_is_completed_on_start(tmp_path):
    data = tmp_path / "data"
    broker = BrokerProcess(data).start()
    try:
        bootstrap = broker.bootstrap_servers
        _create_topic(bootstrap, "prepared", 1)
        producer = _producer(bootstrap, "prep-txn")
        producer.begin_transaction()
        producer.produce("prepared", value=b"decided", partition=0)
        producer.flush(10)
        broker.stop(signal.SIGKILL)
        # a crash right after the PrepareCommit record was fsynced, before any marker
        txn_log = TransactionLog(data / TXN_DIR_NAME)
        meta = txn_log.open()["prep-txn"]
        assert meta.state is TxnState.ONGOING
        meta.state = TxnState.PREPARE_COMMIT
        txn_log.append([meta])
        txn_log.close()
        broker.start()
        assert _consume_all(bootstrap, "prepared", 1, "read_committed", 1) == [b"decided"]
        # the producer's next instance finds a completed transaction
        successor = _producer(bootstrap, "prep-txn")
        successor.begin_transaction()
        successor.produce("prepared", value=b"next", partition=0)
        successor.commit_transaction(10)
        assert sorted(_consume_all(bootstrap, "prepared", 1, "read_committed", 2)) == [
            b"decided", b"next"]
    finally:
        broker.kill()


@pytest.mark.broker_config(transaction_abort_timed_out_transaction_cleanup_interval_ms=100)
def test_an_abandoned_transaction_is_aborted_after_its_timeout(kafka_broker, unique_topic):
    topic = kafka_broker.create_topic(unique_topic("timeout"), 1)
    bootstrap = kafka_broker.bootstrap_servers
    txn_id = f"abandoned-{topic}"
    producer = _producer(bootstrap, txn_id, **{"transaction.timeout.ms": 1000})
    producer.begin_transaction()
    producer.produce(topic, value=b"abandoned")
    producer.flush(10)
    other = _producer(bootstrap, f"other-{topic}")
    other.begin_transaction()
    other.produce(topic, value=b"committed")
    other.commit_transaction(10)
    log = kafka_broker.broker.state.logs.get_log(topic, 0)
    assert log.last_stable_offset == 0  # held back by the abandoned transaction
    deadline = time.monotonic() + 10
    txns = kafka_broker.broker.state.transactions.transactions
    while txns[txn_id].state is not TxnState.COMPLETE_ABORT and time.monotonic() < deadline:
        time.sleep(0.05)
    assert txns[txn_id].state is TxnState.COMPLETE_ABORT
    assert log.last_stable_offset == log.log_end_offset
    assert _consume_all(bootstrap, topic, 1, "read_committed", 1) == [b"committed"]
