"""Confluent's documented API usage examples (the registry's README and "API Usage Examples"
page), replayed in their order against a fresh registry: each request's status and body as the
documentation shows them."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import httpx
import pytest

from trio_broker.testing import ThreadedBroker

STRING = json.dumps({"schema": json.dumps({"type": "string"})})
#: Schema Registry 8 answers also carry the schema's GUID: the MD5 of its text as a UUID
GUID = str(uuid.UUID(bytes=hashlib.md5(b'"string"').digest()))
#: (method, path, request body or None, expected status, expected body)
EXAMPLES: list[tuple[str, str, str | None, int, Any]] = [
    ("POST", "/subjects/Kafka-key/versions", STRING, 200, {"id": 1, "guid": GUID}),
    ("POST", "/subjects/Kafka-value/versions", STRING, 200, {"id": 1, "guid": GUID}),
    ("GET", "/subjects", None, 200, ["Kafka-key", "Kafka-value"]),
    ("GET", "/subjects/Kafka-value/versions", None, 200, [1]),
    ("GET", "/schemas/ids/1", None, 200, {"schema": '"string"', "guid": GUID}),
    ("GET", "/subjects/Kafka-value/versions/1", None, 200,
     {"subject": "Kafka-value", "version": 1, "id": 1, "schema": '"string"', "guid": GUID}),
    ("GET", "/subjects/Kafka-value/versions/latest", None, 200,
     {"subject": "Kafka-value", "version": 1, "id": 1, "schema": '"string"', "guid": GUID}),
    ("DELETE", "/subjects/Kafka-value/versions/1", None, 200, 1),
    ("POST", "/subjects/Kafka-value/versions", STRING, 200, {"id": 1, "guid": GUID}),
    ("DELETE", "/subjects/Kafka-value/versions/latest", None, 200, 2),
    ("POST", "/subjects/Kafka-value/versions", STRING, 200, {"id": 1, "guid": GUID}),
    ("DELETE", "/subjects/Kafka-value", None, 200, [3]),
    ("POST", "/subjects/Kafka-key", STRING, 200,
     {"subject": "Kafka-key", "version": 1, "id": 1, "schema": '"string"', "guid": GUID}),
    ("POST", "/compatibility/subjects/Kafka-key/versions/latest", STRING, 200,
     {"is_compatible": True}),
    ("GET", "/config", None, 200, {"compatibilityLevel": "BACKWARD"}),
    ("PUT", "/config", json.dumps({"compatibility": "NONE"}), 200, {"compatibility": "NONE"}),
    ("PUT", "/config/Kafka-value", json.dumps({"compatibility": "BACKWARD"}), 200,
     {"compatibility": "BACKWARD"}),
    ("GET", "/schemas/types", None, 200, ["JSON", "PROTOBUF", "AVRO"]),
    ("GET", "/schemas/ids/1/versions", None, 200,
     [{"subject": "Kafka-key", "version": 1}]),
    ("GET", "/subjects/Kafka-value/versions/9", None, 404,
     {"error_code": 40401, "message": "Subject 'Kafka-value' not found."}),
    ("GET", "/subjects/Kafka-key/versions/9", None, 404,
     {"error_code": 40402, "message": "Version 9 not found."}),
    ("GET", "/schemas/ids/99", None, 404,
     {"error_code": 40403, "message": "Schema 99 not found"}),
]


@pytest.mark.broker_config(schema_registry_listener="http://127.0.0.1:0")
def test_documented_examples_in_order(kafka_broker: ThreadedBroker) -> None:
    assert kafka_broker.schema_registry_url is not None
    with httpx.Client(base_url=kafka_broker.schema_registry_url, headers={
            "Content-Type": "application/vnd.schemaregistry.v1+json"}) as registry:
        for method, path, body, status, expected in EXAMPLES:
            answer = registry.request(method, path, content=body)
            got = answer.json()
            if path == "/schemas/types":  # the same types, in Confluent's order or not
                got, expected = sorted(got), sorted(expected)
            assert (answer.status_code, got) == (status, expected), (method, path)
            assert answer.headers["content-type"] == "application/vnd.schemaregistry.v1+json"
