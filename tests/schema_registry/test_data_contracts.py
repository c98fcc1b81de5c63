"""Confluent's data contracts (7.4+): a schema's ``metadata`` and ``ruleSet`` stored and served,
inherited by a new version that leaves them out, part of the schema's identity, and the latest
version with given metadata found; through confluent-kafka's own SchemaRegistryClient."""

from __future__ import annotations

import json

import httpx
import pytest
from confluent_kafka.schema_registry import (
    Metadata,
    MetadataProperties,
    Rule,
    RuleKind,
    RuleMode,
    RuleSet,
    Schema,
    SchemaRegistryClient,
)
from confluent_kafka.schema_registry.error import SchemaRegistryError

from trio_broker.testing import ThreadedBroker

V1 = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "string"}]})
V2 = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "string"}, {"name": "qty", "type": "int", "default": 0}]})


def _metadata(**properties: str) -> Metadata:
    return Metadata(tags=None, properties=MetadataProperties(properties), sensitive=None)


def test_metadata_and_rules_through_confluent_kafka(kafka_broker: ThreadedBroker) -> None:
    url = kafka_broker.schema_registry_url
    assert url is not None
    client = SchemaRegistryClient({"url": url})
    subject = "contracts-value"
    rule = Rule("checkQty", None, RuleKind.CONDITION, RuleMode.WRITE, "CEL", None, None,
                "message.qty >= 0", None, None, False)
    first = client.register_schema_full_response(subject, Schema(
        V1, "AVRO", metadata=_metadata(owner="orders-team", major="1"),
        rule_set=RuleSet(None, [rule])))
    plain = client.register_schema(subject + "-plain", Schema(V1, "AVRO"))
    assert first.schema_id != plain  # another contract: another schema, another id

    stored = client.get_version(subject, 1)
    assert stored.schema.metadata.properties.properties == {"owner": "orders-team",
                                                            "major": "1"}
    assert stored.schema.rule_set.domain_rules[0].expr == "message.qty >= 0"
    # V2 without a contract inherits V1's; the same text again is the same version
    client.register_schema(subject, Schema(V2, "AVRO"))
    latest = client.get_latest_version(subject)
    assert latest.version == 2
    assert latest.schema.metadata.properties.properties["owner"] == "orders-team"
    assert client.register_schema(subject, Schema(V2, "AVRO")) == latest.schema_id
    # a new major version of the contract, then the latest of each major found by metadata
    client.register_schema(subject, Schema(V2, "AVRO", metadata=_metadata(
        owner="orders-team", major="2")))
    assert client.get_latest_with_metadata(subject, {"major": "1"}).version == 2
    assert client.get_latest_with_metadata(subject, {"major": "2"}).version == 3
    with pytest.raises(SchemaRegistryError) as missing:
        client.get_latest_with_metadata(subject, {"major": "9"})
    assert missing.value.error_code == 40403

    # what a client of the REST API sees, as Confluent writes it
    body = httpx.get(f"{url}/subjects/{subject}/versions/1").json()
    assert body["metadata"] == {"properties": {"owner": "orders-team", "major": "1"}}
    assert body["ruleSet"]["domainRules"][0]["name"] == "checkQty"
