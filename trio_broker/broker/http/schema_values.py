"""Keys and values in Confluent's wire format, decoded for the message browser.

Why the REST proxy's decoders (``rest_proxy.schema_records.RecordSchemas``): its v2 consumer
already reads framed records as Confluent's shows them (Avro's JSON encoding from the writer's
schema with fastavro, the JSON of a JSON Schema value, Protobuf's JSON mapping from the message
indexes and the schema's descriptors); the console shows the same thing, so there is one
decoder. Decoders are built once per schema id and kept for as long as the registry lives.

A key or value starting with magic byte 0 and a schema id is a candidate; one the registry
cannot decode (an unknown id, bytes that do not fit the schema) is shown raw with a note why.
"""

from __future__ import annotations

import json
import weakref
from typing import TYPE_CHECKING, NamedTuple

from ..rest_proxy.schema_records import RecordSchemas
from ..schema_registry.errors import RegistryError

if TYPE_CHECKING:
    from ..schema_registry.registry import SchemaRegistry

#: Confluent's framing: magic byte 0, then a big-endian int32 schema id
HEADER_BYTES = 5

_SCHEMAS: weakref.WeakKeyDictionary[SchemaRegistry, RecordSchemas] = (
    weakref.WeakKeyDictionary())


class Decoded(NamedTuple):
    schema_id: int
    subject: str
    schema_type: str
    #: the value as pretty JSON
    text: str


def record_schemas(registry: SchemaRegistry) -> RecordSchemas:
    found = _SCHEMAS.get(registry)
    if found is None:
        found = _SCHEMAS[registry] = RecordSchemas(registry)
    return found


def is_framed(data: bytes | None) -> bool:
    return data is not None and len(data) >= HEADER_BYTES and data[0] == 0


async def decode(registry: SchemaRegistry, data: bytes, topic: str, *,
                 is_key: bool) -> Decoded | str:
    """``data`` (framed, see ``is_framed``) decoded, or a note saying why it is not."""
    schema_id = int.from_bytes(data[1:HEADER_BYTES], "big")
    try:
        registry.by_id(schema_id)
    except RegistryError:
        return f"schema id {schema_id} is not in the registry"
    try:
        schema, value = await record_schemas(registry).decode(data)
    # Any error: the decoders (fastavro, protobuf, json) raise many kinds on bytes that do not
    # fit, and the page must show the raw bytes then, not fail.
    except Exception as exc:
        return f"does not fit schema {schema_id} ({type(exc).__name__})"
    return Decoded(schema_id, _subject(registry, schema_id, schema.subject, topic, is_key),
                   schema.schema_type, json.dumps(value, indent=2, ensure_ascii=False))


def _subject(registry: SchemaRegistry, schema_id: int, first: str, topic: str,
             is_key: bool) -> str:
    """The subject to name for ``schema_id``: the topic name strategy's when it holds the id
    (an id may be registered under several subjects), else the first that does."""
    wanted = f"{topic}-{'key' if is_key else 'value'}"
    subjects = {sv.subject for sv in registry.id_versions(schema_id, deleted=True)}
    return wanted if wanted in subjects else first


__all__ = ["Decoded", "decode", "is_framed", "record_schemas"]
