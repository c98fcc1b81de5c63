"""``value.format`` avro / protobuf / json_schema against the broker's Schema Registry, checked
with confluent-kafka's own serializers on the other side: what the sink writes their
deserializers read exactly, and what their serializers write the source reads exactly."""

from __future__ import annotations

import datetime
import decimal
import json
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from trio_broker.spark import user_message

pytestmark = pytest.mark.spark

ROWS = 200
UTC = datetime.UTC

ORDER_AVRO = {"type": "record", "name": "Order", "namespace": "acme", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": ["null", "string"], "default": None},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10,
                                "scale": 2}},
    {"name": "lines", "type": {"type": "array", "items": {
        "type": "record", "name": "Line",
        "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
    {"name": "attrs", "type": {"type": "map", "values": "string"}},
    {"name": "blob", "type": ["null", "bytes"], "default": None},
]}


def _order(i: int) -> dict[str, Any]:
    return {"id": i, "customer": None if i % 5 == 0 else f"c-{i}",
            "status": "PAID" if i % 2 else "NEW",
            "at": datetime.datetime(2024, 5, 1, tzinfo=UTC) + datetime.timedelta(seconds=i),
            "day": datetime.date(2024, 5, 1) + datetime.timedelta(days=i % 30),
            "amount": decimal.Decimal(i) / 4,
            "lines": [{"sku": f"s{j}", "qty": j} for j in range(i % 3)],
            "attrs": {"k": str(i)} if i % 4 else {}, "blob": bytes([i % 256]) if i % 3 else None}


def _produce(bootstrap: str, topic: str, values: list[bytes | None]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0


def _consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    return [value for _key, value in _consume_pairs(bootstrap, topic, count)]


def _consume_pairs(bootstrap: str, topic: str, count: int) -> list[tuple[bytes, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    out: list[tuple[bytes, bytes]] = []
    try:
        for _ in range(100):
            if len(out) >= count:
                break
            for message in consumer.consume(1000, 1.0):
                assert message.error() is None, message.error()
                out.append((message.key(), message.value()))
    finally:
        consumer.close()
    return out


def _reader(spark: Any, broker: Any, topic: str, fmt: str, **options: str) -> Any:
    return (spark.read.format("trio_broker")
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("subscribe", topic).option("value.format", fmt)
            .option("schema.registry.url", broker.schema_registry_url).options(**options).load())


def _write(df: Any, broker: Any, topic: str, fmt: str, **options: str) -> None:
    (df.write.format("trio_broker").mode("append")
     .option("kafka.bootstrap.servers", broker.bootstrap_servers).option("topic", topic)
     .option("value.format", fmt).option("schema.registry.url", broker.schema_registry_url)
     .options(**options).save())


def test_avro_written_by_serializer_is_read_into_structs(spark: Any, kafka_broker: Any,
                                                        unique_topic: Any) -> None:
    topic = kafka_broker.create_topic(unique_topic("avro-in"), partitions=2)
    registry = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    serialize = AvroSerializer(registry, json.dumps(ORDER_AVRO))
    ctx = SerializationContext(topic, MessageField.VALUE)
    values = [_order(i) for i in range(ROWS)]
    _produce(kafka_broker.bootstrap_servers, topic,
             [serialize(v, ctx) for v in values] + [None])  # and a tombstone

    df = _reader(spark, kafka_broker, topic, "avro")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,customer:string,status:string,at:timestamp,day:date,"
        "amount:decimal(10,2),lines:array<struct<sku:string,qty:int>>,attrs:map<string,string>,"
        "blob:binary>")
    rows = [r.value for r in df.collect()]
    assert rows.count(None) == 1
    got = sorted((r.asDict(recursive=True) for r in rows if r is not None),
                 key=lambda v: v["id"])
    for value in got:
        value["at"] = value["at"].astimezone(UTC)  # Spark gives local times
        value["blob"] = None if value["blob"] is None else bytes(value["blob"])
    assert got == values


def test_avro_written_from_structs_is_read_by_deserializer(spark: Any, kafka_broker: Any,
                                                          unique_topic: Any) -> None:
    topic = kafka_broker.create_topic(unique_topic("avro-out"), partitions=2)
    df = spark.range(ROWS).selectExpr(
        "named_struct('id', id, 'name', IF(id % 7 = 0, NULL, concat('n', id)), "
        "'score', cast(id AS double) / 8, 'tags', array(cast(id % 3 AS string)), "
        "'props', map('p', cast(id AS int)), "
        "'at', timestamp_millis(1714521600000 + id)) AS value",
        "named_struct('user', id % 10) AS key")
    _write(df, kafka_broker, topic, "avro", **{"key.format": "json_schema"})

    registry = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    deserialize = AvroDeserializer(registry)
    deserialize_key = JSONDeserializer(None, from_dict=lambda v, _ctx: v,
                                       schema_registry_client=registry)
    ctx = SerializationContext(topic, MessageField.VALUE)
    key_ctx = SerializationContext(topic, MessageField.KEY)
    pairs = [(deserialize_key(k, key_ctx), deserialize(v, ctx))
             for k, v in _consume_pairs(kafka_broker.bootstrap_servers, topic, ROWS)]
    assert all(key == {"user": value["id"] % 10} for key, value in pairs)
    got = sorted((value for _key, value in pairs), key=lambda v: v["id"])
    assert got == [{"id": i, "name": None if i % 7 == 0 else f"n{i}", "score": i / 8,
                    "tags": [str(i % 3)], "props": {"p": i},
                    "at": datetime.datetime.fromtimestamp(1714521600 + i / 1000, UTC)}
                   for i in range(ROWS)]
    latest = registry.get_latest_version(f"{topic}-value")
    assert json.loads(latest.schema.schema_str)["name"] == "topLevelRecord"
    assert registry.get_latest_version(f"{topic}-key").schema.schema_type == "JSON"
    # the same rows again: the same schema, so the same id, registered once
    _write(df, kafka_broker, topic, "avro", **{"key.format": "json_schema"})
    assert registry.get_versions(f"{topic}-value") == [1]


def _order_class() -> Any:
    proto = descriptor_pb2.FileDescriptorProto(name="acme/spark_order.proto", package="acme",
                                               syntax="proto3")
    message = proto.message_type.add(name="Order")
    t = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="id", number=1, type=t.TYPE_STRING, label=t.LABEL_OPTIONAL)
    message.field.add(name="qty", number=2, type=t.TYPE_INT64, label=t.LABEL_OPTIONAL)
    message.field.add(name="tags", number=3, type=t.TYPE_STRING, label=t.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("acme.Order"))


def test_protobuf_round_trip(spark: Any, kafka_broker: Any, unique_topic: Any) -> None:
    """ProtobufSerializer -> the source -> the sink -> ProtobufDeserializer."""
    source, sink = (kafka_broker.create_topic(unique_topic(n)) for n in ("pb-in", "pb-out"))
    registry = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    order = _order_class()
    conf = {"use.deprecated.format": False}
    serialize = ProtobufSerializer(order, registry, conf)
    values = [order(id=f"o-{i}", qty=i * 1000, tags=["a"] * (i % 3)) for i in range(ROWS)]
    _produce(kafka_broker.bootstrap_servers, source,
             [serialize(v, SerializationContext(source, MessageField.VALUE)) for v in values])

    df = _reader(spark, kafka_broker, source, "protobuf")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:string,qty:bigint,tags:array<string>>")
    assert sorted(r.value.qty for r in df.collect()) == [i * 1000 for i in range(ROWS)]
    _write(df.select("value"), kafka_broker, sink, "protobuf")

    latest = registry.get_latest_version(f"{sink}-value").schema
    fdp = descriptor_pb2.FileDescriptorProto.FromString(__import__("base64").b64decode(
        latest.schema_str))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    written = message_factory.GetMessageClass(pool.FindMessageTypeByName("TopLevelRecord"))
    deserialize = ProtobufDeserializer(written, conf)
    got = sorted((deserialize(v, SerializationContext(sink, MessageField.VALUE))
                  for v in _consume(kafka_broker.bootstrap_servers, sink, ROWS)),
                 key=lambda m: m.qty)
    assert [(m.id, m.qty, list(m.tags)) for m in got] == [
        (v.id, v.qty, list(v.tags)) for v in values]


def test_json_schema_round_trip(spark: Any, kafka_broker: Any, unique_topic: Any) -> None:
    """JSONSerializer -> the source -> the sink -> JSONDeserializer; a value the registered
    schema refuses fails the write with the reason."""
    source, sink = (kafka_broker.create_topic(unique_topic(n)) for n in ("js-in", "js-out"))
    registry = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    schema = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#",
                         "title": "Event", "type": "object",
                         "properties": {"id": {"type": "integer"}, "kind": {"type": "string"},
                                        "tags": {"type": "array", "items": {"type": "string"}}},
                         "required": ["id", "kind", "tags"]})
    serialize = JSONSerializer(schema, registry, lambda v, _ctx: v)
    values = [{"id": i, "kind": "click" if i % 2 else "view", "tags": ["x"] * (i % 2)}
              for i in range(ROWS)]
    _produce(kafka_broker.bootstrap_servers, source,
             [serialize(v, SerializationContext(source, MessageField.VALUE)) for v in values])

    df = _reader(spark, kafka_broker, source, "json_schema")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,kind:string,tags:array<string>>")
    _write(df.select("value"), kafka_broker, sink, "json_schema")
    deserialize = JSONDeserializer(None, from_dict=lambda v, _ctx: v,
                                   schema_registry_client=registry)
    got = sorted((deserialize(v, SerializationContext(sink, MessageField.VALUE))
                  for v in _consume(kafka_broker.bootstrap_servers, sink, ROWS)),
                 key=lambda v: v["id"])
    assert got == values

    with pytest.raises(Exception) as failed:  # noqa: PT011 - Spark's exception types vary
        _reader(spark, kafka_broker, source, "json_schema",
                **{"value.subject": "no-such-subject"}).collect()
    assert user_message(failed.value) == (
        f"Schema Registry at {kafka_broker.schema_registry_url}: Subject 'no-such-subject' "
        "not found. (error code 40401)")


