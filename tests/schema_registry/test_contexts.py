"""Schema contexts (Confluent's ``:.ctx:subject``): ids per context, listings, config and mode
per context, the ``/contexts/{context}/...`` path forms, deleting an empty context; over httpx
and through confluent-kafka's SchemaRegistryClient and Avro serde."""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from trio_broker.broker.schema_registry.contexts import normalize, rewrite, split
from trio_broker.testing import ThreadedBroker

from .test_rest import error, record


@pytest.fixture
def context() -> str:
    return f".c{uuid.uuid4().hex[:8]}"


def q(subject: str) -> str:
    return quote(subject, safe="")


def register(http: httpx.Client, subject: str, schema: str) -> int:
    response = http.post(f"/subjects/{q(subject)}/versions", json={"schema": schema})
    assert response.status_code == 200, response.text
    return int(response.json()["id"])


def test_qualified_names_and_the_context_paths() -> None:
    assert split(":.ctx:orders") == (".ctx", "orders")
    assert split(":.ctx:") == (".ctx", "")
    assert split("orders") == (".", "orders")
    assert normalize(":.:orders") == "orders"
    assert rewrite("/contexts/.ctx/subjects/s/versions", []) == (
        "/subjects/:.ctx:s/versions", [])
    assert rewrite("/contexts/ctx/subjects/:.other:s", [])[0] == "/subjects/:.other:s"
    assert rewrite("/contexts/.ctx/config", []) == ("/config/:.ctx:", [])
    assert rewrite("/contexts/.ctx/mode/s", []) == ("/mode/:.ctx:s", [])
    assert rewrite("/contexts/.ctx/schemas/ids/3", []) == (
        "/schemas/ids/3", [("subject", ":.ctx:")])
    assert rewrite("/contexts/.ctx/subjects", [("subjectPrefix", "a")]) == (
        "/subjects", [("subjectPrefix", ":.ctx:a")])
    assert rewrite("/contexts/:.:/subjects/s/versions", [])[0] == "/subjects/s/versions"
    assert rewrite("/subjects/s", [("x", "1")]) == ("/subjects/s", [("x", "1")])


def test_each_context_numbers_its_schemas(http: httpx.Client, context: str) -> None:
    other = context + "b"
    plain = f"ctx-plain-{uuid.uuid4().hex[:8]}"
    in_ctx, in_other = f":{context}:orders", f":{other}:orders"
    first, second = record(("a", "int")), record(("a", "int"), ("b", "int", 0))
    assert register(http, in_ctx, first) == 1
    assert register(http, in_ctx, second) == 2
    assert register(http, in_other, second) == 1  # the same schema, another context: its own id
    assert register(http, f":{context}:payments", first) == 1  # same schema, same context
    default_id = register(http, plain, second)
    # an id resolves in the context of the subject given
    assert json.loads(http.get(f"/schemas/ids/1?subject={q(in_ctx)}").json()["schema"]) == \
        json.loads(first)
    assert json.loads(http.get(f"/schemas/ids/1?subject={q(in_other)}").json()["schema"]) == \
        json.loads(second)
    assert http.get(f"/schemas/ids/{default_id}").json()["schema"] == \
        http.get(f"/subjects/{plain}/versions/1").json()["schema"]
    # an unqualified subject found under another context (Confluent's fallback)
    assert http.get("/schemas/ids/2?subject=orders").status_code == 200
    assert http.get(f"/schemas/ids/1/subjects?subject={q(in_ctx)}").json() == [
        f":{context}:orders", f":{context}:payments"]
    assert http.get(f"/contexts/{context}/schemas/ids/1/versions").json() == [
        {"subject": f":{context}:orders", "version": 1},
        {"subject": f":{context}:payments", "version": 1}]
    error(http.get(f"/schemas/ids/99?subject={q(in_ctx)}"), 404, 40403)
    # a registered version answers with its qualified subject
    got = http.get(f"/subjects/{q(in_ctx)}/versions/2").json()
    assert (got["subject"], got["version"], got["id"]) == (in_ctx, 2, 2)
    # the default context's prefix is no prefix
    assert http.get(f"/subjects/{q(':.:' + plain)}/versions").json() == [1]


