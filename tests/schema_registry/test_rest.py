"""Confluent's REST API over real HTTP (httpx) against the broker's registry."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from trio_broker.broker.schema_registry.app import MAX_BODY_BYTES

CT = {"content-type": "application/vnd.schemaregistry.v1+json"}


@pytest.fixture
def subject() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


def record(*fields: tuple[str, Any], name: str = "R") -> str:
    return json.dumps({"type": "record", "name": name,
                       "fields": [{"name": n, "type": t, **({"default": d} if d is not ...
                                                             else {})}
                                  for n, t, d in ((*f, ...)[:3] for f in fields)]})


def error(response: httpx.Response, status: int, code: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/vnd.schemaregistry.v1+json")
    body = response.json()
    assert body["error_code"] == code, body
    return str(body["message"])


def test_register_lookup_and_read_back(http: httpx.Client, subject: str) -> None:
    v1 = record(("a", "int"))
    first = http.post(f"/subjects/{subject}/versions", json={"schema": v1}).json()["id"]
    # registering the same schema again answers the same id, without a new version
    assert http.post(f"/subjects/{subject}/versions", json={"schema": v1}).json()["id"] == first
    v2 = record(("a", "int"), ("b", "string", "x"))
    second = http.post(f"/subjects/{subject}/versions", json={"schema": v2}).json()["id"]
    assert second != first
    assert http.get(f"/subjects/{subject}/versions").json() == [1, 2]
    assert subject in http.get("/subjects").json()
    latest = http.get(f"/subjects/{subject}/versions/latest").json()
    assert latest == {"subject": subject, "version": 2, "id": second, "guid": latest["guid"],
                      "schema": json.dumps(json.loads(v2), separators=(",", ":"))}
    assert json.loads(http.get(f"/subjects/{subject}/versions/1/schema").text) == json.loads(v1)
    found = http.post(f"/subjects/{subject}", json={"schema": v1}).json()
    assert (found["version"], found["id"]) == (1, first)
    assert json.loads(http.get(f"/schemas/ids/{first}").json()["schema"]) == json.loads(v1)
    assert http.get(f"/schemas/ids/{second}/versions").json() == [
        {"subject": subject, "version": 2}]
    assert http.get(f"/schemas/ids/{second}/subjects").json() == [subject]
    assert http.get("/schemas/types").json() == ["JSON", "PROTOBUF", "AVRO"]


def test_errors_are_confluents(http: httpx.Client, subject: str) -> None:
    assert error(http.get(f"/subjects/{subject}/versions"), 404, 40401) == (
        f"Subject '{subject}' not found.")
    http.post(f"/subjects/{subject}/versions", json={"schema": record(("a", "int"))})
    error(http.get(f"/subjects/{subject}/versions/7"), 404, 40402)
    error(http.get(f"/subjects/{subject}/versions/0"), 422, 42202)
    error(http.get(f"/subjects/{subject}/versions/x"), 422, 42202)
    error(http.post(f"/subjects/{subject}", json={"schema": record(("z", "int"))}), 404, 40403)
    error(http.get("/schemas/ids/987654"), 404, 40403)
    error(http.post(f"/subjects/{subject}/versions", json={"schema": "{not json"}), 422, 42201)
    error(http.post(f"/subjects/{subject}/versions", json={"schema": '{"type": "nope"}'}),
          422, 42201)
    error(http.post(f"/subjects/{subject}/versions",
                    json={"schema": "{}", "schemaType": "XML"}), 422, 42201)
    error(http.post(f"/subjects/{subject}/versions", json={}), 422, 42201)
    error(http.post(f"/subjects/{subject}/versions", content=b"{}",
                    headers={"content-type": "text/plain"}), 415, 415)
    error(http.post(f"/subjects/{subject}/versions", content=b"[1",
                    headers=CT), 400, 400)
    big = b'{"schema": "' + b" " * (MAX_BODY_BYTES + 1) + b'"}'
    error(http.post(f"/subjects/{subject}/versions", content=big), 413, 413)
    error(http.put("/config", json={"compatibility": "SIDEWAYS"}), 422, 42203)
    error(http.put("/mode", json={"mode": "WRONG"}), 422, 42204)
    error(http.get("/no/such/route"), 404, 404)
    error(http.get(f"/config/{subject}"), 404, 40408)


def test_references_and_missing_or_cyclic_ones(http: httpx.Client, subject: str) -> None:
    address = json.dumps({"type": "record", "name": "Address", "namespace": "acme",
                          "fields": [{"name": "city", "type": "string"}]})
    http.post(f"/subjects/{subject}-address/versions", json={"schema": address})
    person = json.dumps({"type": "record", "name": "Person", "namespace": "acme",
                         "fields": [{"name": "home", "type": "acme.Address"}]})
    refs = [{"name": "acme.Address", "subject": f"{subject}-address", "version": 1}]
    person_id = http.post(f"/subjects/{subject}/versions",
                          json={"schema": person, "references": refs}).json()["id"]
    assert http.get(f"/schemas/ids/{person_id}").json()["references"] == refs
    assert http.get(f"/subjects/{subject}-address/versions/1/referencedby").json() == [
        person_id]
    # a referenced schema cannot be deleted
    error(http.delete(f"/subjects/{subject}-address"), 422, 42206)
    # without its reference the type is unknown
    error(http.post(f"/subjects/{subject}-2/versions", json={"schema": person}), 422, 42201)
    missing = [{"name": "x", "subject": f"{subject}-nothing", "version": 1}]
    error(http.post(f"/subjects/{subject}-3/versions",
                    json={"schema": person, "references": missing}), 422, 42201)
    # a schema naming itself as its reference: the reference does not exist yet
    self_ref = [{"name": "acme.Person", "subject": f"{subject}-4", "version": 1}]
    error(http.post(f"/subjects/{subject}-4/versions",
                    json={"schema": person, "references": self_ref}), 422, 42201)


def test_compatibility_levels_and_the_test_endpoint(http: httpx.Client, subject: str) -> None:
    http.post(f"/subjects/{subject}/versions", json={"schema": record(("a", "int"))})
    incompatible = record(("a", "int"), ("b", "string"))
    compatible = record(("a", "int"), ("b", "string", "x"))
    check = f"/compatibility/subjects/{subject}/versions/latest"
    assert http.post(check, json={"schema": compatible}).json() == {"is_compatible": True}
    verbose = http.post(f"{check}?verbose=true", json={"schema": incompatible}).json()
    assert verbose["is_compatible"] is False
    assert "'b'" in verbose["messages"][0]
    message = error(http.post(f"/subjects/{subject}/versions", json={"schema": incompatible}),
                    409, 409)
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in message
    assert http.put(f"/config/{subject}", json={"compatibility": "forward"}).json() == {
        "compatibility": "FORWARD"}
    assert http.get(f"/config/{subject}").json() == {"compatibilityLevel": "FORWARD"}
    assert http.post(f"/subjects/{subject}/versions", json={"schema": incompatible}).json()["id"]
    assert http.delete(f"/config/{subject}").json() == {"compatibilityLevel": "FORWARD"}
    assert http.get(f"/config/{subject}?defaultToGlobal=true").json() == {
        "compatibilityLevel": "BACKWARD"}


def test_soft_and_permanent_deletes(http: httpx.Client, subject: str) -> None:
    for n in range(3):
        http.post(f"/subjects/{subject}/versions",
                  json={"schema": record(*[(f"f{i}", "int", 0) for i in range(n + 1)])})
    error(http.delete(f"/subjects/{subject}/versions/2?permanent=true"), 404, 40407)
    assert http.delete(f"/subjects/{subject}/versions/2").json() == 2
    error(http.delete(f"/subjects/{subject}/versions/2"), 404, 40406)
    assert http.get(f"/subjects/{subject}/versions").json() == [1, 3]
    assert http.get(f"/subjects/{subject}/versions?deleted=true").json() == [1, 2, 3]
    error(http.get(f"/subjects/{subject}/versions/2"), 404, 40402)
    assert http.get(f"/subjects/{subject}/versions/2?deleted=true").json()["version"] == 2
    error(http.delete(f"/subjects/{subject}?permanent=true"), 404, 40405)
    assert http.delete(f"/subjects/{subject}").json() == [1, 3]
    error(http.delete(f"/subjects/{subject}"), 404, 40404)
    assert subject not in http.get("/subjects").json()
    assert subject in http.get("/subjects?deleted=true").json()
    error(http.get(f"/subjects/{subject}/versions"), 404, 40401)
    assert http.delete(f"/subjects/{subject}?permanent=true").json() == [1, 2, 3]
    assert subject not in http.get("/subjects?deleted=true").json()
    # versions continue after a soft delete, and start again after a permanent one
    again = http.post(f"/subjects/{subject}/versions", json={"schema": record(("z", "int"))})
    assert again.status_code == 200
    assert http.get(f"/subjects/{subject}/versions").json() == [1]


def test_import_mode_registers_given_ids(http: httpx.Client, subject: str) -> None:
    error(http.post(f"/subjects/{subject}/versions",
                    json={"schema": record(("a", "int")), "id": 50000}), 422, 42205)
    assert http.put(f"/mode/{subject}", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
    assert http.get(f"/mode/{subject}").json() == {"mode": "IMPORT"}
    body = {"schema": record(("a", "int")), "id": 50000, "version": 3}
    assert http.post(f"/subjects/{subject}/versions", json=body).json()["id"] == 50000
    assert http.get(f"/subjects/{subject}/versions/3").json()["id"] == 50000
    # an id in use for another schema is refused
    error(http.post(f"/subjects/{subject}/versions",
                    json={"schema": record(("b", "int")), "id": 50000}), 422, 42205)
    assert http.put(f"/mode/{subject}", json={"mode": "READONLY"}).json() == {"mode": "READONLY"}
    error(http.post(f"/subjects/{subject}/versions", json={"schema": record(("c", "int"))}),
          422, 42205)
    assert http.delete(f"/mode/{subject}").json() == {"mode": "READONLY"}
    error(http.get(f"/mode/{subject}"), 404, 40409)
    assert http.get(f"/mode/{subject}?defaultToGlobal=true").json() == {"mode": "READWRITE"}
    # the next id the registry gives follows the imported one
    fresh = http.post(f"/subjects/{subject}-next/versions", json={"schema": record(("q", "int"))})
    assert fresh.json()["id"] > 50000


def test_json_schema_and_protobuf_subjects(http: httpx.Client, subject: str) -> None:
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}},
                         "additionalProperties": False})
    sid = http.post(f"/subjects/{subject}-json/versions",
                    json={"schema": schema, "schemaType": "JSON"}).json()["id"]
    got = http.get(f"/schemas/ids/{sid}").json()
    assert got["schemaType"] == "JSON"
    assert json.loads(got["schema"]) == json.loads(schema)
    error(http.post(f"/subjects/{subject}-json/versions", json={
        "schemaType": "JSON", "schema": json.dumps({"type": "object", "properties": {
            "a": {"type": "string"}}, "additionalProperties": False})}), 409, 409)
    proto = 'syntax = "proto3";\npackage t;\nmessage M {\n  string id = 1;\n}\n'
    pid = http.post(f"/subjects/{subject}-proto/versions",
                    json={"schema": proto, "schemaType": "PROTOBUF"}).json()["id"]
    got = http.get(f"/schemas/ids/{pid}").json()
    assert got == {"schemaType": "PROTOBUF", "schema": proto, "guid": got["guid"]}
    error(http.post(f"/subjects/{subject}-proto/versions", json={
        "schemaType": "PROTOBUF", "schema": proto.replace("string id", "int32 id")}), 409, 409)


def test_the_same_avro_schema_written_differently_keeps_its_id(http: httpx.Client,
                                                                subject: str) -> None:
    written = '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}'
    reordered = '{"fields":[{"type":"int","name":"a"}],\n "name":"R","type":"record"}'
    first = http.post(f"/subjects/{subject}/versions", json={"schema": written}).json()
    assert http.post(f"/subjects/{subject}/versions", json={"schema": reordered}).json() == first
    assert http.get(f"/subjects/{subject}/versions").json() == [1]