def test_export_writes_the_decoded_values(spark: Any, kafka_broker: Any, unique_topic: Any,
                                          tmp_path: Any) -> None:
    """``trio-broker export --option value.format=avro``: the Parquet files (pyarrow writer)
    and the JSON files (Spark's writer) hold the values as structs; importing the Parquet
    files with ``value.format=avro`` writes the same values."""
    import pyarrow.dataset as ds

    from trio_broker.cli import main as cli_main

    topic = kafka_broker.create_topic(unique_topic("avro-export"), partitions=2)
    registry = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    schema = {"type": "record", "name": "Click", "fields": [
        {"name": "id", "type": "long"}, {"name": "page", "type": ["null", "string"]}]}
    serialize = AvroSerializer(registry, json.dumps(schema))
    values = [{"id": i, "page": None if i % 3 == 0 else f"/p{i}"} for i in range(ROWS)]
    _produce(kafka_broker.bootstrap_servers, topic,
             [serialize(v, SerializationContext(topic, MessageField.VALUE)) for v in values])
    args = ["export", "--bootstrap-server", kafka_broker.bootstrap_servers, "--topic", topic,
            "--master", "local[2]", "--option", "value.format=avro",
            "--option", f"schema.registry.url={kafka_broker.schema_registry_url}"]

    assert cli_main([*args, "--out", str(tmp_path / "parquet")]) == 0
    table = ds.dataset(tmp_path / "parquet", format="parquet").to_table()
    assert sorted(table.column("value").to_pylist(), key=lambda v: v["id"]) == values

    # and back: the structs imported with value.format=avro are the values produced
    from rich.console import Console

    from trio_broker.spark.importer import ImportJob, ImportSettings

    back = kafka_broker.create_topic(unique_topic("avro-import"), partitions=2)
    ImportJob(ImportSettings(
        bootstrap_servers=kafka_broker.bootstrap_servers, source=str(tmp_path / "parquet"),
        topic=back, master="local[2]",
        options={"value.format": "avro", "value.subject": f"{topic}-value",
                 "use.latest.version": "true",  # the schema the values were written with
                 "schema.registry.url": kafka_broker.schema_registry_url})).run(
        Console(quiet=True), interactive=False)
    deserialize = AvroDeserializer(registry)
    ctx = SerializationContext(back, MessageField.VALUE)
    assert sorted((deserialize(v, ctx) for v in _consume(kafka_broker.bootstrap_servers, back,
                                                         ROWS)), key=lambda v: v["id"]) == values

    assert cli_main([*args, "--out", str(tmp_path / "json"), "--format", "json"]) == 0
    lines = [json.loads(line) for path in (tmp_path / "json").glob("*.json")
             for line in path.read_text().splitlines()]
    assert sorted((line["value"] for line in lines), key=lambda v: v["id"]) == [
        {k: v for k, v in value.items() if v is not None} for value in values]
