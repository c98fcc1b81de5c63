"""Config-level data contract defaults: ``defaultMetadata``, ``overrideMetadata``,
``defaultRuleSet`` and ``overrideRuleSet`` in ``/config``, merged into each registered schema by
Confluent's rules (default under the schema's own or the previous version's, override over it);
over httpx, and once through confluent-kafka's SchemaRegistryClient."""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import quote

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
    ServerConfig,
)

from trio_broker.broker.schema_registry.contracts import merge_metadata, merge_rule_set
from trio_broker.testing import ThreadedBroker

from .test_rest import error

V = [json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": f"f{i}", "type": "int", "default": 0} for i in range(n)]}) for n in range(1, 5)]


@pytest.fixture
def subject() -> str:
    return f"contract-{uuid.uuid4().hex[:10]}"


def rule(name: str, expr: str = "true", mode: str = "WRITE") -> dict[str, Any]:
    return {"name": name, "kind": "CONDITION", "mode": mode, "type": "CEL", "expr": expr}


def props(**properties: str) -> dict[str, Any]:
    return {"properties": properties}


def register(http: httpx.Client, subject: str, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post(f"/subjects/{quote(subject, safe='')}/versions", json=body)
    assert response.status_code == 200, response.text
    return dict(http.get(f"/schemas/ids/{response.json()['id']}",
                         params={"subject": subject}).json())


def test_the_merge_rules() -> None:
    old = {"tags": {"a": ["PII"]}, "properties": {"k": "1", "x": "old"}, "sensitive": ["s"]}
    new = {"tags": {"b": ["PUBLIC"]}, "properties": {"x": "new"}, "sensitive": ["t"]}
    assert merge_metadata(old, new) == {"tags": {"a": ["PII"], "b": ["PUBLIC"]},
                                        "properties": {"k": "1", "x": "new"},
                                        "sensitive": ["s", "t"]}
    assert merge_metadata(None, new) is new
    assert merge_metadata(old, {"properties": {}}) == old  # an empty side gives the other
    merged = merge_rule_set({"domainRules": [rule("a"), rule("b")], "enableAt": "CLIENT"},
                            {"domainRules": [rule("b", "false"), rule("c")]})
    assert merged == {"domainRules": [rule("a"), rule("b", "false"), rule("c")],
                      "enableAt": "CLIENT"}


def test_defaults_and_overrides_of_a_subject(http: httpx.Client, subject: str) -> None:
    config = {"defaultMetadata": props(owner="orders-team", tier="gold"),
              "overrideMetadata": props(tier="platinum"),
              "defaultRuleSet": {"domainRules": [rule("positive"), rule("named")]},
              "overrideRuleSet": {"domainRules": [rule("audited")]}}
    assert http.put(f"/config/{subject}", json=config).json() == config
    assert http.get(f"/config/{subject}").json() == {"compatibilityLevel": "BACKWARD", **config}
    # v1 brings its own: the default goes under it, the override over it
    first = register(http, subject, {"schema": V[0], "metadata": props(app="shop", tier="x"),
                                     "ruleSet": {"domainRules": [rule("named", "false")]}})
    assert first["metadata"] == props(app="shop", owner="orders-team", tier="platinum")
    assert [(r["name"], r["expr"]) for r in first["ruleSet"]["domainRules"]] == [
        ("positive", "true"), ("named", "false"), ("audited", "true")]
    # v2 brings nothing: it keeps v1's, merged again to the same
    second = register(http, subject, {"schema": V[1]})
    assert (second["metadata"], second["ruleSet"]) == (first["metadata"], first["ruleSet"])
    again = http.post(f"/subjects/{subject}/versions", json={"schema": V[1]}).json()
    assert again["id"] == http.get(f"/subjects/{subject}/versions/2").json()["id"]
    # v3 brings new metadata: the previous version's is not merged in, the default is
    third = register(http, subject, {"schema": V[2], "metadata": props(app="billing")})
    assert third["metadata"] == props(app="billing", owner="orders-team", tier="platinum")
    # the lookup of what was stored finds it
    found = http.post(f"/subjects/{subject}", json={"schema": V[2], **{
        k: third[k] for k in ("metadata", "ruleSet")}}).json()
    assert found["version"] == 3
    # as is the schema with the metadata sent at registration: the config is merged in again
    found = http.post(f"/subjects/{subject}", json={
        "schema": V[2], "metadata": props(app="billing")}).json()
    assert found["version"] == 3
    error(http.post(f"/subjects/{subject}", json={"schema": V[2], "metadata": props(
        app="other")}), 404, 40403)


def test_a_config_update_keeps_what_it_leaves_out(http: httpx.Client, subject: str) -> None:
    http.put(f"/config/{subject}", json={"defaultMetadata": props(owner="a"),
                                         "overrideRuleSet": {"domainRules": [rule("r")]}})
    assert http.put(f"/config/{subject}", json={"compatibility": "FULL"}).json() == {
        "compatibility": "FULL", "defaultMetadata": props(owner="a"),
        "overrideRuleSet": {"domainRules": [rule("r")]}}
    # null removes a field
    assert http.put(f"/config/{subject}", json={"overrideRuleSet": None}).json() == {
        "compatibility": "FULL", "defaultMetadata": props(owner="a")}
    assert register(http, subject, {"schema": V[0]})["metadata"] == props(owner="a")
    assert http.delete(f"/config/{subject}").json() == {
        "compatibilityLevel": "FULL", "defaultMetadata": props(owner="a")}
    # without the config, a new version only inherits
    assert register(http, subject, {"schema": V[1], "metadata": props(x="1")})[
        "metadata"] == props(x="1")


def test_invalid_rule_sets_are_refused(http: httpx.Client, subject: str) -> None:
    twice = {"domainRules": [rule("a")], "migrationRules": [rule("a", mode="UPGRADE")]}
    message = error(http.put(f"/config/{subject}", json={"defaultRuleSet": twice}), 422, 42210)
    assert message == "Found rule with duplicate name 'a'"
    error(http.put(f"/config/{subject}", json={"overrideRuleSet": {
        "migrationRules": [rule("m", mode="WRITE")]}}), 422, 42210)
    error(http.post(f"/subjects/{subject}/versions", json={
        "schema": V[0], "ruleSet": {"domainRules": [rule("1st")]}}), 422, 42210)
    error(http.put(f"/config/{subject}", json={"compatibility": "SIDEWAYS"}), 422, 42203)
    # a config field this registry would not apply is refused, not stored without effect
    error(http.put(f"/config/{subject}", json={"compatibilityGroup": "app.major"}), 422, 42205)
    error(http.get(f"/config/{subject}"), 404, 40408)  # nothing was stored


def test_a_context_config_applies_unless_the_subject_has_one(http: httpx.Client) -> None:
    context = f":.k{uuid.uuid4().hex[:8]}:"
    http.put(f"/config/{quote(context)}", json={"defaultMetadata": props(domain="sales")})
    assert register(http, f"{context}a", {"schema": V[0]})["metadata"] == props(domain="sales")
    # a subject's own config is the whole config in scope, as in Confluent's registry
    http.put(f"/config/{quote(context + 'b')}", json={"compatibility": "NONE"})
    assert "metadata" not in register(http, f"{context}b", {"schema": V[0]})
    assert http.get(f"/config/{quote(context + 'b')}?defaultToGlobal=true").json() == {
        "compatibilityLevel": "NONE"}
    assert http.get(f"/config/{quote(context + 'c')}?defaultToGlobal=true").json() == {
        "compatibilityLevel": "BACKWARD", "defaultMetadata": props(domain="sales")}


def test_defaults_through_confluent_kafka(kafka_broker: ThreadedBroker, subject: str) -> None:
    url = kafka_broker.schema_registry_url
    assert url is not None
    client = SchemaRegistryClient({"url": url})
    check = Rule("qtyPositive", None, RuleKind.CONDITION, RuleMode.WRITE, "CEL", None, None,
                 "message.f0 >= 0", None, None, False)
    client.set_config(subject, ServerConfig(
        default_metadata=Metadata(None, MetadataProperties({"owner": "orders-team"}), None),
        override_rule_set=RuleSet(None, [check])))
    stored = client.get_config(subject)
    assert stored.default_metadata.properties.properties == {"owner": "orders-team"}
    assert stored.override_rule_set.domain_rules[0].name == "qtyPositive"
    client.register_schema(subject, Schema(V[0], "AVRO"))
    latest = client.get_latest_version(subject).schema
    assert latest.metadata.properties.properties == {"owner": "orders-team"}
    assert latest.rule_set.domain_rules[0].expr == "message.f0 >= 0"
