"""aiokafka's and kafka-python's transactional producers against the broker."""

from __future__ import annotations

import asyncio

import aiokafka
import kafka

from tests.transactions.test_confluent_transactions import _consume_all


def test_aiokafka_commits_and_aborts(kafka_broker, unique_topic):
    topic = kafka_broker.create_topic(unique_topic("aio"), 2)
    bootstrap = kafka_broker.bootstrap_servers

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap,
                                             transactional_id=f"aio-{topic}")
        await producer.start()
        try:
            for i in range(10):
                try:
                    async with producer.transaction():
                        await producer.send_and_wait(topic, b"%d" % i, partition=i % 2)
                        if i % 2:
                            raise KeyError("abort this one")
                except KeyError:
                    pass
        finally:
            await producer.stop()

    asyncio.run(run())
    assert sorted(_consume_all(bootstrap, topic, 2, "read_committed", 5)) == [
        b"0", b"2", b"4", b"6", b"8"]
    assert len(_consume_all(bootstrap, topic, 2, "read_uncommitted", 10)) == 10


def test_kafka_python_commits_and_aborts(kafka_broker, unique_topic):
    topic = kafka_broker.create_topic(unique_topic("kp"), 2)
    bootstrap = kafka_broker.bootstrap_servers
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"kp-{topic}")
    producer.init_transactions()
    for i in range(10):
        producer.begin_transaction()
        producer.send(topic, b"%d" % i, partition=i % 2)
        producer.flush()
        if i % 2:
            producer.abort_transaction()
        else:
            producer.commit_transaction()
    producer.close()
    assert sorted(_consume_all(bootstrap, topic, 2, "read_committed", 5)) == [
        b"0", b"2", b"4", b"6", b"8"]
    assert len(_consume_all(bootstrap, topic, 2, "read_uncommitted", 10)) == 10
