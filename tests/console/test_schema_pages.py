"""The console's Schema Registry pages against a broker serving the registry: the subjects list,
a subject's versions, config and mode, the diff of two versions, escaping of schemas and subject
names, and no pages (and no link) on a broker without a registry."""

from __future__ import annotations

import html
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
)
from confluent_kafka.admin import ResourceType as AclResource
from confluent_kafka.schema_registry import (
    Schema,
    SchemaRegistryClient,
    header_schema_id_serializer,
)
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from playwright.sync_api import Page, expect

from tests.schema_registry.test_basic_auth import AUTHORIZER
from tests.schema_registry.test_clients import order_class
from tests.security_files import password
from trio_broker.testing import ThreadedBroker

from .conftest import console_broker, console_url, shoot

USER_V1 = {"type": "record", "name": "User", "namespace": "acme",
           "fields": [{"name": "name", "type": "string"}]}
USER_V2 = {**USER_V1, "fields": [*USER_V1["fields"],
                                 {"name": "age", "type": "int", "default": 0}]}
XSS = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedBroker]:
    started = console_broker(tmp_path_factory.mktemp("schemas"),
                             schema_registry_listener="http://127.0.0.1:0")
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def client(registry_broker: ThreadedBroker) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry_broker.schema_registry_url})


def _row(page_html: str, subject: str) -> dict[str, str]:
    row = page_html.split(f'data-subject="{html.escape(subject)}"', 1)[1].split("</tr>", 1)[0]
    cells = dict(re.findall(r'<td class="(?:num )?([a-z]+)">([^<]*)<', row))
    return {**cells, "deleted": str("soft-deleted" in row)}


def test_subjects_subject_and_diff(registry_broker: ThreadedBroker,
                                   client: SchemaRegistryClient) -> None:
    client.register_schema("users-value", Schema(json.dumps(USER_V1), "AVRO"))
    v2_id = client.register_schema("users-value", Schema(json.dumps(USER_V2), "AVRO"))
    client.set_compatibility("users-value", "FULL")
    client.register_schema(":.staging:events", Schema('{"type": "object"}', "JSON"))
    client.register_schema("gone-value", Schema('"string"', "AVRO"))
    client.delete_subject("gone-value")
    with httpx.Client(base_url=console_url(registry_broker), timeout=15) as http:
        listing = http.get("/schemas")
        assert listing.status_code == 200
        assert '<a href="/schemas"' in listing.text  # the navigation links to it
        users = _row(listing.text, "users-value")
        assert (users["context"], users["latest"], users["versions"], users["type"],
                users["compatibility"], users["deleted"]) == (".", "2", "2", "AVRO", "FULL",
                                                               "False")
        events = _row(listing.text, ":.staging:events")
        assert (events["context"], events["type"], events["compatibility"]) == (
            ".staging", "JSON", "BACKWARD")
        assert _row(listing.text, "gone-value")["deleted"] == "True"

        subject = http.get("/schemas/subject", params={"subject": "users-value"})
        assert subject.status_code == 200
        assert re.search(r'data-version="2">.*?class="num id">' + str(v2_id), subject.text,
                         re.S)
        assert 'id="compatibility">FULL<' in subject.text
        assert 'id="mode">READWRITE' in subject.text
        # the schema pretty-printed, two-space indents
        assert json.dumps(USER_V2, indent=2) in html.unescape(subject.text)

        diff = http.get("/schemas/diff", params={"subject": "users-value", "from": "1",
                                                 "to": "2"})
        assert diff.status_code == 200
        lines = html.unescape(re.sub(r"<[^>]+>", "", diff.text.split('id="diff"', 1)[1]
                                     .split("</pre>", 1)[0].split(">", 1)[1])).splitlines()
        assert "--- users-value version 1" in lines
        assert "+++ users-value version 2" in lines
        assert '+    {' in lines
        assert '+      "name": "age",' in lines
        assert not any(line.startswith("-  ") for line in lines)  # v2 only adds a field

        assert http.get("/schemas/diff", params={"subject": "users-value", "from": "1",
                                                 "to": "9"}).status_code == 400
        assert http.get("/schemas/subject", params={"subject": "nope"}).status_code == 404


