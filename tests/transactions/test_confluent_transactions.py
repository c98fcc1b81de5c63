"""confluent-kafka's transactional producer against the broker: commit, abort, read_committed,
offsets in a transaction, fencing of a zombie."""

from __future__ import annotations

import time
import uuid

import confluent_kafka
import pytest
from confluent_kafka import KafkaException, TopicPartition


def _producer(bootstrap: str, txn_id: str, **extra: object) -> confluent_kafka.Producer:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                         "transactional.id": txn_id, "linger.ms": 1, **extra})
    producer.init_transactions(10)
    return producer


def _consume_all(bootstrap: str, topic: str, partitions: int, isolation: str,
                 expected: int, timeout_s: float = 20) -> list[bytes]:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
        "enable.auto.commit": False, "isolation.level": isolation,
        "fetch.queue.backoff.ms": 1, "fetch.wait.max.ms": 50})
    consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(partitions)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            for m in consumer.consume(num_messages=1000, timeout=0.2):
                if m.error() is None:
                    got.append(m.value())
            if len(got) >= expected:
                # a little longer: anything past the expected count is a failure to see
                for m in consumer.consume(num_messages=1000, timeout=0.5):
                    if m.error() is None:
                        got.append(m.value())
                break
    finally:
        consumer.close()
    return got


def test_commit_and_abort_in_turn(kafka_broker, unique_topic):
    topic = kafka_broker.create_topic(unique_topic("txn"), 3)
    bootstrap = kafka_broker.bootstrap_servers
    producer = _producer(bootstrap, f"tx-{topic}")
    committed: list[bytes] = []
    everything: list[bytes] = []
    for i in range(200):
        producer.begin_transaction()
        values = [b"%d-%d" % (i, j) for j in range(3)]
        for j, value in enumerate(values):
            producer.produce(topic, value=value, partition=j % 3)
        everything += values
        if i % 2 == 0:
            producer.commit_transaction(10)
            committed += values
        else:
            producer.flush(10)  # the aborted records reach the log before the marker
            producer.abort_transaction(10)
    seen = _consume_all(bootstrap, topic, 3, "read_committed", len(committed))
    assert sorted(seen) == sorted(committed)
    seen_all = _consume_all(bootstrap, topic, 3, "read_uncommitted", len(everything))
    assert sorted(seen_all) == sorted(everything)


def test_read_committed_stops_at_an_open_transaction(kafka_broker, unique_topic):
    topic = kafka_broker.create_topic(unique_topic("lso"), 1)
    bootstrap = kafka_broker.bootstrap_servers
    open_txn = _producer(bootstrap, f"open-{topic}")
    open_txn.begin_transaction()
    open_txn.produce(topic, value=b"pending")
    open_txn.flush(10)
    later = _producer(bootstrap, f"later-{topic}")
    later.begin_transaction()
    later.produce(topic, value=b"after")
    later.commit_transaction(10)
    # "after" is committed but behind the open transaction: read_committed sees nothing yet
    assert _consume_all(bootstrap, topic, 1, "read_committed", 1, timeout_s=2) == []
    log = kafka_broker.broker.state.logs.get_log(topic, 0)
    assert log.last_stable_offset == 0
    open_txn.commit_transaction(10)
    assert sorted(_consume_all(bootstrap, topic, 1, "read_committed", 2)) == [b"after",
                                                                             b"pending"]
    assert log.last_stable_offset == log.log_end_offset


def test_a_second_producer_fences_the_first(kafka_broker, unique_topic):
    topic = kafka_broker.create_topic(unique_topic("fence"), 1)
    bootstrap = kafka_broker.bootstrap_servers
    txn_id = f"zombie-{topic}"
    zombie = _producer(bootstrap, txn_id)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie-1")
    zombie.flush(10)
    successor = _producer(bootstrap, txn_id)  # aborts the zombie's open transaction
    successor.begin_transaction()
    successor.produce(topic, value=b"successor")
    successor.commit_transaction(10)
    # the zombie's late writes and its commit are refused, with a fatal fencing error
    zombie.produce(topic, value=b"zombie-2")
    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(10)
    error = info.value.args[0]
    assert error.fatal() or error.code() in (confluent_kafka.KafkaError._FENCED,
                                             confluent_kafka.KafkaError.PRODUCER_FENCED,
                                             confluent_kafka.KafkaError.INVALID_PRODUCER_EPOCH)
    assert _consume_all(bootstrap, topic, 1, "read_committed", 1) == [b"successor"]
    everything = _consume_all(bootstrap, topic, 1, "read_uncommitted", 3, timeout_s=3)
    assert b"zombie-2" not in everything


def test_send_offsets_become_visible_on_commit_only(kafka_broker, unique_topic):
    topic = kafka_broker.create_topic(unique_topic("offsets"), 2)
    bootstrap = kafka_broker.bootstrap_servers
    group = f"g-{topic}"
    stable, unstable = (confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "isolation.level": level}) for level in ("read_committed", "read_uncommitted"))
    producer = _producer(bootstrap, f"offsets-{topic}")
    offsets = [TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 7)]
    asked = [TopicPartition(topic, 0), TopicPartition(topic, 1)]

    def committed(consumer: confluent_kafka.Consumer, timeout: float = 10) -> list[int]:
        return [tp.offset for tp in consumer.committed(asked, timeout=timeout)]

    producer.begin_transaction()
    producer.produce(topic, value=b"x", partition=0)
    producer.send_offsets_to_transaction(offsets, stable.consumer_group_metadata(), 10)
    assert committed(unstable) == [confluent_kafka.OFFSET_INVALID] * 2
    # a read_committed consumer asks with require_stable: UNSTABLE_OFFSET_COMMIT until the end
    with pytest.raises(KafkaException):
        committed(stable, timeout=1)
    producer.abort_transaction(10)
    assert committed(stable) == [confluent_kafka.OFFSET_INVALID] * 2
    producer.begin_transaction()
    producer.send_offsets_to_transaction(offsets, stable.consumer_group_metadata(), 10)
    producer.commit_transaction(10)
    assert committed(stable) == [5, 7]
    assert committed(unstable) == [5, 7]
    stable.close()
    unstable.close()