def test_listings_and_path_forms(http: httpx.Client, context: str) -> None:
    register(http, f":{context}:a", record(("a", "int")))
    assert http.get(f"/contexts/{context}/subjects/b/versions").status_code == 404
    response = http.post(f"/contexts/{context}/subjects/b/versions",
                         json={"schema": record(("b", "int"))})
    assert response.json()["id"] == 2, response.text
    mine = [f":{context}:a", f":{context}:b"]
    assert http.get("/subjects", params={"subjectPrefix": f":{context}:"}).json() == mine
    assert http.get(f"/contexts/{context}/subjects").json() == mine
    everything = http.get("/subjects").json()  # Confluent's default prefix: every context
    assert set(mine) <= set(everything)
    assert not set(mine) & set(http.get("/subjects", params={"subjectPrefix": ""}).json())
    assert http.get("/subjects", params={"subjectPrefix": ":*:b"}).json().count(mine[1]) == 1
    paged = {"subjectPrefix": f":{context}:", "offset": 1, "limit": 1}
    assert http.get("/subjects", params=paged).json() == mine[1:]
    assert http.delete(f"/subjects/{q(mine[0])}").json() == [1]
    assert http.get(f"/contexts/{context}/subjects?deletedOnly=true").json() == mine[:1]
    assert http.get(f"/contexts/{context}/subjects?deleted=true").json() == mine
    contexts = http.get("/contexts").json()
    assert contexts[0] == "."
    assert context in contexts
    assert http.get("/contexts", params={"contextPrefix": context}).json() == [context]
    assert http.get("/contexts", params={"limit": 1}).json() == ["."]


def test_config_and_mode_per_context(http: httpx.Client, context: str) -> None:
    subject = f":{context}:s"
    register(http, subject, record(("a", "int")))
    qc = q(f":{context}:")
    error(http.get(f"/config/{qc}"), 404, 40408)
    assert http.put(f"/config/{qc}", json={"compatibility": "NONE"}).json() == {
        "compatibility": "NONE"}
    assert http.get(f"/contexts/{context}/config").json() == {"compatibilityLevel": "NONE"}
    # the context's level applies to its subjects: an incompatible change is accepted
    register(http, subject, record(("b", "string")))
    assert http.get(f"/config/{q(subject)}?defaultToGlobal=true").json() == {
        "compatibilityLevel": "NONE"}
    assert http.get(f"/config/{q(':.:')}").json() == http.get("/config").json()
    assert http.delete(f"/config/{qc}").json() == {"compatibilityLevel": "NONE"}
    error(http.post(f"/subjects/{q(subject)}/versions",
                    json={"schema": record(("c", "boolean"))}), 409, 409)
    assert http.put(f"/mode/{qc}", json={"mode": "READONLY"}).json() == {"mode": "READONLY"}
    error(http.post(f"/subjects/{q(subject)}/versions",
                    json={"schema": record(("b", "string"), ("d", "int", 0))}), 422, 42205)
    assert http.get(f"/mode/{q(subject)}?defaultToGlobal=true").json() == {"mode": "READONLY"}
    assert http.get("/mode").json() == {"mode": "READWRITE"}
    assert http.delete(f"/mode/{qc}").json() == {"mode": "READONLY"}
    # IMPORT on a context holding subjects is refused, as on a subject
    error(http.put(f"/mode/{qc}", json={"mode": "IMPORT"}), 422, 42205)


def test_deleting_a_context_once_empty(http: httpx.Client, context: str) -> None:
    subject = f":{context}:s"
    register(http, subject, record(("a", "int")))
    message = error(http.delete(f"/contexts/{context}"), 422, 42211)
    assert message == f"The specified context ':{context}:' is not empty."
    assert http.delete(f"/subjects/{q(subject)}").json() == [1]
    error(http.delete(f"/contexts/{context}"), 422, 42211)  # soft-deleted still counts
    assert http.delete(f"/subjects/{q(subject)}?permanent=true").json() == [1]
    assert http.delete(f"/contexts/{context}").status_code == 204
    assert context not in http.get("/contexts").json()
    error(http.delete("/contexts/bad:name/x"), 400, 400)
    # a schema registered again makes the context again, numbered from where it was
    assert register(http, subject, record(("z", "int"))) == 2
    assert context in http.get("/contexts").json()