def test_schemas_and_subject_names_are_escaped(registry_broker: ThreadedBroker,
                                               client: SchemaRegistryClient) -> None:
    subject = f"{XSS}-value"
    schema = {"type": "record", "name": "X", "doc": XSS,
              "fields": [{"name": "f", "type": "string", "doc": XSS}]}
    client.register_schema(subject, Schema(json.dumps(schema), "AVRO"))
    client.register_schema(subject, Schema(json.dumps({**schema, "doc": XSS + "2"}), "AVRO"))
    with httpx.Client(base_url=console_url(registry_broker), timeout=15) as http:
        for path, params in (("/schemas", {}), ("/schemas/subject", {"subject": subject}),
                             ("/schemas/diff", {"subject": subject, "from": "1", "to": "2"})):
            answer = http.get(path, params=params)
            assert answer.status_code == 200, path
            assert "<script>" not in answer.text, path
            assert "&lt;script&gt;" in answer.text, path


def test_the_subjects_page_in_a_browser(page: Page, registry_broker: ThreadedBroker,
                                        client: SchemaRegistryClient) -> None:
    client.register_schema("browser-value", Schema(json.dumps(USER_V1), "AVRO"))
    page.goto(console_url(registry_broker) + "/schemas")
    expect(page.locator("nav a.here")).to_have_text("Schemas")
    row = page.locator("#subjects tr[data-subject='browser-value']")
    expect(row.locator("td.type")).to_have_text("AVRO")
    row.locator("a").click()
    expect(page.locator("#subject")).to_have_text("browser-value")
    shoot(page, "schemas")


def test_no_registry_no_pages(tmp_path: Path) -> None:
    broker = console_broker(tmp_path)
    try:
        with httpx.Client(base_url=console_url(broker), timeout=15) as http:
            assert 'href="/schemas"' not in http.get("/").text
            for path in ("/schemas", "/schemas/subject?subject=a", "/schemas/diff?subject=a"):
                assert http.get(path).status_code == 404, path
    finally:
        broker.stop()


def _cells(page_html: str, offset: int) -> tuple[str, str]:
    row = page_html.split(f'data-offset="{offset}"', 1)[1].split("</tr>", 1)[0]
    key = row.split('class="key">', 1)[1].split("</td>", 1)[0]
    value = row.split('class="value">', 1)[1].split("</td>", 1)[0]
    return html.unescape(key), html.unescape(value)


def test_the_message_browser_decodes_framed_records(registry_broker: ThreadedBroker,
                                                    client: SchemaRegistryClient) -> None:
    topic = registry_broker.create_topic("framed")
    ctx = SerializationContext(topic, MessageField.VALUE)
    key_ctx = SerializationContext(topic, MessageField.KEY)
    avro = AvroSerializer(client, json.dumps(USER_V2))
    avro_key = AvroSerializer(client, '"string"')
    as_json = JSONSerializer(json.dumps({"type": "object", "properties": {
        "n": {"type": "integer"}}}), client, conf={"auto.register.schemas": True})
    avro_value = avro({"name": f"ann {XSS}", "age": 7}, ctx)
    order = order_class()
    as_proto = ProtobufSerializer(order, client, {"use.deprecated.format": False})
    records = [
        (avro_key("k1", key_ctx), avro_value),
        # registered under another topic's subject, the subject holding the id is named
        (None, as_json({"n": 5}, SerializationContext("events", MessageField.VALUE))),
        (None, b"\x00\x00\x00\x03\xe7garbage"),  # an id the registry does not know
        (None, avro_value[:5] + b"\xff"),  # a known id, bytes that do not fit its schema
        (None, as_proto(order(id="o-1", qty=3, tags=["a"]),
                        SerializationContext("orders", MessageField.VALUE))),
    ]
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap_servers})
    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0)
    assert producer.flush(10) == 0
    avro_id = int.from_bytes(avro_value[1:5], "big")
    with httpx.Client(base_url=console_url(registry_broker), timeout=15) as http:
        answer = http.get(f"/topics/{topic}/messages", params={
            "partition": "0", "mode": "offset", "offset": "0"})
        assert answer.status_code == 200
        assert "<script>alert" not in answer.text
        key, value = _cells(answer.text, 0)
        assert f"AVRO schema {avro_id}, {topic}-value" in value
        assert json.dumps({"name": f"ann {XSS}", "age": 7}, indent=2) in value
        assert f", {topic}-key" in key
        assert '"k1"' in key
        _key, value = _cells(answer.text, 1)
        assert "JSON schema" in value
        assert "events-value" in value
        assert '"n": 5' in value
        _key, value = _cells(answer.text, 2)
        assert "schema id 999 is not in the registry" in value
        assert "garbage" in value or "67 61 72" in value  # shown raw
        _key, value = _cells(answer.text, 3)
        assert f"does not fit schema {avro_id}" in value
        _key, value = _cells(answer.text, 4)
        assert "PROTOBUF schema" in value
        assert "orders-value" in value
        assert json.dumps({"id": "o-1", "qty": 3, "tags": ["a"]}, indent=2) in value
        # another view than "auto" shows the bytes as they are
        raw = http.get(f"/topics/{topic}/messages", params={
            "partition": "0", "mode": "offset", "offset": "0", "format": "hex"})
        _key, value = _cells(raw.text, 0)
        assert "schema" not in value
        assert value.split("<pre", 1)[1].split(">", 1)[1].startswith(
            avro_value[:16].hex(" "))


