"""Keys and values in Confluent's wire format, decoded for the message browser.

Why the REST proxy's decoders (``rest_proxy.schema_records.RecordSchemas``): its v2 consumer
already reads framed records as Confluent's shows them (Avro's JSON encoding from the writer's
schema with fastavro, the JSON of a JSON Schema value, Protobuf's JSON mapping from the message
indexes and the schema's descriptors); the console shows the same thing, so there is one
decoder. Decoders are built once per schema id and kept for as long as the registry lives.

A key or value starting with magic byte 0 and a schema id is a candidate, and so is one whose
schema a ``__key_schema_id`` / ``__value_schema_id`` header names by GUID (confluent-kafka's
``header_schema_id_serializer``; the header wins, as in its deserializers); one the registry
cannot decode (an unknown id, bytes that do not fit the schema) is shown raw with a note why.
"""

from __future__ import annotations

import json
import uuid
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from ..rest_proxy.schema_records import RecordSchemas
from ..schema_registry.errors import RegistryError

if TYPE_CHECKING:
    from ..schema_registry.registry import SchemaRegistry

#: Confluent's framing: magic byte 0, then a big-endian int32 schema id
HEADER_BYTES = 5
#: the headers confluent-kafka's ``header_schema_id_serializer`` names a schema in: magic
#: byte 1, then the schema's GUID (and Protobuf's message indexes)
KEY_SCHEMA_ID = "__key_schema_id"
VALUE_SCHEMA_ID = "__value_schema_id"
GUID_HEADER_BYTES = 17

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


def guid_header(headers: Sequence[tuple[str, bytes | None]], *, is_key: bool) -> bytes | None:
    """The header naming the key's or value's schema by GUID, as confluent-kafka's
    ``header_schema_id_serializer`` writes it; None when there is none."""
    name = KEY_SCHEMA_ID if is_key else VALUE_SCHEMA_ID
    return next((value for key, value in headers if key == name and value), None)


async def decode_by_header(registry: SchemaRegistry, header: bytes, data: bytes, topic: str,
                           *, is_key: bool) -> Decoded | str:
    """``data`` decoded with the schema whose GUID ``header`` holds, or a note why not."""
    if len(header) < GUID_HEADER_BYTES or header[0] != 1:
        return "the schema header is not magic byte 1 and a GUID"
    guid = str(uuid.UUID(bytes=header[1:GUID_HEADER_BYTES]))
    if not registry.guid_ids(guid):
        return f"schema {guid} is not in the registry"
    try:
        schema, value = await record_schemas(registry).decode_guid(header, data)
    # as ``decode``: the decoders raise many kinds on bytes that do not fit
    except Exception as exc:
        return f"does not fit schema {guid} ({type(exc).__name__})"
    return Decoded(schema.id, _subject(registry, schema.id, schema.subject, topic, is_key),
                   schema.schema_type, json.dumps(value, indent=2, ensure_ascii=False))


def _subject(registry: SchemaRegistry, schema_id: int, first: str, topic: str,
             is_key: bool) -> str:
    """The subject to name for ``schema_id``: the topic name strategy's when it holds the id
    (an id may be registered under several subjects), else the first that does."""
    wanted = f"{topic}-{'key' if is_key else 'value'}"
    subjects = {sv.subject for sv in registry.id_versions(schema_id, deleted=True)}
    return wanted if wanted in subjects else first


__all__ = ["Decoded", "decode", "decode_by_header", "guid_header", "is_framed", "record_schemas"]
