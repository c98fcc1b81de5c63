"""Hostile bodies and records another writer put in ``_schemas``: Confluent's error JSON,
never a 500."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from confluent_kafka import Producer

from trio_broker.testing import ThreadedBroker

CT = {"content-type": "application/json"}


@pytest.fixture
def http(kafka_broker: ThreadedBroker) -> Iterator[httpx.Client]:
    assert kafka_broker.schema_registry_url is not None
    with httpx.Client(base_url=kafka_broker.schema_registry_url, headers=CT,
                      timeout=60) as client:
        yield client


@pytest.mark.parametrize("body", [
    {"schema": "[" * 100_000},
    {"schema": '{"type":"array","items":' * 3000 + '"int"' + "}" * 3000},
    {"schemaType": "JSON", "schema": '{"items":' * 3000 + "{}" + "}" * 3000},
    {"schemaType": "JSON", "schema": '{"items":' * 300 + "{}" + "}" * 300},
    {"schemaType": "PROTOBUF", "schema": "message A {" * 3000 + "}" * 3000},
    {"schemaType": "PROTOBUF", "schema": "\x00 junk ;"},
    {"schemaType": "PROTOBUF", "schema": "AAAA"},
    {"schema": 12},
    {"schema": '"int"', "references": "x"},
    {"schema": '"int"', "references": [{"name": 1}]},
    {"schema": '"int"', "schemaType": ["AVRO"]},
    {"schema": '{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":"x"}]}'},
], ids=["deep-json", "deep-avro", "deep-jsonschema", "jsonschema-300-levels", "deep-proto",
        "proto-junk", "proto-not-a-descriptor", "schema-not-text", "references-not-list",
        "reference-bad", "type-not-text", "avro-bad-default"])
def test_bad_schemas_are_42201(http: httpx.Client, body: dict[str, object]) -> None:
    response = http.post("/subjects/hostile/versions", json=body)
    assert response.status_code == 422, response.text
    answer = response.json()
    assert answer["error_code"] == 42201
    assert len(answer["message"]) < 2000


@pytest.mark.broker_config(schema_registry_listener="http://127.0.0.1:0")
def test_records_another_writer_appended(kafka_broker: ThreadedBroker,
                                         http: httpx.Client) -> None:
    """Confluent-format records produced straight into ``_schemas`` are served, and a
    reference cycle among them is refused when a schema needs it."""
    kafka_broker.create_topic("_schemas", 1, {"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})

    def put(subject: str, schema_id: int, refers_to: str) -> None:
        key = {"keytype": "SCHEMA", "subject": subject, "version": 1, "magic": 1}
        name = subject.capitalize()
        value = {"subject": subject, "version": 1, "id": schema_id, "deleted": False,
                 "references": [{"name": refers_to.capitalize(), "subject": refers_to,
                                 "version": 1}],
                 "schema": json.dumps({"type": "record", "name": name, "fields": [
                     {"name": "other", "type": ["null", refers_to.capitalize()]}]})}
        producer.produce("_schemas", json.dumps(value), json.dumps(key))

    put("x", 7, "y")
    put("y", 8, "x")
    producer.produce("_schemas", b"not json", b"garbage")
    assert producer.flush(10) == 0
    assert http.get("/subjects").json() == ["x", "y"]
    assert http.get("/schemas/ids/8").json()["references"][0]["subject"] == "x"
    cyclic = http.post("/subjects/z/versions", json={
        "schema": '{"type":"record","name":"Z","fields":[{"name":"x","type":"X"}]}',
        "references": [{"name": "X", "subject": "x", "version": 1}]})
    assert cyclic.status_code == 422
    assert cyclic.json()["error_code"] == 42201
    assert "cycle" in cyclic.json()["message"]
    # ids continue after the largest one read
    fresh = http.post("/subjects/w/versions", json={"schema": '"string"'})
    assert fresh.json()["id"] == 9


def test_a_host_that_is_not_the_registrys_is_421(http: httpx.Client) -> None:
    """DNS rebinding: a web page whose name now points at 127.0.0.1 sends its own name as Host;
    the registry answers only its own names, so the page reads no schema."""
    refused = http.get("/subjects", headers={"host": "rebind.evil.example"})
    assert refused.status_code == 421
    assert refused.json()["error_code"] == 421
    assert http.post("/subjects/rebound/versions", json={"schema": '"int"'},
                     headers={"host": "rebind.evil.example:8081"}).status_code == 421
    assert http.get("/subjects").status_code == 200
    assert http.get("/subjects", headers={"host": "localhost"}).status_code == 200


@pytest.mark.broker_config(http_allowed_hosts="registry.internal")
def test_a_host_named_in_http_allowed_hosts_is_served(http: httpx.Client) -> None:
    assert http.get("/subjects", headers={"host": "registry.internal:8081"}).status_code == 200
    assert http.get("/subjects", headers={"host": "other.internal"}).status_code == 421
