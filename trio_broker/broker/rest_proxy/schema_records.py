"""Keys and values with a schema in the v3 produce: AVRO, PROTOBUF and JSONSCHEMA, through the
broker's own Schema Registry (Confluent's ``SchemaManager`` and ``SchemaRecordSerializer``).

Which schema, in Confluent's order (a key or value names at most one way):

    schema_id           that schema; its subject is ``subject`` or the strategy's, and it must
                        be registered there (its version is reported)
    schema_version      that version of ``subject`` (or of the strategy's subject)
    type + schema       the raw schema, looked up in the subject or registered there
    nothing             the latest version of ``subject`` (or of the strategy's subject)

``subject_name_strategy`` is TOPIC_NAME (``<topic>-key`` / ``<topic>-value``, the default),
RECORD_NAME (the record's full name) or TOPIC_RECORD_NAME (``<topic>-<record name>``); the last
two need the schema, so they go with ``schema_id`` or a raw schema only.

The data is JSON as Confluent's proxy reads it: Avro's JSON encoding (a union's branch named,
``{"string": "x"}``), Protobuf's JSON mapping of the schema's first message, or the JSON value a
JSON Schema validates. The bytes written are Confluent's wire format (magic byte 0, the schema
id, for Protobuf the message indexes, then the payload), what confluent-kafka's deserializers
read. Serializers are built once per schema id.
"""

from __future__ import annotations

import io
import json
import struct
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from .errors import RestError

if TYPE_CHECKING:
    from ..schema_registry.registry import SchemaRegistry
    from ..schema_registry.store import SchemaVersion

#: the REST formats that need a schema -> the registry's schema type
SCHEMA_TYPES = {"AVRO": "AVRO", "PROTOBUF": "PROTOBUF", "JSONSCHEMA": "JSON"}
FORMAT_OF = {schema_type: fmt for fmt, schema_type in SCHEMA_TYPES.items()}
STRATEGIES = ("TOPIC_NAME", "RECORD_NAME", "TOPIC_RECORD_NAME")
_HEADER = struct.Struct(">bI")
#: a ``__value_schema_id`` / ``__key_schema_id`` header: magic byte 1 and a GUID
_GUID_HEADER_BYTES = 17

Encoder = Callable[[Any], bytes]
Decoder = Callable[[memoryview], Any]


def _bad(message: str) -> RestError:
    return RestError(400, 400, message)


def _conversion(exc: object) -> RestError:
    return RestError(422, 42203, f"Conversion of JSON to Object failed: {exc}")


@attrs.frozen
class SchemaSpec:
    """What a key or value asked for (its ``data`` still JSON)."""

    field: str
    fmt: str | None
    data: Any
    subject: str | None = None
    strategy: str | None = None
    schema_id: int | None = None
    schema_version: int | None = None
    raw_schema: str | None = None

    @classmethod
    def of(cls, field: str, spec: dict[str, Any], fmt: str | None) -> SchemaSpec:
        def optional(name: str, kind: type) -> Any:
            value = spec.get(name)
            if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
                raise _bad(f"{field}: {name} must be a {kind.__name__}")
            return value

        strategy = optional("subject_name_strategy", str)
        if strategy is not None and strategy.upper() not in STRATEGIES:
            raise _bad(f"{field}: subject_name_strategy {strategy} is not one of "
                       f"{', '.join(STRATEGIES)}")
        return cls(field, fmt, spec.get("data"), optional("subject", str),
                   strategy.upper() if strategy else None, optional("schema_id", int),
                   optional("schema_version", int), optional("schema", str))


