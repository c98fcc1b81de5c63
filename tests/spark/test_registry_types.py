"""The Schema Registry formats without Spark's JVM: schemas mapped to Spark types and back,
Confluent's framing, a Protobuf schema stored as .proto text, and the options' mistakes."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pyarrow as pa
import pytest
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from pyspark.sql.types import LongType, StringType, StructField, StructType

from trio_broker.spark._codecs import (
    ProtobufCodec,
    SerializationError,
    read_indexes,
    schema_id,
    write_indexes,
)
from trio_broker.spark._formats import (
    ColumnFormat,
    FormatOption,
    decode_batch,
    decode_column,
    parse_format_options,
    resolve_read,
)
from trio_broker.spark._registry_client import (
    RegisteredSchema,
    RegistryClient,
    SchemaRegistryError,
)
from trio_broker.spark._schema_types import (
    UnmappableSchema,
    avro_to_spark,
    json_schema_to_spark,
    spark_to_avro,
)

pytestmark = pytest.mark.spark


def test_avro_types_map_as_sparks_from_avro() -> None:
    schema = {"type": "record", "name": "R", "namespace": "n", "fields": [
        {"name": "a", "type": ["null", "long"]},
        {"name": "b", "type": ["int", "long"]},
        {"name": "c", "type": {"type": "fixed", "name": "F", "size": 4}},
        {"name": "d", "type": "F"},
        {"name": "e", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "f", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "g", "type": {"type": "array", "items": ["null", "double"]}},
    ]}
    assert avro_to_spark(schema).simpleString() == (
        "struct<a:bigint,b:bigint,c:binary,d:binary,e:string,f:timestamp_ntz,g:array<double>>")
    assert avro_to_spark(["null", "string", "long"]).simpleString() == (
        "struct<member0:string,member1:bigint>")
    recursive = {"type": "record", "name": "Node", "fields": [
        {"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(UnmappableSchema, match="recursive Avro type Node"):
        avro_to_spark(recursive)


def test_avro_unions_of_several_types_read_as_member_structs(kafka_broker: Any,
                                                           unique_topic: Any) -> None:
    """What AvroSerializer writes into a union of several types reads as Spark's from_avro
    shapes it: the member of the value's branch set, the others null."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = unique_topic("avro-union")
    schema = {"type": "record", "name": "Event", "namespace": "acme", "fields": [
        {"name": "id", "type": "long"},
        {"name": "payload", "type": [
            "null", "long", "string",
            {"type": "record", "name": "Click", "fields": [{"name": "x", "type": "int"}]},
            {"type": "array", "items": ["null", "Click", "boolean"]}]}]}
    serialize = AvroSerializer(SchemaRegistryClient({"url": kafka_broker.schema_registry_url}),
                               json.dumps(schema))
    payloads = [None, 5, "s", {"x": 1}, [{"x": 2}, None, True]]
    ctx = SerializationContext(topic, MessageField.VALUE)
    framed = [serialize({"id": i, "payload": p}, ctx) for i, p in enumerate(payloads)]
    options = parse_format_options({"value.format": "avro",
                                    "schema.registry.url": kafka_broker.schema_registry_url})
    (fmt,) = resolve_read(options, [topic])
    assert fmt.spark_type.simpleString() == (
        "struct<id:bigint,payload:struct<member0:bigint,member1:string,member2:struct<x:int>,"
        "member3:array<struct<member0:struct<x:int>,member1:boolean>>>>")
    batch = pa.record_batch({"value": pa.array(framed, pa.binary()),
                             "offset": pa.array(range(len(framed)), pa.int64())})
    got = [v["payload"] for v in decode_batch([fmt], batch, f"{topic}-0").column(0).to_pylist()]
    empty = dict.fromkeys(("member0", "member1", "member2", "member3"))
    assert got == [None, {**empty, "member0": 5}, {**empty, "member1": "s"},
                   {**empty, "member2": {"x": 1}},
                   {**empty, "member3": [{"member0": {"x": 2}, "member1": None}, None,
                                         {"member0": None, "member1": True}]}]


def test_derived_avro_schema_makes_nullable_fields_optional() -> None:
    struct = StructType([StructField("id", LongType(), False),
                         StructField("name", StringType(), True)])
    assert spark_to_avro(struct) == {"type": "record", "name": "topLevelRecord", "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"], "default": None}]}


def test_json_schema_types() -> None:
    schema = {"type": "object", "required": ["id"], "properties": {
        "id": {"type": "integer"}, "tags": {"$ref": "#/definitions/tags"},
        "extra": {"type": "object", "additionalProperties": {"type": "number"}}},
        "definitions": {"tags": {"type": ["array", "null"], "items": {"type": "string"}}}}
    mapped = json_schema_to_spark(schema)
    assert mapped.simpleString() == "struct<id:bigint,tags:array<string>,extra:map<string,double>>"
    assert isinstance(mapped, StructType)
    assert [f.nullable for f in mapped.fields] == [False, True, True]
    with pytest.raises(UnmappableSchema, match="has no Spark type"):
        json_schema_to_spark({"anyOf": [{"type": "string"}, {"type": "integer"}]})


