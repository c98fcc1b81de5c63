"""The coordinators' files are made on first use, as Kafka creates ``__consumer_offsets`` and
``__transaction_state`` on first use: an empty log dir's start writes none of them, and what the
first commit and the first transaction wrote loads after a crash and restart."""

from __future__ import annotations

import signal

import confluent_kafka
import pytest
from confluent_kafka import TopicPartition

from tests.broker_process import BrokerProcess
from tests.transactions.test_confluent_transactions import _consume_all, _producer
from trio_broker.broker.coordinator import OFFSETS_DIR_NAME
from trio_broker.broker.coordinator.txn_log import TXN_DIR_NAME, TransactionLog
from trio_broker.broker.coordinator.txn_metadata import TxnState


def _committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                         "enable.auto.commit": False})
    try:
        [tp] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return tp.offset
    finally:
        consumer.close()


def test_no_coordinator_file_until_first_use_and_both_load_after_a_restart(tmp_path):
    data = tmp_path / "data"
    broker = BrokerProcess(data).start()
    try:
        bootstrap = broker.bootstrap_servers
        plain = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
        plain.produce("t", value=b"plain", partition=0)
        assert plain.flush(10) == 0
        # a started broker that has taken a produce has made neither coordinator's directory
        assert not (data / OFFSETS_DIR_NAME).exists()
        assert not (data / TXN_DIR_NAME).exists()

        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "g",
                                             "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition("t", 0, 1)], asynchronous=False)
        consumer.close()
        assert (data / OFFSETS_DIR_NAME / "commits.log").stat().st_size > 0
        assert not (data / TXN_DIR_NAME).exists()

        first = _producer(bootstrap, "txn")
        first.begin_transaction()
        first.produce("t", value=b"txn", partition=0)
        first.commit_transaction(10)
        states = TransactionLog(data / TXN_DIR_NAME).open()
        assert states["txn"].state is TxnState.COMPLETE_COMMIT

        broker.stop(signal.SIGKILL)  # only what was fsynced survives
        broker.start()
        assert _committed(bootstrap, "g", "t") == 1
        # the transactional id's state loaded: its next instance fences the first one (a lost
        # state would give it a new producer id and leave the first one unfenced)
        successor = _producer(bootstrap, "txn")
        successor.begin_transaction()
        successor.produce("t", value=b"after", partition=0)
        successor.commit_transaction(10)
        first.begin_transaction()
        first.produce("t", value=b"zombie", partition=0)
        with pytest.raises(confluent_kafka.KafkaException):
            first.commit_transaction(10)
        assert sorted(_consume_all(bootstrap, "t", 1, "read_committed", 3)) == [
            b"after", b"plain", b"txn"]
    finally:
        broker.kill()