class RecordSchemas:
    """The registry's schemas as the REST proxy's serializers."""

    def __init__(self, registry: SchemaRegistry) -> None:
        self.registry = registry
        #: (context, id) -> encoder: each schema context numbers its schemas apart
        self._encoders: dict[tuple[str, int], Encoder] = {}
        self._decoders: dict[int, tuple[SchemaVersion, Decoder]] = {}
        self._guid_decoders: dict[str, Decoder] = {}

    async def deserialize(self, framed: bytes, fmt: str) -> Any:
        """A value in Confluent's wire format as v2's ``fmt`` consumer shows it: Avro's JSON
        encoding, Protobuf's JSON mapping, or the JSON value."""
        return (await self.decode(framed, fmt))[1]

    async def decode(self, framed: bytes, fmt: str | None = None) -> tuple[SchemaVersion, Any]:
        """(the writer's schema, the value as ``deserialize`` shows it) of a value in
        Confluent's wire format; ValueError when it is not framed, names no schema of the
        registry, or one of another format than ``fmt``; the decoders' own errors when the
        bytes do not fit the schema."""
        from ..schema_registry.errors import RegistryError

        if len(framed) < _HEADER.size or framed[0] != 0:
            raise ValueError("not in Confluent's wire format (magic byte 0 and a schema id)")
        schema_id = int.from_bytes(framed[1:_HEADER.size], "big")
        found = self._decoders.get(schema_id)
        if found is None:
            try:
                schema = self.registry.by_id(schema_id)
            except RegistryError:
                raise ValueError(f"schema {schema_id} is not in the registry") from None
        else:
            schema = found[0]
        if fmt is not None and FORMAT_OF[schema.schema_type] != fmt.upper():
            raise ValueError(f"schema {schema_id} is {schema.schema_type}, not {fmt}")
        if found is None:
            found = self._decoders[schema_id] = (schema, await self._decoder(schema))
        return schema, found[1](memoryview(framed)[_HEADER.size:])

    async def decode_guid(self, header: bytes, value: bytes) -> tuple[SchemaVersion, Any]:
        """(the writer's schema, the value as ``decode`` shows it) of a value whose schema a
        header names, as confluent-kafka's ``header_schema_id_serializer`` writes it: magic
        byte 1, the schema's GUID (16 bytes), then Protobuf's message indexes; the value is
        bare. ValueError when the header is not that or the GUID names no schema."""
        from ..schema_registry.errors import RegistryError

        if len(header) < _GUID_HEADER_BYTES or header[0] != 1:
            raise ValueError("not a schema GUID header (magic byte 1 and 16 bytes)")
        guid = str(uuid.UUID(bytes=header[1:_GUID_HEADER_BYTES]))
        try:
            schema = self.registry.by_guid(guid)
        except RegistryError:
            raise ValueError(f"schema {guid} is not in the registry") from None
        decoder = self._guid_decoders.get(guid)
        if decoder is None:
            decoder = self._guid_decoders[guid] = await self._decoder(schema)
        # the indexes read as they would after the prefix, followed by the message
        return schema, decoder(memoryview(header[_GUID_HEADER_BYTES:] + value))

    def has_subject(self, subject: str) -> bool:
        return bool(self.registry.live(subject))

    async def serialize(self, topic: str, spec: SchemaSpec, *, is_key: bool,
                        ) -> tuple[SchemaVersion, bytes | None]:
        """(the schema used, the bytes written) for ``spec``."""
        schema = await self.resolve(topic, spec, is_key=is_key)
        if spec.data is None:
            return schema, None
        from ..schema_registry.contexts import context_of

        key = (context_of(schema.subject), schema.id)
        encoder = self._encoders.get(key)
        if encoder is None:
            encoder = self._encoders[key] = await self._encoder(schema)
        return schema, encoder(spec.data)

    # --- which schema -----------------------------------------------------------------------

    async def resolve(self, topic: str, spec: SchemaSpec, *, is_key: bool) -> SchemaVersion:
        from ..schema_registry.errors import RegistryError

        registry = self.registry
        if spec.schema_id is not None:
            if spec.fmt is not None or spec.schema_version is not None or spec.raw_schema:
                raise _bad(f"{spec.field}: schema_id goes alone (no type, schema_version or "
                           "schema)")
            try:
                found = registry.by_id(spec.schema_id, spec.subject)
            except RegistryError:
                raise _bad(f"Error when fetching schema by id. schemaId = {spec.schema_id}"
                           ) from None
            subject = spec.subject or await self._subject(topic, spec, is_key, found)
            for sv in registry.live(subject):
                if sv.id == found.id:
                    return sv
            raise _bad(f"Error when fetching schema version. subject = {subject}, schema = "
                       f"{found.schema}")
        if spec.schema_version is not None:
            if spec.fmt is not None or spec.raw_schema:
                raise _bad(f"{spec.field}: schema_version goes without type and schema")
            subject = spec.subject or await self._subject(topic, spec, is_key, None)
            try:
                return registry.version(subject, str(spec.schema_version))
            except RegistryError:
                raise _bad(f"Schema does not exist for subject: {subject}, version: "
                           f"{spec.schema_version}") from None
        if spec.raw_schema is not None:
            if spec.fmt not in SCHEMA_TYPES:
                raise _bad(f"{spec.fmt or 'A record without type'} does not support schemas.")
            body = {"schema": spec.raw_schema, "schemaType": SCHEMA_TYPES[spec.fmt]}
            try:
                parsed, _refs = await registry.parse_request(body)
            except RegistryError as exc:
                raise RestError(422, 42205, f"Invalid schema: {exc.message}") from None
            subject = spec.subject or self._strategy_subject(topic, spec, is_key, parsed)
            try:
                try:
                    return await registry.lookup(subject, body)
                except RegistryError:
                    return await registry.register(subject, body)
            except RegistryError as exc:
                raise _bad(f"Error when registering schema. format = {spec.fmt}, subject = "
                           f"{subject}: {exc.message}") from None
        if spec.fmt is not None:
            raise _bad(f"{spec.field}: type {spec.fmt} needs schema_id, schema_version or "
                       "schema")
        subject = spec.subject or await self._subject(topic, spec, is_key, None)
        try:
            return registry.version(subject, "latest")
        except RegistryError:
            raise _bad(f"Error when fetching latest schema version. subject = {subject}"
                       ) from None

    async def _subject(self, topic: str, spec: SchemaSpec, is_key: bool,
                       schema: SchemaVersion | None) -> str:
        parsed = None if schema is None else await self.registry.parsed(schema)
        return self._strategy_subject(topic, spec, is_key, parsed)

    @staticmethod
    def _strategy_subject(topic: str, spec: SchemaSpec, is_key: bool, parsed: Any) -> str:
        strategy = spec.strategy or "TOPIC_NAME"
        if strategy == "TOPIC_NAME":
            return f"{topic}-{'key' if is_key else 'value'}"
        if parsed is None:
            raise _bad(f"Cannot use schema_subject_strategy={strategy} without schema_id or "
                       "schema.")
        name = _record_name(parsed)
        if name is None:
            raise _bad(f"{spec.field}: schema_subject_strategy={strategy} needs a schema with "
                       "a named record or message")
        return name if strategy == "RECORD_NAME" else f"{topic}-{name}"

    # --- serializers ------------------------------------------------------------------------

    async def _encoder(self, schema: SchemaVersion) -> Encoder:
        parsed = await self.registry.parsed(schema)
        header = _HEADER.pack(0, schema.id)
        if schema.schema_type == "AVRO":
            return _avro_encoder(parsed, header)
        if schema.schema_type == "JSON":
            return _json_encoder(parsed.parsed, header)
        if schema.references:
            raise RestError(422, 42205, "Invalid schema: a Protobuf schema with references "
                                        "cannot be written by this REST proxy yet")
        return _protobuf_encoder(schema, header)


    async def _decoder(self, schema: SchemaVersion) -> Decoder:
        parsed = await self.registry.parsed(schema)
        if schema.schema_type == "AVRO":
            return _avro_decoder(parsed)
        if schema.schema_type == "JSON":
            return lambda payload: json.loads(bytes(payload))
        return _protobuf_decoder(schema)