def test_framing() -> None:
    for indexes in ([0], [1], [0, 2], [3, 1, 4]):
        encoded = write_indexes(indexes)
        assert read_indexes(memoryview(encoded + b"rest")) == (indexes, len(encoded))
    # what confluent-kafka's serializer writes for the same indexes
    import io
    for indexes in ([0], [2, 1]):
        buf = io.BytesIO()
        ProtobufSerializer._encode_varints(buf, indexes)
        assert buf.getvalue() == write_indexes(indexes)
    assert schema_id(b"\x00\x00\x00\x00\x07abc") == 7
    with pytest.raises(SerializationError, match="magic byte 1"):
        schema_id(b"\x01\x00\x00\x00\x07abc")
    with pytest.raises(SerializationError, match="too short"):
        schema_id(b"\x00\x00")


def test_a_value_not_in_the_wire_format_names_its_offset(kafka_broker: Any) -> None:
    fmt = ColumnFormat("value", "avro", kafka_broker.schema_registry_url, "s",
                       RegisteredSchema(1, "AVRO", '"string"'), StringType())
    batch = pa.record_batch({"value": pa.array([b"plain text"], pa.binary()),
                             "offset": pa.array([41], pa.int64())})
    with pytest.raises(SerializationError, match=r"^value of offset 41 of orders-0: not in "
                                                 r"Confluent's wire format: magic byte 112"):
        decode_batch([fmt], batch, "orders-0")


def test_protobuf_schema_stored_as_text(kafka_broker: Any, unique_topic: Any) -> None:
    """A .proto text schema (registered through the REST API, as Confluent's tools do) is read
    with the registry's parser: nested messages, enums, maps, repeated fields."""
    subject = unique_topic("proto-text") + "-value"
    text = """syntax = "proto3";
package shop;
message Order {
  enum Kind { NEW = 0; PAID = 1; }
  message Line { string sku = 1; int32 qty = 2; }
  string id = 1;
  Kind kind = 2;
  repeated Line lines = 3;
  map<string, int64> totals = 4;
}
"""
    answer = httpx.post(f"{kafka_broker.schema_registry_url}/subjects/{subject}/versions",
                        json={"schema": text, "schemaType": "PROTOBUF"})
    assert answer.status_code == 200, answer.text
    (fmt,) = resolve_read([FormatOption("value", "protobuf", kafka_broker.schema_registry_url,
                                        subject, None)], [])
    assert fmt.spark_type.simpleString() == (
        "struct<id:string,kind:string,lines:array<struct<sku:string,qty:int>>,"
        "totals:map<string,bigint>>")
    codec = ProtobufCodec(RegistryClient(kafka_broker.schema_registry_url), fmt.schema)
    value = {"id": "o1", "kind": "PAID", "lines": [{"sku": "a", "qty": 2}],
             "totals": {"eur": 5}}
    encoded = codec.encoder("shop.Order")(value)
    assert codec.decode(b"\x00\x00\x00\x00\x01" + encoded) == value
    line = codec.encoder("shop.Order.Line")({"sku": "b", "qty": 1})
    assert line.startswith(write_indexes([0, 0]))


def test_option_mistakes(kafka_broker: Any) -> None:
    with pytest.raises(ValueError, match=r"'value\.format' must be one of binary, string, avro"):
        parse_format_options({"value.format": "xml"})
    with pytest.raises(ValueError, match=r"'schema\.registry\.url' must be specified"):
        parse_format_options({"Key.Format": "avro"})
    options = parse_format_options({"value.format": "avro",
                                    "schema.registry.url": kafka_broker.schema_registry_url})
    with pytest.raises(ValueError, match=r"'value\.subject' must be specified"):
        resolve_read(options, ["a", "b"])
    with pytest.raises(SchemaRegistryError, match="Subject 'nothing-here-value' not found"):
        resolve_read(options, ["nothing-here"])
    with pytest.raises(SchemaRegistryError, match=r"no Schema Registry reachable at "
                                                  r"http://127\.0\.0\.1:9"):
        RegistryClient("http://127.0.0.1:9", timeout_s=5).schema_by_id(1)
    subject = "json-only-value"
    httpx.post(f"{kafka_broker.schema_registry_url}/subjects/{subject}/versions",
               json={"schema": json.dumps({"type": "string"}), "schemaType": "JSON"})
    with pytest.raises(ValueError, match=r"holds a JSON schema \(id \d+\), not AVRO"):
        resolve_read(options, ["json-only"])