def test_confluent_kafka_serde_with_a_context_subject(kafka_broker: ThreadedBroker,
                                                      context: str) -> None:
    url = kafka_broker.schema_registry_url
    assert url is not None
    client = SchemaRegistryClient({"url": url})
    schema = record(("id", "string"), ("qty", "int"), name="Order")

    def strategy(ctx: SerializationContext | None, record_name: Any) -> str:
        assert ctx is not None
        return f":{context}:{ctx.topic}-value"

    conf = {"subject.name.strategy": strategy}
    serializer = AvroSerializer(client, schema, conf=conf)
    field = SerializationContext("orders", MessageField.VALUE)
    data = serializer({"id": "o-1", "qty": 3}, field)
    assert int.from_bytes(data[1:5], "big") == 1  # the first id of a new context
    assert client.get_subjects().count(f":{context}:orders-value") == 1
    assert client.get_latest_version(f":{context}:orders-value").schema_id == 1
    # a fresh client resolves id 1 in the subject's context, not the default one
    fresh = SchemaRegistryClient({"url": url})
    deserializer = AvroDeserializer(fresh, conf=conf)
    assert deserializer(data, field) == {"id": "o-1", "qty": 3}
    assert fresh.register_schema(f":{context}:orders-value", Schema(schema, "AVRO")) == 1


def test_a_reference_resolves_in_its_schemas_context(http: httpx.Client, context: str) -> None:
    common = json.dumps({"type": "record", "name": "Money", "namespace": "acme",
                         "fields": [{"name": "cents", "type": "long"}]})
    order = json.dumps({"type": "record", "name": "Order", "namespace": "acme",
                        "fields": [{"name": "total", "type": "acme.Money"}]})
    register(http, f":{context}:money", common)
    ref = [{"name": "acme.Money", "subject": "money", "version": 1}]
    body = {"schema": order, "references": ref}
    response = http.post(f"/subjects/{q(f':{context}:order')}/versions", json=body)
    assert response.json()["id"] == 2, response.text
    # stored as sent (unqualified), found by referencedby and refused a delete
    assert http.get(f"/subjects/{q(f':{context}:order')}/versions/1").json()["references"] == ref
    assert http.get(f"/subjects/{q(f':{context}:money')}/versions/1/referencedby").json() == [2]
    error(http.delete(f"/subjects/{q(f':{context}:money')}/versions/1"), 422, 42206)
    # the default context has no "money" subject: the same body there is refused
    error(http.post(f"/subjects/ctx-order-{uuid.uuid4().hex[:8]}/versions", json=body),
          422, 42201)


@pytest.mark.broker_config(schema_registry_listener="http://127.0.0.1:0")
def test_the_global_context_config_applies_to_every_context(http: httpx.Client) -> None:
    http.put(f"/config/{q(':.__GLOBAL:')}", json={"compatibility": "NONE"})
    assert http.get("/config").json() == {"compatibilityLevel": "NONE"}
    for subject in (":.one:s", "s"):  # a context without a config, and the default one
        register(http, subject, record(("a", "int")))
        register(http, subject, record(("b", "string")))  # incompatible: accepted under NONE
    # the global config goes before it in the default context, and only there
    http.put("/config", json={"compatibility": "FULL"})
    error(http.post("/subjects/s/versions", json={"schema": record(("c", "long"))}), 409, 409)
    register(http, ":.one:s", record(("c", "long")))


@pytest.mark.parametrize("subject", [":.__GLOBAL:orders", "__GLOBAL", ":.c:__EMPTY", "a\x01b"])
def test_a_subject_confluent_refuses_is_refused(http: httpx.Client, subject: str) -> None:
    """Confluent's ``isValidSubject``: the global context holds config and mode only, two
    names are reserved, and no control character; nothing is registered."""
    answer = http.post(f"/subjects/{quote(subject, safe='')}/versions",
                       json={"schema": json.dumps({"type": "string"})})
    assert "is not a valid" in error(answer, 422, 42208)
    assert http.get(f"/subjects/{quote(subject, safe='')}/versions").status_code == 404