def _record_name(parsed: Any) -> str | None:
    """Confluent's ``ParsedSchema.name()``: an Avro record's full name, a Protobuf file's
    first message, a JSON Schema's ``title``."""
    value = parsed.parsed
    if parsed.schema_type == "AVRO":
        return value.get("name") if isinstance(value, dict) else None
    if parsed.schema_type == "PROTOBUF":
        return next(iter(value.messages), None)
    return value.get("title") if isinstance(value, dict) else None


def _avro_encoder(parsed: Any, header: bytes) -> Encoder:
    import fastavro
    from fastavro.json_read import json_reader

    schema = fastavro.parse_schema(parsed.parsed, named_schemas=dict(parsed.named))

    def encode(data: Any) -> bytes:
        try:
            record = next(iter(json_reader(io.StringIO(json.dumps(data)), schema)))
            out = io.BytesIO()
            out.write(header)
            fastavro.schemaless_writer(out, schema, record)
        except (ValueError, TypeError, KeyError, AttributeError, StopIteration) as exc:
            raise _conversion(exc) from None
        return out.getvalue()

    return encode


def _avro_decoder(parsed: Any) -> Decoder:
    import fastavro

    schema = fastavro.parse_schema(parsed.parsed, named_schemas=dict(parsed.named))

    def decode(payload: memoryview) -> Any:
        record = fastavro.schemaless_reader(io.BytesIO(payload), schema, None)
        out = io.StringIO()
        fastavro.json_writer(out, schema, [record])  # Avro's JSON encoding, as Confluent's
        return json.loads(out.getvalue())

    return decode


