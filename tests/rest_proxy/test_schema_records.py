"""v3 produce with schemas (AVRO, PROTOBUF, JSONSCHEMA) through the broker's own Schema
Registry: records written over HTTP (httpx) are read back by confluent-kafka's deserializers,
schemas registered by confluent-kafka's serializers are used by the proxy, and Confluent's
schema selection rules and errors hold."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from trio_broker.testing import ThreadedBroker

ORDER_AVRO = json.dumps({
    "type": "record", "name": "Order", "namespace": "acme",
    "fields": [{"name": "id", "type": "string"}, {"name": "qty", "type": "long"},
               {"name": "note", "type": ["null", "string"], "default": None}]})
ORDER_JSON = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {"id": {"type": "string"}, "qty": {"type": "integer", "minimum": 0}},
    "required": ["id", "qty"]})
ORDER_PROTO = 'syntax = "proto3";\npackage acme;\nmessage Order {\n  string id = 1;\n  ' \
              'int64 qty = 2;\n  repeated string tags = 3;\n}\n'


def _produce(rest: httpx.Client, cluster: str, topic: str, *records: dict[str, Any],
             ) -> list[dict[str, Any]]:
    body = "".join(json.dumps(r) for r in records)
    response = rest.post(f"{cluster}/topics/{topic}/records", content=body,
                         headers={"Content-Type": "application/json"})
    return [json.loads(line) for line in response.text.split("\r\n") if line]


def _values(broker: ThreadedBroker, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": topic,
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        found: list[bytes] = []
        for _ in range(50):
            found += [m.value() for m in consumer.consume(100, timeout=0.5) if not m.error()]
            if len(found) >= count:
                return found
        raise AssertionError(f"{len(found)} of {count} records")
    finally:
        consumer.close()


def _context(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


def test_avro_raw_schema_then_id_then_latest(rest: httpx.Client, cluster: str,
                                             kafka_broker: ThreadedBroker) -> None:
    topic = kafka_broker.create_topic("rest-avro")
    first = _produce(rest, cluster, topic, {
        "partition_id": 0, "value": {"type": "AVRO", "schema": ORDER_AVRO,
                                     "data": {"id": "o-1", "qty": 3, "note": {"string": "x"}}}})
    assert first[0]["error_code"] == 200, first
    value = first[0]["value"]
    assert (value["type"], value["subject"], value["schema_version"]) == (
        "AVRO", f"{topic}-value", 1)
    schema_id = value["schema_id"]
    more = _produce(
        rest, cluster, topic,
        {"partition_id": 0, "value": {"schema_id": schema_id,
                                      "data": {"id": "o-2", "qty": 4, "note": None}}},
        {"partition_id": 0, "value": {"data": {"id": "o-3", "qty": 5, "note": None}}},
        {"partition_id": 0, "value": {"schema_version": 1,
                                      "data": {"id": "o-4", "qty": 6, "note": None}}})
    assert [r["error_code"] for r in more] == [200, 200, 200], more
    assert {r["value"]["schema_id"] for r in more} == {schema_id}

    registry = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    deserialize = AvroDeserializer(registry)
    got = [deserialize(v, _context(topic)) for v in _values(kafka_broker, topic, 4)]
    assert got == [{"id": "o-1", "qty": 3, "note": "x"}, {"id": "o-2", "qty": 4, "note": None},
                   {"id": "o-3", "qty": 5, "note": None}, {"id": "o-4", "qty": 6, "note": None}]

    bad = _produce(rest, cluster, topic,
                   {"value": {"schema_id": schema_id, "data": {"id": "o-5"}}},
                   {"value": {"schema_version": 7, "data": {"id": "o-6", "qty": 1}}},
                   {"value": {"type": "AVRO", "data": {"id": "o-7", "qty": 1}}},
                   {"value": {"schema_id": 999_999, "data": {}}})
    assert [(r["error_code"], r["message"].split(":")[0]) for r in bad] == [
        (422, "Conversion of JSON to Object failed"),
        (400, "Schema does not exist for subject"),
        (400, "value"),
        (400, "Error when fetching schema by id. schemaId = 999999")]


def test_json_schema_validates(rest: httpx.Client, cluster: str,
                               kafka_broker: ThreadedBroker) -> None:
    topic = kafka_broker.create_topic("rest-jsonschema")
    reports = _produce(rest, cluster, topic, {
        "partition_id": 0, "value": {"type": "JSONSCHEMA", "schema": ORDER_JSON,
                                     "data": {"id": "o-1", "qty": 2}}}, {
        "partition_id": 0, "value": {"type": "JSONSCHEMA", "schema": ORDER_JSON,
                                     "data": {"id": "o-2", "qty": -1}}})
    assert reports[0]["error_code"] == 200, reports
    assert reports[0]["value"]["type"] == "JSONSCHEMA"
    assert (reports[1]["error_code"], reports[1]["message"]) == (
        422, "Conversion of JSON to Object failed: -1 is less than the minimum of 0")
    registry = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    deserialize = JSONDeserializer(None, schema_registry_client=registry)
    [value] = _values(kafka_broker, topic, 1)
    assert deserialize(value, _context(topic)) == {"id": "o-1", "qty": 2}


def _order_class(fdp: Any) -> Any:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("acme.Order"))


def test_protobuf_text_and_registered_descriptor(rest: httpx.Client, cluster: str,
                                                 kafka_broker: ThreadedBroker) -> None:
    registry = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    conf = {"use.deprecated.format": False}
    # .proto text given to the proxy
    topic = kafka_broker.create_topic("rest-proto-text")
    reports = _produce(rest, cluster, topic, {
        "partition_id": 0, "value": {"type": "PROTOBUF", "schema": ORDER_PROTO,
                                     "data": {"id": "o-1", "qty": "7", "tags": ["a", "b"]}}})
    assert reports[0]["error_code"] == 200, reports
    fdp = descriptor_pb2.FileDescriptorProto(name="order.proto", package="acme", syntax="proto3")
    message = fdp.message_type.add(name="Order")
    t = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="id", number=1, type=t.TYPE_STRING, label=t.LABEL_OPTIONAL)
    message.field.add(name="qty", number=2, type=t.TYPE_INT64, label=t.LABEL_OPTIONAL)
    message.field.add(name="tags", number=3, type=t.TYPE_STRING, label=t.LABEL_REPEATED)
    order = _order_class(fdp)
    [value] = _values(kafka_broker, topic, 1)
    got = ProtobufDeserializer(order, conf)(value, _context(topic))
    assert (got.id, got.qty, list(got.tags)) == ("o-1", 7, ["a", "b"])

    # a descriptor registered by confluent-kafka's serializer, used by the proxy as latest
    topic = kafka_broker.create_topic("rest-proto-registered")
    ProtobufSerializer(order, registry, conf)(order(id="o-0"), _context(topic))
    reports = _produce(rest, cluster, topic, {"partition_id": 0,
                                              "value": {"data": {"id": "o-2", "qty": 8}}})
    assert (reports[0]["error_code"], reports[0]["value"]["type"]) == (200, "PROTOBUF"), reports
    [value] = _values(kafka_broker, topic, 1)
    got = ProtobufDeserializer(order, conf)(value, _context(topic))
    assert (got.id, got.qty) == ("o-2", 8)


def test_v2_produce_with_schemas(rest: httpx.Client, kafka_broker: ThreadedBroker) -> None:
    """v2's avro embedded format: ``value_schema`` registers, ``value_schema_id`` reuses, and
    the answer names the id; a value without a schema is Confluent's 42202."""
    topic = kafka_broker.create_topic("rest-v2-avro")
    avro_v2 = {"Content-Type": "application/vnd.kafka.avro.v2+json"}
    first = rest.post(f"/topics/{topic}", headers=avro_v2, json={
        "value_schema": ORDER_AVRO, "records": [
            {"value": {"id": "o-1", "qty": 1, "note": None}, "partition": 0}]}).json()
    schema_id = first["value_schema_id"]
    assert (first["key_schema_id"], first["offsets"][0]["error"]) == (None, None), first
    second = rest.post(f"/topics/{topic}/partitions/0", headers=avro_v2, json={
        "value_schema_id": schema_id, "records": [
            {"value": {"id": "o-2", "qty": 2, "note": {"string": "n"}}}]}).json()
    assert second["value_schema_id"] == schema_id
    registry = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    deserialize = AvroDeserializer(registry)
    got = [deserialize(v, _context(topic)) for v in _values(kafka_broker, topic, 2)]
    assert got == [{"id": "o-1", "qty": 1, "note": None}, {"id": "o-2", "qty": 2, "note": "n"}]
    missing = rest.post(f"/topics/{topic}", headers=avro_v2, json={"records": [{"value": {}}]})
    assert (missing.status_code, missing.json()) == (422, {
        "error_code": 42202,
        "message": "Request includes values but does not include value schema"})


