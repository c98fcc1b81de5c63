"""Exactly-once consume-transform-produce with confluent-kafka: two workers of one group over six
partitions, the second joining mid-way (a rebalance), each committing its input offsets in the
transaction that writes its output (``send_offsets_to_transaction``, KIP-447)."""

from __future__ import annotations

import threading
import time

import confluent_kafka
from confluent_kafka import KafkaException, TopicPartition

from tests.transactions.test_confluent_transactions import _consume_all

PARTITIONS = 6
RECORDS = 900


def _worker(bootstrap: str, name: str, source: str, sink: str, group: str,
            stop: threading.Event, processed: list[int], errors: list[BaseException]) -> None:
    try:
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "isolation.level": "read_committed", "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
            "fetch.wait.max.ms": 50})
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                             "transactional.id": f"{group}-{name}",
                                             "linger.ms": 1})
        producer.init_transactions(10)
        consumer.subscribe([source])
        while not stop.is_set():
            messages = [m for m in consumer.consume(num_messages=10, timeout=0.2)
                        if m.error() is None]
            if not messages:
                continue
            time.sleep(0.03)  # the work of transforming: keeps the run long enough to rebalance
            producer.begin_transaction()
            try:
                for m in messages:
                    producer.produce(sink, key=m.key(), value=b"out:" + m.value())
                positions = consumer.position(consumer.assignment())
                producer.send_offsets_to_transaction(
                    positions, consumer.consumer_group_metadata(), 10)
                producer.commit_transaction(10)
                processed[0] += len(messages)
            except KafkaException as exc:
                error = exc.args[0]
                if not error.txn_requires_abort():
                    raise
                # a rebalance took the partitions: abort and read again from what is committed
                producer.abort_transaction(10)
                assigned = consumer.assignment()
                for tp in consumer.committed(assigned, timeout=10):
                    offset = tp.offset if tp.offset >= 0 else confluent_kafka.OFFSET_BEGINNING
                    consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
        consumer.close()
    except BaseException as exc:
        errors.append(exc)


def test_every_input_appears_exactly_once_across_a_rebalance(kafka_broker, unique_topic):
    source = kafka_broker.create_topic(unique_topic("in"), PARTITIONS)
    sink = kafka_broker.create_topic(unique_topic("out"), PARTITIONS)
    bootstrap = kafka_broker.bootstrap_servers
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(source, key=b"%d" % i, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(10) == 0
    group = f"ctp-{source}"
    stop = threading.Event()
    errors: list[BaseException] = []
    counts = {"a": [0], "b": [0]}
    workers = {n: threading.Thread(target=_worker, args=(bootstrap, n, source, sink, group, stop,
                                                         counts[n], errors), daemon=True)
               for n in counts}
    workers["a"].start()
    deadline = time.monotonic() + 30
    # the second worker joins as soon as the first is processing: its start and the rebalance
    # take a few seconds, which must fall well inside the first worker's run
    while counts["a"][0] < RECORDS // 30 and time.monotonic() < deadline and not errors:
        time.sleep(0.02)
    assert counts["a"][0] < RECORDS, "the first worker finished before the rebalance"
    workers["b"].start()
    seen = []
    while time.monotonic() < deadline and not errors:
        seen = _consume_all(bootstrap, sink, PARTITIONS, "read_committed", RECORDS, timeout_s=2)
        if len(seen) >= RECORDS:
            break
    stop.set()
    for w in workers.values():
        w.join(20)
    assert not errors, errors
    assert counts["b"][0] > 0, "the second worker never got partitions"
    assert sorted(seen) == sorted(b"out:%d" % i for i in range(RECORDS))