def _json_encoder(schema: Any, header: bytes) -> Encoder:
    import jsonschema

    validator = jsonschema.validators.validator_for(schema)(schema)

    def encode(data: Any) -> bytes:
        error = jsonschema.exceptions.best_match(validator.iter_errors(data))
        if error is not None:
            raise _conversion(error.message)
        return header + json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()

    return encode


def _protobuf_file(schema: SchemaVersion) -> Any:
    from google.protobuf import descriptor_pool

    from ..schema_registry.descriptors import ProtoError, file_descriptor

    try:
        fdp = file_descriptor(schema.schema, f"schema-{schema.id}.proto")
        pool = descriptor_pool.DescriptorPool()
        pool.Add(fdp)
        file = pool.FindFileByName(fdp.name)
    except (ProtoError, TypeError, KeyError) as exc:
        raise RestError(422, 42205, f"Invalid schema: {exc}") from None
    if not file.message_types_by_name:
        raise RestError(422, 42205, "Invalid schema: the Protobuf file defines no message")
    return file


def _protobuf_decoder(schema: SchemaVersion) -> Decoder:
    from google.protobuf import json_format, message_factory

    from ..schema_registry.descriptors import read_indexes

    file = _protobuf_file(schema)
    messages = list(file.message_types_by_name.values())

    def decode(payload: memoryview) -> Any:
        indexes, used = read_indexes(payload)
        if not 0 <= indexes[0] < len(messages):
            raise ValueError(f"message index {indexes[0]} is not in schema {schema.id}")
        descriptor = messages[indexes[0]]
        for index in indexes[1:]:
            descriptor = descriptor.nested_types[index]
        message = message_factory.GetMessageClass(descriptor)()
        message.ParseFromString(bytes(payload[used:]))
        return json_format.MessageToDict(message)

    return decode


def _protobuf_encoder(schema: SchemaVersion, header: bytes) -> Encoder:
    from google.protobuf import json_format, message_factory

    message_type = next(iter(_protobuf_file(schema).message_types_by_name.values()))
    cls = message_factory.GetMessageClass(message_type)
    # the first message of the file: Confluent's message indexes [0], written as one byte 0
    prefix = header + b"\x00"

    def encode(data: Any) -> bytes:
        try:
            message = json_format.ParseDict(data, cls())
        except json_format.ParseError as exc:
            raise _conversion(exc) from None
        return prefix + message.SerializeToString()

    return encode


__all__ = ["FORMAT_OF", "SCHEMA_TYPES", "RecordSchemas", "SchemaSpec"]
