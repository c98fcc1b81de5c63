"""The Python API other parts of the broker call: a value in Confluent's wire format."""

from __future__ import annotations

import io
import json
import struct

import fastavro
import pytest

from trio_broker.broker.lifecycle import Broker
from trio_broker.broker.schema_registry import RegistryError, serialize

pytestmark = pytest.mark.broker_config(schema_registry_listener="http://127.0.0.1:0")

AVRO = {"type": "record", "name": "Click", "fields": [{"name": "page", "type": "string"},
                                                      {"name": "ms", "type": "long"}]}


async def test_avro_and_json_values(trio_broker: Broker) -> None:
    assert trio_broker.schema_registry is not None
    registry = trio_broker.schema_registry[2]
    sv = await registry.register("clicks-value", {"schema": json.dumps(AVRO)})
    data = await serialize(registry, "clicks-value", {"page": "/", "ms": 12})
    magic, schema_id = struct.unpack(">bI", data[:5])
    assert (magic, schema_id) == (0, sv.id)
    assert fastavro.schemaless_reader(io.BytesIO(data[5:]), AVRO) == {"page": "/", "ms": 12}
    with pytest.raises(RegistryError) as bad:
        await serialize(registry, "clicks-value", {"page": 3})
    assert bad.value.error_code == 42201
    with pytest.raises(RegistryError) as missing:
        await serialize(registry, "nothing-value", {})
    assert missing.value.error_code == 40401

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    js = await registry.register("n-value", {"schema": json.dumps(schema), "schemaType": "JSON"})
    data = await serialize(registry, "n-value", {"n": 1})
    assert data[:5] == struct.pack(">bI", 0, js.id)
    assert json.loads(data[5:]) == {"n": 1}
    with pytest.raises(RegistryError):
        await serialize(registry, "n-value", {"n": "one"})


async def test_normalize_finds_a_schema_written_differently(trio_broker: Broker) -> None:
    assert trio_broker.schema_registry is not None
    registry = trio_broker.schema_registry[2]
    spaced = json.dumps(AVRO, indent=2)
    sv = await registry.register("n1", {"schema": spaced}, normalize=True)
    reordered = json.dumps({"fields": AVRO["fields"], "name": "Click", "type": "record",
                            "doc": "ignored by the canonical form"})
    found = await registry.lookup("n1", {"schema": reordered}, normalize=True)
    assert found.id == sv.id


async def test_avro_value_of_a_schema_with_references(trio_broker: Broker) -> None:
    assert trio_broker.schema_registry is not None
    registry = trio_broker.schema_registry[2]
    address = {"type": "record", "name": "Address", "namespace": "acme",
               "fields": [{"name": "city", "type": "string"}]}
    await registry.register("address", {"schema": json.dumps(address)})
    person = {"type": "record", "name": "Person", "namespace": "acme",
              "fields": [{"name": "home", "type": "acme.Address"}]}
    await registry.register("person", {"schema": json.dumps(person), "references": [
        {"name": "acme.Address", "subject": "address", "version": 1}]})
    data = await serialize(registry, "person", {"home": {"city": "Oslo"}})
    named: dict[str, object] = {}
    fastavro.parse_schema(address, named_schemas=named)
    reader = fastavro.parse_schema(person, named_schemas=named)
    assert fastavro.schemaless_reader(io.BytesIO(data[5:]), reader) == {"home": {"city": "Oslo"}}