def _v2_read(rest: httpx.Client, topic: str, fmt: str, count: int) -> list[Any]:
    """A v2 consumer instance in ``fmt`` assigned to partition 0: the values it shows."""
    group = f"{topic}-v2"
    v2 = {"content-type": "application/vnd.kafka.v2+json"}
    created = rest.post(f"/consumers/{group}", headers=v2,
                        content=json.dumps({"name": "reader", "format": fmt,
                                            "auto.offset.reset": "earliest"}))
    assert created.status_code == 200, created.text
    base = f"/consumers/{group}/instances/reader"
    try:
        assert rest.post(f"{base}/assignments", headers=v2, content=json.dumps({
            "partitions": [{"topic": topic, "partition": 0}]})).status_code == 204
        values: list[Any] = []
        for _ in range(20):
            answer = rest.get(f"{base}/records", params={"timeout": 500},
                              headers={"accept": f"application/vnd.kafka.{fmt}.v2+json"})
            assert answer.status_code == 200, answer.text
            values += [r["value"] for r in answer.json()]
            if len(values) >= count:
                return values
        raise AssertionError(f"{len(values)} of {count} records")
    finally:
        rest.delete(base, headers=v2)


def test_v2_consumers_read_schema_formats(rest: httpx.Client, cluster: str,
                                          kafka_broker: ThreadedBroker) -> None:
    """What confluent-kafka's serializers and the v3 produce wrote, read by v2 consumer
    instances in the avro, protobuf and jsonschema formats, as Confluent shows them."""
    avro = kafka_broker.create_topic("rest-v2-read-avro")
    _produce(rest, cluster, avro, {"partition_id": 0, "value": {
        "type": "AVRO", "schema": ORDER_AVRO, "data": {"id": "o-1", "qty": 3,
                                                       "note": {"string": "x"}}}})
    assert _v2_read(rest, avro, "avro", 1) == [{"id": "o-1", "qty": 3, "note": {"string": "x"}}]

    proto = kafka_broker.create_topic("rest-v2-read-proto")
    _produce(rest, cluster, proto, {"partition_id": 0, "value": {
        "type": "PROTOBUF", "schema": ORDER_PROTO, "data": {"id": "o-2", "qty": 9}}})
    assert _v2_read(rest, proto, "protobuf", 1) == [{"id": "o-2", "qty": "9"}]

    jsonschema = kafka_broker.create_topic("rest-v2-read-json")
    _produce(rest, cluster, jsonschema, {"partition_id": 0, "value": {
        "type": "JSONSCHEMA", "schema": ORDER_JSON, "data": {"id": "o-3", "qty": 1}}})
    assert _v2_read(rest, jsonschema, "jsonschema", 1) == [{"id": "o-3", "qty": 1}]
    # a record that is not in the format asked for is Confluent's 50002, naming the record
    plain = kafka_broker.create_topic("rest-v2-read-plain")
    _produce(rest, cluster, plain, {"partition_id": 0, "value": {"type": "JSON", "data": 1}})
    with pytest.raises(AssertionError, match="cannot be read as avro: not in Confluent's wire"):
        _v2_read(rest, plain, "avro", 1)


