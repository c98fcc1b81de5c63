"""confluent-kafka's own SchemaRegistryClient and serializers against the broker's registry:
records round-trip through a topic with auto-registered schemas, evolution is judged by the
subject's compatibility level, references cross subjects."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from trio_broker.testing import ThreadedBroker

#: records per format; ``make test-schema-registry`` runs the full 10,000
RECORDS = int(os.environ.get("SCHEMA_REGISTRY_RECORDS", "2000"))

USER_V1 = {"type": "record", "name": "User", "namespace": "acme",
           "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}


@pytest.fixture
def registry(kafka_broker: ThreadedBroker) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": kafka_broker.schema_registry_url})


@pytest.fixture
def topic(kafka_broker: ThreadedBroker) -> str:
    return kafka_broker.create_topic(f"sr-{uuid.uuid4().hex[:10]}")


def round_trip(kafka_broker: ThreadedBroker, topic: str, values: list[Any],
               serialize: Callable[[Any, SerializationContext], bytes | None],
               deserialize: Callable[[bytes | None, SerializationContext], Any]) -> list[Any]:
    ctx = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                         "linger.ms": 5})
    for value in values:
        producer.produce(topic, serialize(value, ctx))
        producer.poll(0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                         "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    out: list[Any] = []
    try:
        for _ in range(200):
            if len(out) >= len(values):
                break
            for message in consumer.consume(1000, 1.0):
                assert message.error() is None, message.error()
                out.append(deserialize(message.value(), ctx))
    finally:
        consumer.close()
    return out


def test_avro_round_trip_and_ids(kafka_broker: ThreadedBroker, registry: SchemaRegistryClient,
                                 topic: str) -> None:
    serializer = AvroSerializer(registry, json.dumps(USER_V1))
    deserializer = AvroDeserializer(registry)
    values = [{"name": f"user-{i}", "age": i % 100} for i in range(RECORDS)]
    assert round_trip(kafka_broker, topic, values, serializer, deserializer) == values
    latest = registry.get_latest_version(f"{topic}-value")
    assert latest.version == 1
    assert json.loads(registry.get_schema(latest.schema_id).schema_str) == USER_V1


def test_avro_evolution_per_level(registry: SchemaRegistryClient, topic: str) -> None:
    subject = f"{topic}-value"
    registry.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
    with_default = {**USER_V1, "fields": [*USER_V1["fields"],
                                          {"name": "email", "type": ["null", "string"],
                                           "default": None}]}
    without_default = {**USER_V1, "fields": [*USER_V1["fields"],
                                             {"name": "email", "type": "string"}]}
    assert registry.test_compatibility(subject, Schema(json.dumps(with_default), "AVRO"))
    assert not registry.test_compatibility(subject, Schema(json.dumps(without_default), "AVRO"))
    with pytest.raises(SchemaRegistryError) as refused:
        registry.register_schema(subject, Schema(json.dumps(without_default), "AVRO"))
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    registry.register_schema(subject, Schema(json.dumps(with_default), "AVRO"))
    # FORWARD: the old schema must read the new one's data; dropping a field without a
    # default breaks it
    registry.set_compatibility(subject, "FORWARD")
    dropped = {**USER_V1, "fields": [USER_V1["fields"][0]]}
    with pytest.raises(SchemaRegistryError) as forward:
        registry.register_schema(subject, Schema(json.dumps(dropped), "AVRO"))
    assert forward.value.error_code == 409
    registry.set_compatibility(subject, "NONE")
    registry.register_schema(subject, Schema(json.dumps(dropped), "AVRO"))
    assert registry.get_versions(subject) == [1, 2, 3]


def test_references_across_subjects(registry: SchemaRegistryClient, topic: str) -> None:
    address = {"type": "record", "name": "Address", "namespace": "acme",
               "fields": [{"name": "city", "type": "string"}]}
    registry.register_schema(f"{topic}-address", Schema(json.dumps(address), "AVRO"))
    person = {"type": "record", "name": "Person", "namespace": "acme",
              "fields": [{"name": "home", "type": "acme.Address"}]}
    refs = [SchemaReference("acme.Address", f"{topic}-address", 1)]
    schema_id = registry.register_schema(f"{topic}-value",
                                         Schema(json.dumps(person), "AVRO", refs))
    got = registry.get_schema(schema_id)
    assert [(r.name, r.subject, r.version) for r in got.references] == [
        ("acme.Address", f"{topic}-address", 1)]
    assert registry.get_referenced_by(f"{topic}-address", 1) == [schema_id]


def test_json_schema_round_trip(kafka_broker: ThreadedBroker, registry: SchemaRegistryClient,
                                topic: str) -> None:
    schema = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Event",
                         "type": "object", "properties": {"id": {"type": "integer"},
                                                          "kind": {"type": "string"}},
                         "required": ["id"]})
    values = [{"id": i, "kind": "click"} for i in range(RECORDS)]
    got = round_trip(kafka_broker, topic, values,
                     JSONSerializer(schema, registry, lambda v, _ctx: v),
                     JSONDeserializer(schema, from_dict=lambda v, _ctx: v,
                                      schema_registry_client=registry))
    assert got == values
    assert registry.get_latest_version(f"{topic}-value").schema.schema_type == "JSON"


def order_class() -> Any:
    """A protobuf message class built from a descriptor, as protoc's output would be."""
    proto = descriptor_pb2.FileDescriptorProto(name=f"acme_{uuid.uuid4().hex[:8]}.proto",
                                               package="acme", syntax="proto3")
    message = proto.message_type.add(name="Order")
    t = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="id", number=1, type=t.TYPE_STRING, label=t.LABEL_OPTIONAL)
    message.field.add(name="qty", number=2, type=t.TYPE_INT32, label=t.LABEL_OPTIONAL)
    message.field.add(name="tags", number=3, type=t.TYPE_STRING, label=t.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("acme.Order"))


