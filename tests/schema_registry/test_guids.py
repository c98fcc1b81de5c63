"""Confluent's schema GUIDs: each schema's is the MD5 of its content as a UUID, served by
``GET /schemas/guids/{guid}`` and carried in a record header by confluent-kafka's
``header_schema_id_serializer``."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import uuid

import httpx
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient, header_schema_id_serializer
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from trio_broker.testing import ThreadedBroker

ORDER = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "id", "type": "string"}, {"name": "qty", "type": "int"}]}


def md5_uuid(*parts: bytes) -> str:
    return str(uuid.UUID(bytes=hashlib.md5(b"".join(parts)).digest()))


def test_guid_is_the_content_digest_and_resolves(http: httpx.Client) -> None:
    text = json.dumps(ORDER, separators=(",", ":"))
    registered = http.post("/subjects/g-orders-value/versions", json={"schema": text}).json()
    guid = md5_uuid(text.encode())
    assert registered == {"id": registered["id"], "guid": guid}
    # the same content under another subject: the same id and GUID
    assert http.post("/subjects/g-orders-copy/versions", json={"schema": text}).json() == (
        registered)
    version = http.get("/subjects/g-orders-value/versions/1").json()
    assert version["guid"] == guid
    assert http.get(f"/schemas/ids/{registered['id']}").json()["guid"] == guid
    assert http.post("/subjects/g-orders-value", json={"schema": text}).json()["guid"] == guid
    assert http.get(f"/schemas/guids/{guid}").json() == {"guid": guid, "schema": text}
    # Confluent also reads a GUID written as 32 hex digits
    assert http.get(f"/schemas/guids/{guid.replace('-', '')}").json()["guid"] == guid
    assert http.get(f"/schemas/guids/{guid}/ids").json() == [
        {"context": ".", "id": registered["id"]}]
    for unknown in (str(uuid.uuid4()), "not-a-guid"):
        missing = http.get(f"/schemas/guids/{unknown}")
        assert missing.status_code == 404
        assert missing.json() == {"error_code": 40403, "message": f"Schema {unknown} not found"}
        assert http.get(f"/schemas/guids/{unknown}/ids").json() == []


def test_guid_hashes_references_and_contract(http: httpx.Client) -> None:
    inner = {"type": "record", "name": "Item", "namespace": "shop",
             "fields": [{"name": "sku", "type": "string"}]}
    assert http.post("/subjects/g-item/versions", json={"schema": json.dumps(inner)}).is_success
    outer = json.dumps({"type": "record", "name": "Cart", "namespace": "shop",
                        "fields": [{"name": "item", "type": "shop.Item"}]}, separators=(",", ":"))
    ref = {"name": "shop.Item", "subject": "g-item", "version": 1}
    metadata = {"properties": {"team": "t", "owner": "o"}, "sensitive": ["b", "a"]}
    rules = {"domainRules": [{"name": "r", "kind": "CONDITION", "mode": "WRITE",
                              "type": "CEL", "expr": "true", "disabled": True}]}
    body = {"schema": outer, "references": [ref], "metadata": metadata, "ruleSet": rules}
    guid = http.post("/subjects/g-cart/versions", json=body).json()["guid"]
    assert guid == md5_uuid(
        outer.encode(), b"shop.Item", b"g-item", struct.pack(">i", 1),
        b"\x01", b"owner", b"o", b"team", b"t", b"a", b"b",
        b"\x01", b"r", b"CONDITION", b"WRITE", b"CEL", b"true", b"\x01")
    assert http.get(f"/schemas/guids/{guid}").json()["references"] == [ref]


def test_header_schema_id_round_trip(kafka_broker: ThreadedBroker) -> None:
    url = kafka_broker.schema_registry_url
    topic = kafka_broker.create_topic(f"guid-{uuid.uuid4().hex[:8]}")
    serializer = AvroSerializer(SchemaRegistryClient({"url": url}), json.dumps(ORDER),
                                conf={"schema.id.serializer": header_schema_id_serializer})
    # confluent-kafka refuses a value of 5 bytes or fewer even when the id is in a header
    values = [{"id": f"order-{i:04d}", "qty": i} for i in range(5)]
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for value in values:
        ctx = SerializationContext(topic, MessageField.VALUE, [])
        producer.produce(topic, serializer(value, ctx), headers=ctx.headers)
    assert producer.flush(30) == 0
    guid = httpx.get(f"{url}/subjects/{topic}-value/versions/latest").json()["guid"]
    # a fresh client, so the GUID is resolved by the registry, not a cache
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": url}))
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                         "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    out = []
    try:
        for _ in range(50):
            if len(out) >= len(values):
                break
            for message in consumer.consume(10, 1.0):
                assert message.error() is None, message.error()
                headers = message.headers() or []
                assert headers == [("__value_schema_id", b"\x01" + uuid.UUID(guid).bytes)]
                out.append(deserializer(message.value(), SerializationContext(
                    topic, MessageField.VALUE, headers)))
    finally:
        consumer.close()
    assert out == values


def test_a_records_md5_is_its_guid(kafka_broker: ThreadedBroker, http: httpx.Client) -> None:
    """Confluent writes the content's digest as ``md5`` when it encodes the metadata: the
    record's digest is then the GUID."""
    digest = hashlib.md5(b"as Confluent hashed it").digest()
    key = {"keytype": "SCHEMA", "subject": "g-imported", "version": 1, "magic": 1}
    value = {"subject": "g-imported", "version": 1, "id": 900, "md5": base64.b64encode(
        digest).decode(), "references": [], "schema": '"bytes"', "deleted": False}
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce("_schemas", json.dumps(value).encode(), json.dumps(key).encode())
    assert producer.flush(10) == 0
    guid = str(uuid.UUID(bytes=digest))
    assert http.get("/subjects/g-imported/versions/1").json()["guid"] == guid
    assert http.get(f"/schemas/guids/{guid}").json() == {"guid": guid, "schema": '"bytes"'}