@pytest.mark.broker_config(schema_registry_listener="", rest_proxy_listener="http://127.0.0.1:0")
def test_without_a_registry(rest: httpx.Client, cluster: str,
                            kafka_broker: ThreadedBroker) -> None:
    """Untyped values stay JSON; a schema is refused, naming the setting that serves one."""
    topic = kafka_broker.create_topic("rest-no-registry")
    reports = _produce(rest, cluster, topic, {"value": {"data": {"a": 1}}},
                       {"value": {"type": "AVRO", "schema": ORDER_AVRO, "data": {}}})
    assert reports[0]["error_code"] == 200
    assert reports[0]["value"]["type"] == "JSON"
    assert (reports[1]["error_code"], reports[1]["message"]) == (
        400, "value: a schema needs the Schema Registry, which this broker does not serve: set "
             "schema.registry.listener")


@pytest.mark.broker_config(rest_proxy_listener="http://127.0.0.1:0")
def test_a_subject_of_another_context_has_its_own_ids(rest: httpx.Client, cluster: str,
                                                      kafka_broker: ThreadedBroker) -> None:
    topic = kafka_broker.create_topic("rest-context")
    first = _produce(rest, cluster, topic, {"partition_id": 0, "value": {
        "type": "AVRO", "schema": ORDER_AVRO, "data": {"id": "o-1", "qty": 1, "note": None}}})
    assert first[0]["value"]["schema_id"] == 1, first
    # id 1 of another context is another schema: the proxy must not write with the first's
    other = json.dumps({"type": "record", "name": "Payment", "fields": [
        {"name": "cents", "type": "long"}]})
    subject = f":.linked:{topic}-value"
    registry = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    assert registry.register_schema(subject, Schema(other, "AVRO")) == 1
    second = _produce(rest, cluster, topic, {"partition_id": 0, "value": {
        "subject": subject, "schema_version": 1, "data": {"cents": 250}}})
    assert second[0]["error_code"] == 200, second
    assert second[0]["value"]["schema_id"] == 1
    value = _values(kafka_broker, topic, 2)[1]
    deserialize = AvroDeserializer(registry, conf={
        "subject.name.strategy": lambda ctx, name: subject})
    assert deserialize(value, _context(topic)) == {"cents": 250}