def test_protobuf_imports_are_read_from_references(kafka_broker: Any, unique_topic: Any) -> None:
    """What ProtobufSerializer registers for a file with an import (a reference to the imported
    file's subject) and a well-known type decodes into nested structs."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf import (
        descriptor_pb2,
        descriptor_pool,
        message_factory,
        timestamp_pb2,
    )

    topic = unique_topic("pb-refs")
    t = descriptor_pb2.FieldDescriptorProto
    pool = descriptor_pool.DescriptorPool()
    timestamp = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(timestamp)
    pool.Add(timestamp)
    common = descriptor_pb2.FileDescriptorProto(name=f"refs/{topic}-common.proto",
                                                package="refs", syntax="proto3")
    common.message_type.add(name="Money").field.add(name="cents", number=1,
                                                    type=t.TYPE_INT64, label=t.LABEL_OPTIONAL)
    pool.Add(common)
    order_file = descriptor_pb2.FileDescriptorProto(
        name=f"refs/{topic}-order.proto", package="refs", syntax="proto3",
        dependency=[common.name, "google/protobuf/timestamp.proto"])
    order = order_file.message_type.add(name="Order")
    order.field.add(name="price", number=1, type=t.TYPE_MESSAGE, type_name=".refs.Money",
                    label=t.LABEL_OPTIONAL)
    order.field.add(name="at", number=2, type=t.TYPE_MESSAGE,
                    type_name=".google.protobuf.Timestamp", label=t.LABEL_OPTIONAL)
    pool.Add(order_file)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("refs.Order"))
    serialize = ProtobufSerializer(
        cls, SchemaRegistryClient({"url": kafka_broker.schema_registry_url}),
        {"use.deprecated.format": False})
    framed = serialize(cls(price={"cents": 250}),
                       SerializationContext(topic, MessageField.VALUE))
    options = parse_format_options({"value.format": "protobuf",
                                    "schema.registry.url": kafka_broker.schema_registry_url})
    (fmt,) = resolve_read(options, [topic])
    assert fmt.spark_type.simpleString() == (
        "struct<price:struct<cents:bigint>,at:struct<seconds:bigint,nanos:int>>")
    batch = pa.record_batch({"value": pa.array([framed], pa.binary()),
                             "offset": pa.array([0], pa.int64())})
    decoded = decode_batch([fmt], batch, f"{topic}-0").column(0).to_pylist()
    assert decoded == [{"price": {"cents": 250}, "at": None}]


def test_the_sink_registers_or_looks_up_as_the_serializers_do(kafka_broker: Any,
                                                              unique_topic: Any) -> None:
    from pyspark.sql.types import StructType as Struct

    from trio_broker.spark._formats import resolve_write

    topic = unique_topic("sink-register")
    url = kafka_broker.schema_registry_url
    options = {"value.format": "avro", "schema.registry.url": url}
    first = Struct([StructField("id", LongType(), False)])
    with pytest.raises(SchemaRegistryError, match="error code 40401"):  # nothing registered
        resolve_write(parse_format_options(options), Struct([StructField("value", first)]),
                      [topic], {**options, "auto.register.schemas": "false"})
    (fmt,) = resolve_write(parse_format_options(options), Struct([StructField("value", first)]),
                           [topic], options)
    (again,) = resolve_write(parse_format_options(options),
                             Struct([StructField("value", first)]), [topic],
                             {**options, "auto.register.schemas": "false"})
    assert again.schema.id == fmt.schema.id
    with pytest.raises(ValueError, match=r"'auto\.register\.schemas' must be true or false"):
        resolve_write(parse_format_options(options), Struct([StructField("value", first)]),
                      [topic], {**options, "auto.register.schemas": "yes"})
    changed = Struct([StructField("id", StringType(), False)])  # not BACKWARD compatible
    with pytest.raises(SchemaRegistryError, match="error code 409"):
        resolve_write(parse_format_options(options), Struct([StructField("value", changed)]),
                      [topic], options)


def test_each_schema_id_is_fetched_once_per_process(tmp_path: Any) -> None:
    """Values of a known id decode after the registry is gone; an id not seen before then
    fails with the registry's address."""
    from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

    broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                               "schema_registry_listener": "http://127.0.0.1:0"}).start()
    try:
        url = broker.schema_registry_url
        assert url is not None
        client = RegistryClient(url)
        ids = [client.register("cached-value", RegisteredSchema(0, "JSON", json.dumps(
            {"type": "object", "properties": {"n": {"type": "integer"}}, "title": title})))
            for title in ("a", "b")]
        fmt = ColumnFormat("value", "json_schema", url, "cached-value",
                           client.schema_by_id(ids[0]),
                           StructType([StructField("n", LongType())]))

        def column(schema: int) -> pa.Array:
            return pa.array([b"\x00" + schema.to_bytes(4, "big") + b'{"n": 7}'] * 100)

        assert decode_column(fmt, column(ids[0]), str).to_pylist() == [{"n": 7}] * 100
    finally:
        broker.stop()
    assert decode_column(fmt, column(ids[0]), str).to_pylist() == [{"n": 7}] * 100
    with pytest.raises(SchemaRegistryError, match=f"value of 0: no Schema Registry reachable "
                                                  f"at {re.escape(url)}"):
        decode_column(fmt, column(ids[1]), str)
