"""Injected errors reach confluent-kafka as a Kafka cluster's would."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer

from trio_broker.testing import ThreadedCluster


def _stored(cluster: ThreadedCluster, topic: str, partition: int = 0) -> list[bytes]:
    from trio_broker.protocol.records import decode_batches

    assert cluster.cluster is not None
    log = cluster.cluster.state.logs.get_log(topic, partition)
    assert log is not None
    data = cluster.call(lambda: log.read(0, 1 << 30).records)
    return [bytes(r.value or b"") for _, records in decode_batches(data) for r in records]


@pytest.mark.broker_config(brokers=3)
def test_retriable_errors_are_retried_without_duplicates(kafka_cluster: ThreadedCluster) -> None:
    topic = kafka_cluster.create_topic("retried")
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers,
                         "enable.idempotence": True, "acks": "all", "retry.backoff.ms": 10})
    producer.produce(topic, b"warm-up")  # metadata and producer id first
    assert producer.flush(10) == 0
    kafka_cluster.inject("Produce", ["NOT_LEADER_OR_FOLLOWER"] * 3)
    before = sum(r.api == "Produce" for r in kafka_cluster.requests())
    errors: list[KafkaError | None] = []
    producer.produce(topic, b"once", on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(10) == 0
    assert errors == [None]
    assert _stored(kafka_cluster, topic) == [b"warm-up", b"once"]
    # three refused attempts, then the one that was stored
    assert sum(r.api == "Produce" for r in kafka_cluster.requests()) - before == 4


@pytest.mark.broker_config(brokers=3)
def test_a_fatal_error_surfaces_as_that_error(kafka_cluster: ThreadedCluster) -> None:
    topic = kafka_cluster.create_topic("refused")
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    producer.produce(topic, b"warm-up")
    assert producer.flush(10) == 0
    kafka_cluster.inject("Produce", ["TOPIC_AUTHORIZATION_FAILED"])
    errors: list[KafkaError | None] = []
    producer.produce(topic, b"refused", on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(10) == 0
    assert len(errors) == 1
    assert errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _stored(kafka_cluster, topic) == [b"warm-up"]


@pytest.mark.broker_config(brokers=2)
def test_an_injected_disconnect_is_retried(kafka_cluster: ThreadedCluster) -> None:
    topic = kafka_cluster.create_topic("dropped")
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers,
                         "enable.idempotence": True})
    producer.produce(topic, b"warm-up")
    assert producer.flush(10) == 0
    kafka_cluster.inject("Produce", disconnect=True, count=1)
    producer.produce(topic, b"after")
    assert producer.flush(20) == 0
    assert _stored(kafka_cluster, topic) == [b"warm-up", b"after"]