def test_protobuf_round_trip(kafka_broker: ThreadedBroker, registry: SchemaRegistryClient,
                             topic: str) -> None:
    order = order_class()
    serializer = ProtobufSerializer(order, registry, {"use.deprecated.format": False})
    deserializer = ProtobufDeserializer(order, {"use.deprecated.format": False})
    values = [order(id=f"o-{i}", qty=i, tags=["a", "b"]) for i in range(RECORDS)]
    assert round_trip(kafka_broker, topic, values, serializer, deserializer) == values
    assert registry.get_latest_version(f"{topic}-value").schema.schema_type == "PROTOBUF"



def test_protobuf_imports_become_references(registry: SchemaRegistryClient, topic: str) -> None:
    """The serializer registers each imported file under a subject named after it (a "/" in
    a subject name) and refers to it; well-known types are left out."""
    t = descriptor_pb2.FieldDescriptorProto
    pool = descriptor_pool.DescriptorPool()
    timestamp = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(timestamp)
    pool.Add(timestamp)
    common_name = f"acme/common_{uuid.uuid4().hex[:8]}.proto"
    common = descriptor_pb2.FileDescriptorProto(name=common_name, package="acme",
                                                syntax="proto3")
    money = common.message_type.add(name="Money")
    money.field.add(name="cents", number=1, type=t.TYPE_INT64, label=t.LABEL_OPTIONAL)
    pool.Add(common)
    order_file = descriptor_pb2.FileDescriptorProto(
        name=f"acme/order_{uuid.uuid4().hex[:8]}.proto", package="acme", syntax="proto3",
        dependency=[common_name, "google/protobuf/timestamp.proto"])
    order = order_file.message_type.add(name="Order")
    order.field.add(name="price", number=1, type=t.TYPE_MESSAGE, type_name=".acme.Money",
                    label=t.LABEL_OPTIONAL)
    order.field.add(name="at", number=2, type=t.TYPE_MESSAGE,
                    type_name=".google.protobuf.Timestamp", label=t.LABEL_OPTIONAL)
    pool.Add(order_file)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("acme.Order"))
    serializer = ProtobufSerializer(cls, registry, {"use.deprecated.format": False})
    data = serializer(cls(), SerializationContext(topic, MessageField.VALUE))
    assert data is not None
    latest = registry.get_latest_version(f"{topic}-value")
    assert [(r.name, r.subject, r.version) for r in latest.schema.references] == [
        (common_name, common_name, 1)]
    assert common_name in registry.get_subjects()
    assert registry.get_referenced_by(common_name, 1) == [latest.schema_id]
