"""``schema.registry.enable``: the registry's API under ``/schema-registry`` of the web
console's listener, with no listener of its own, for confluent-kafka's client and serializers."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

SCHEMA = json.dumps({"type": "record", "name": "Order",
                     "fields": [{"name": "id", "type": "long"}]})


def test_served_under_schema_registry_of_the_console_listener(tmp_path: Path) -> None:
    broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                               "http_listener": "http://127.0.0.1:0",
                               "schema_registry_enable": True}).start()
    try:
        assert broker.broker is not None
        assert broker.broker.http_address is not None
        assert broker.broker.schema_registry is None  # no listener of its own
        host, port = broker.broker.http_address
        base = f"http://{host}:{port}"
        url = f"{base}/schema-registry"
        client = SchemaRegistryClient({"url": url})
        serializer = AvroSerializer(client, SCHEMA)
        deserializer = AvroDeserializer(client)
        context = SerializationContext("orders", MessageField.VALUE)
        framed = serializer({"id": 7}, context)
        assert deserializer(framed, context) == {"id": 7}
        schema_id = int.from_bytes(framed[1:5], "big")
        assert httpx.get(f"{url}/subjects").json() == ["orders-value"]
        by_id = httpx.get(f"{url}/schemas/ids/{schema_id}")
        assert by_id.headers["content-type"].startswith("application/vnd.schemaregistry.v1+json")
        assert json.loads(by_id.json()["schema"]) == json.loads(SCHEMA)
        # Confluent's error body, not the console's page, for a path of the registry's
        missing = httpx.get(f"{url}/subjects/no-such-subject/versions")
        assert missing.status_code == 404
        assert missing.json()["error_code"] == 40401
        console = httpx.get(f"{base}/")
        assert console.status_code == 200
        assert f"{url}" in console.text  # the console links to it
        assert "orders-value" in httpx.get(f"{base}/schemas").text
    finally:
        broker.stop()


def test_schema_registry_enable_without_a_console_says_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``schema.registry.enable`` with no ``http.listener`` serves nothing: one warning."""
    with caplog.at_level("WARNING", logger="trio_broker.broker.schema_registry"):
        broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                                   "schema_registry_enable": True}).start()
        try:
            assert broker.broker is not None
            assert broker.broker.state.attached.schema_registry is None
        finally:
            broker.stop()
    assert any("http.listener is not set" in r.getMessage() for r in caplog.records)
