"""The test cluster's Schema Registry: one for the cluster, as a registry serves many brokers,
used by confluent-kafka's serializers while the cluster's brokers fail and fail over."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from trio_broker.testing import ThreadedCluster

SCHEMA = json.dumps({"type": "record", "name": "Reading", "fields": [
    {"name": "sensor", "type": "string"}, {"name": "value", "type": "double"}]})


@pytest.mark.broker_config(brokers=3)
def test_avro_through_the_cluster_with_a_broker_down(kafka_cluster: ThreadedCluster) -> None:
    url = kafka_cluster.schema_registry_url
    assert url is not None
    registry = SchemaRegistryClient({"url": url})
    topic = kafka_cluster.create_topic("readings", 3)
    context = SerializationContext(topic, MessageField.VALUE)
    serialize = AvroSerializer(registry, SCHEMA)
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all"})
    for i in range(30):
        if i == 10:
            kafka_cluster.stop_broker(1)  # leaders fail over; the registry stays
        producer.produce(topic, serialize({"sensor": f"s{i}", "value": i / 2}, context),
                         partition=i % 3)
    assert producer.flush(30) == 0
    assert registry.get_latest_version(f"{topic}-value").version == 1

    consumer = Consumer({"bootstrap.servers": kafka_cluster.bootstrap_servers,
                         "group.id": "readers", "enable.auto.commit": False})
    deserialize = AvroDeserializer(registry)
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        got: list[dict] = []
        for _ in range(60):
            got += [deserialize(m.value(), context) for m in consumer.consume(100, timeout=0.5)
                    if not m.error()]
            if len(got) >= 30:
                break
    finally:
        consumer.close()
    assert sorted(got, key=lambda r: r["value"]) == [
        {"sensor": f"s{i}", "value": i / 2} for i in range(30)]


@pytest.mark.broker_config(brokers=2, schema_registry_listener="")
def test_the_registry_can_be_turned_off(kafka_cluster: ThreadedCluster) -> None:
    assert kafka_cluster.schema_registry_url is None
