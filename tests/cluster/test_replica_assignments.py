"""Explicit replica assignments on a test cluster, as a Kafka cluster takes them: confluent-kafka's
``create_topics`` / ``create_partitions`` with ``replica_assignment`` and kafka-python's
``alter_partition_reassignments``, checked with Kafka's validation and messages, shown in
Metadata (the first live replica leads), then produced to and consumed through."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import KafkaAdminClient, TopicPartition

from trio_broker.testing import ThreadedCluster

TIMEOUT_S = 15


def _placement(admin: AdminClient, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr), as Metadata shows them."""
    partitions = admin.list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions
    return {p: (m.leader, list(m.replicas), list(m.isrs)) for p, m in partitions.items()}


def _error(future) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        future.result(TIMEOUT_S)
    error: KafkaError = raised.value.args[0]
    return error


def _round_trip(bootstrap: str, topic: str, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for p in range(partitions):
        producer.produce(topic, f"to-{p}".encode(), partition=p)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen: dict[int, bytes] = {}
    try:
        for _ in range(200):
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                seen[message.partition()] = message.value()
            if len(seen) == partitions:
                break
    finally:
        consumer.close()
    assert seen == {p: f"to-{p}".encode() for p in range(partitions)}


@pytest.mark.broker_config(brokers=3)
def test_create_topics_and_partitions_with_assignments(kafka_cluster: ThreadedCluster) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"assigned-{uuid.uuid4().hex[:8]}"
    created = admin.create_topics([NewTopic(topic, 2, replica_assignment=[[2, 0], [1, 2]])])
    created[topic].result(TIMEOUT_S)
    assert _placement(admin, topic) == {0: (2, [2, 0], [2, 0]), 1: (1, [1, 2], [1, 2])}

    added = admin.create_partitions([NewPartitions(topic, 4, replica_assignment=[[0, 1], [2, 1]])])
    added[topic].result(TIMEOUT_S)
    assert _placement(admin, topic) == {0: (2, [2, 0], [2, 0]), 1: (1, [1, 2], [1, 2]),
                                        2: (0, [0, 1], [0, 1]), 3: (2, [2, 1], [2, 1])}
    _round_trip(bootstrap, topic, 4)

    # a stopped broker is registered but fenced: the first live replica leads
    kafka_cluster.stop_broker(1)
    try:
        added = admin.create_partitions([NewPartitions(topic, 5, replica_assignment=[[1, 0]])])
        added[topic].result(TIMEOUT_S)
        assert _placement(admin, topic)[4] == (0, [1, 0], [0])
        kafka_cluster.stop_broker(2)
        error = _error(admin.create_partitions(
            [NewPartitions(topic, 6, replica_assignment=[[1, 2]])])[topic])
    finally:
        kafka_cluster.start_broker(2)
        kafka_cluster.start_broker(1)
    assert error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert error.str() == ("All brokers specified in the manual partition assignment for "
                           "partition 5 are fenced or in controlled shutdown.")


@pytest.mark.broker_config(brokers=3)
@pytest.mark.parametrize(("assignment", "message"), [
    ([[0, 7]], "The manual partition assignment includes broker 7, but no such broker is "
               "registered."),
    ([[0, 0]], "The manual partition assignment includes the broker 0 more than once."),
    ([[0, 1], [2]], "The manual partition assignment includes a partition with 1 replica(s), "
                    "but this is not consistent with previous partitions, which have 2 "
                    "replica(s)."),
])
def test_kafkas_checks_of_an_assignment(kafka_cluster: ThreadedCluster, assignment,
                                         message) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    topic = f"refused-{uuid.uuid4().hex[:8]}"
    new = NewTopic(topic, len(assignment), replica_assignment=assignment)
    error = _error(admin.create_topics([new])[topic])
    assert (error.code(), error.str()) == (KafkaError.INVALID_REPLICA_ASSIGNMENT, message)
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[0, 1]])])[topic].result(TIMEOUT_S)
    more = [[2, 1]] * (len(assignment) - 1) + assignment[-1:]
    error = _error(admin.create_partitions(
        [NewPartitions(topic, 1 + len(more), replica_assignment=more)])[topic])
    assert error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert error.str() == message


@pytest.mark.broker_config(brokers=3)
def test_a_reassignment_completes_at_once(kafka_cluster: ThreadedCluster) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"moved-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[0, 1]])])[topic].result(TIMEOUT_S)
    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        answer = client.alter_partition_reassignments({TopicPartition(topic, 0): [2, 1]})
        assert answer == {TopicPartition(topic, 0): None}
        refused = client.alter_partition_reassignments({TopicPartition(topic, 0): [2, 9]})
    finally:
        client.close()
    assert refused[TopicPartition(topic, 0)].errno == 39  # INVALID_REPLICA_ASSIGNMENT
    # the old leader is no replica any more: the first of the new ones leads
    assert _placement(admin, topic) == {0: (2, [2, 1], [2, 1])}
    _round_trip(bootstrap, topic, 1)