def test_a_user_sees_the_subjects_they_may_read(tmp_path: Path, users_file: Path) -> None:
    broker = console_broker(tmp_path, listeners="SASL_PLAINTEXT://127.0.0.1:0",
                            sasl_credentials_file=str(users_file),
                            authorizer_class_name=AUTHORIZER, super_users="User:alice",
                            connection_failed_authentication_delay_ms=0,
                            schema_registry_listener="http://127.0.0.1:0")
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers,
                             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                             "sasl.username": "alice", "sasl.password": password("alice")})
        grant = AclBinding(AclResource.TOPIC, "visible", ResourcePatternType.LITERAL,
                           "User:bob", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        for future in admin.create_acls([grant]).values():
            future.result(30)
        registry = SchemaRegistryClient({"url": broker.schema_registry_url})
        for subject in ("visible-value", "hidden-value"):
            registry.register_schema(subject, Schema('"string"', "AVRO"))
        url = console_url(broker)
        with httpx.Client(base_url=url, timeout=15) as bob:
            token = re.search(r'id="login-form".*?name="csrf" value="([^"]+)"',
                              bob.get("/login").text, re.S)
            assert token is not None
            bob.post("/login", data={"username": "bob", "password": password("bob"),
                                     "mechanism": "PLAIN", "next": "/", "csrf": token[1]})
            listing = bob.get("/schemas")
            assert listing.status_code == 200
            assert 'data-subject="visible-value"' in listing.text
            assert "hidden-value" not in listing.text
            assert bob.get("/schemas/subject", params={"subject": "hidden-value"}
                           ).status_code == 403
            assert bob.get("/schemas/subject", params={"subject": "visible-value"}
                           ).status_code == 200
    finally:
        broker.stop()


def test_the_message_browser_decodes_records_with_a_schema_guid_header(
        registry_broker: ThreadedBroker, client: SchemaRegistryClient) -> None:
    """confluent-kafka's ``header_schema_id_serializer``: the value is bare, its schema's GUID
    is in a ``__value_schema_id`` / ``__key_schema_id`` header (Protobuf's message indexes
    after it)."""
    topic = registry_broker.create_topic("guid-framed")
    in_header = {"schema.id.serializer": header_schema_id_serializer}
    avro = AvroSerializer(client, json.dumps(USER_V2), conf=in_header)
    avro_key = AvroSerializer(client, '"string"', conf=in_header)
    order = order_class()
    as_proto = ProtobufSerializer(order, client, {"use.deprecated.format": False, **in_header})
    rows = []
    headers: list[tuple[str, bytes]] = []
    key = avro_key("key-1", SerializationContext(topic, MessageField.KEY, headers))
    value = avro({"name": "bo", "age": 8}, SerializationContext(topic, MessageField.VALUE,
                                                                headers))
    rows.append((key, value, headers))
    headers = []
    value = as_proto(order(id="o-2", qty=4, tags=["b"]),
                     SerializationContext("orders", MessageField.VALUE, headers))
    rows.append((None, value, headers))
    unknown = str(uuid.UUID(int=7))
    rows.append((None, b"bare bytes", [("__value_schema_id", b"\x01" + uuid.UUID(unknown).bytes)]))
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap_servers})
    for key, value, headers in rows:
        producer.produce(topic, key=key, value=value, headers=headers, partition=0)
    assert producer.flush(10) == 0
    with httpx.Client(base_url=console_url(registry_broker), timeout=15) as http:
        answer = http.get(f"/topics/{topic}/messages", params={
            "partition": "0", "mode": "offset", "offset": "0"})
        assert answer.status_code == 200
        key, value = _cells(answer.text, 0)
        assert f", {topic}-value" in value
        assert json.dumps({"name": "bo", "age": 8}, indent=2) in value
        assert f", {topic}-key" in key
        assert '"key-1"' in key
        _key, value = _cells(answer.text, 1)
        assert "PROTOBUF schema" in value
        assert json.dumps({"id": "o-2", "qty": 4, "tags": ["b"]}, indent=2) in value
        _key, value = _cells(answer.text, 2)
        assert f"schema {unknown} is not in the registry" in value
        assert "bare bytes" in value
