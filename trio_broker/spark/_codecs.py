"""Confluent's wire format for Avro, Protobuf and JSON Schema values, in the Spark tasks.

A framed value is magic byte 0, the schema id (big-endian int32), then, for Protobuf only, the
message indexes (which message of the schema's file: a zig-zag varint count and the indexes;
the first message is the single byte 0), then the payload: Avro binary, the protobuf message, or
JSON text. This is what confluent-kafka's ``AvroSerializer``, ``ProtobufSerializer`` and
``JSONSerializer`` write and their deserializers read.

Why codecs per schema id, cached per process: building one (parsing an Avro schema, building a
protobuf descriptor pool and message class, fetching the references) costs milliseconds, a
record microseconds; a Python worker builds each once and reuses it for every task it runs.
Values are plain Python (dicts, lists, datetimes) on both sides, which Arrow turns into
columns: fastavro and protobuf decode to Python objects anyway.
"""

from __future__ import annotations

import importlib
import io
import json
import struct
import threading
from collections.abc import Callable
from typing import Any

from ..client.core.errors import ConfigError
from ._avro_unions import union_shaper
from ._registry_client import RegisteredSchema, RegistryClient
from ._schema_types import is_repeated

#: magic byte 0, then the schema id
HEADER = struct.Struct(">bI")
#: logical types decoded as their underlying type: Spark has no uuid or time-of-day type, and
#: fastavro would return ``UUID`` and ``time`` objects Arrow cannot put in those columns
_PLAIN_LOGICAL = frozenset({"uuid", "time-millis", "time-micros"})


class SerializationError(ValueError):
    """A value is not in Confluent's wire format, or does not fit its schema."""


def schema_id(value: bytes) -> int:
    """The schema id of a framed value; SerializationError when it is not framed."""
    if len(value) < HEADER.size or value[0] != 0:
        found = "too short" if len(value) < HEADER.size else f"magic byte {value[0]}"
        raise SerializationError(f"not in Confluent's wire format: {found} (expected magic "
                                 "byte 0 and a 4-byte schema id)")
    return int.from_bytes(value[1:HEADER.size], "big")


# --- Avro ---------------------------------------------------------------------------------------

def _plain(schema: Any) -> Any:
    """``schema`` with the logical types in ``_PLAIN_LOGICAL`` dropped."""
    if isinstance(schema, list):
        return [_plain(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _plain(v) for k, v in schema.items() if k != "default"}
    if "default" in schema:
        out["default"] = schema["default"]
    if out.get("logicalType") in _PLAIN_LOGICAL:
        del out["logicalType"]
    if "fields" in out:
        out["fields"] = [{**f, "type": _plain(f["type"])} for f in schema["fields"]]
    return out


def avro_named(client: RegistryClient, schema: RegisteredSchema,
               named: dict[str, Any] | None = None) -> dict[str, Any]:
    """The named types ``schema``'s references define (parsed, for fastavro)."""
    import fastavro

    named = {} if named is None else named
    for ref in schema.references:
        sub = client.version(ref.subject, ref.version)
        avro_named(client, sub, named)
        fastavro.parse_schema(_plain(json.loads(sub.schema)), named_schemas=named)
    return named


class AvroCodec:
    """Avro binary with ``writer``'s schema; decoded into ``reader``'s (Avro's schema
    resolution: defaults for fields the writer lacked, promotions), as Spark's ``from_avro``
    and confluent-kafka's ``AvroDeserializer`` with a reader schema do."""

    def __init__(self, client: RegistryClient, writer: RegisteredSchema,
                 reader: RegisteredSchema | None = None) -> None:
        import fastavro

        self.writer = fastavro.parse_schema(_plain(json.loads(writer.schema)),
                                            named_schemas=avro_named(client, writer))
        self.reader = None if reader is None or reader.id == writer.id else (
            fastavro.parse_schema(_plain(json.loads(reader.schema)),
                                  named_schemas=avro_named(client, reader)))
        self._read = fastavro.schemaless_reader
        self._write = fastavro.schemaless_writer
        # unions of several types: their values reshaped into Spark's member structs, the
        # branch told by the names fastavro then returns
        self._shape = union_shaper(_plain(json.loads((reader or writer).schema)))

    def decode(self, framed: bytes) -> Any:
        """The value of a framed record (header included: the reader skips it, sparing a
        copy of the payload)."""
        data = io.BytesIO(framed)
        data.seek(HEADER.size)
        try:
            if self._shape is not None:
                return self._shape(self._read(data, self.writer, self.reader,
                                              return_named_type=True))
            return self._read(data, self.writer, self.reader)
        except (EOFError, ValueError, TypeError, IndexError, KeyError, StopIteration) as exc:
            raise SerializationError(f"not Avro binary of its schema: {exc!r}") from None

    def encode(self, value: Any) -> bytes:
        out = io.BytesIO()
        try:
            self._write(out, self.writer, value)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise SerializationError(f"the value does not fit the Avro schema: {exc}") from None
        return out.getvalue()


# --- Protobuf -----------------------------------------------------------------------------------

def read_indexes(payload: memoryview) -> tuple[list[int], int]:
    """Protobuf's message indexes at the start of ``payload``: (indexes, bytes read)."""
    from ..broker.schema_registry.descriptors import read_indexes as read

    try:
        return read(payload)
    except ValueError as exc:
        raise SerializationError(str(exc)) from None


def write_indexes(indexes: list[int]) -> bytes:
    from ..broker.schema_registry.descriptors import write_indexes as write

    return write(indexes)


def file_descriptor(schema: RegisteredSchema, name: str) -> Any:
    """The ``FileDescriptorProto`` of a stored Protobuf schema (serialized, or .proto text)."""
    from ..broker.schema_registry.descriptors import ProtoError
    from ..broker.schema_registry.descriptors import file_descriptor as stored_descriptor

    try:
        return stored_descriptor(schema.schema, name)
    except ProtoError as exc:
        raise ConfigError(f"Protobuf schema {name} cannot be read: {exc}") from None


def _add_file(pool: Any, client: RegistryClient, schema: RegisteredSchema, name: str,
              added: set[str]) -> Any:
    fdp = file_descriptor(schema, name)
    refs = {ref.name: ref for ref in schema.references}
    for dependency in fdp.dependency:
        if dependency in added:
            continue
        added.add(dependency)
        if dependency in refs:
            ref = refs[dependency]
            _add_file(pool, client, client.version(ref.subject, ref.version), dependency, added)
        elif dependency.startswith("google/protobuf/"):  # well-known types ship with protobuf
            module = importlib.import_module(
                "google.protobuf." + dependency.removeprefix("google/protobuf/")
                .removesuffix(".proto") + "_pb2")
            pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
        else:
            raise ConfigError(f"Protobuf schema {schema.id} imports {dependency!r}, which is "
                              "neither one of its references nor a well-known type")
    return pool.Add(fdp)


class ProtobufCodec:
    """Messages of one registered file, with classes built from its descriptor."""

    def __init__(self, client: RegistryClient, schema: RegisteredSchema) -> None:
        from google.protobuf import descriptor_pool

        self.pool = descriptor_pool.DescriptorPool()
        self.file = _add_file(self.pool, client, schema, f"schema_{schema.id}.proto", set())
        self._classes: dict[tuple[int, ...], Any] = {}

    def message(self, indexes: list[int]) -> Any:
        """The message class at ``indexes`` (top-level message, then nested ones)."""
        key = tuple(indexes)
        found = self._classes.get(key)
        if found is None:
            from google.protobuf import message_factory

            try:
                descriptor = self.file.message_types_by_name[
                    list(self.file.message_types_by_name)[indexes[0]]]
                for index in indexes[1:]:
                    descriptor = descriptor.nested_types[index]
            except IndexError:
                raise SerializationError(f"no message at indexes {indexes} in "
                                         f"{self.file.name}") from None
            found = self._classes[key] = message_factory.GetMessageClass(descriptor)
        return found

    def indexes_of(self, full_name: str) -> list[int]:
        """The message indexes of the message named ``full_name``."""
        descriptor = self.pool.FindMessageTypeByName(full_name)
        path: list[int] = []
        while descriptor.containing_type is not None:
            path.append(list(descriptor.containing_type.nested_types).index(descriptor))
            descriptor = descriptor.containing_type
        path.append(list(self.file.message_types_by_name.values()).index(descriptor))
        return path[::-1]

    def decode(self, framed: bytes) -> Any:
        from google.protobuf.message import DecodeError

        indexes, used = read_indexes(memoryview(framed)[HEADER.size:])
        try:
            return to_python(self.message(indexes).FromString(framed[HEADER.size + used:]))
        except DecodeError as exc:
            raise SerializationError(f"not a protobuf message of its schema: {exc}") from None

    def encoder(self, full_name: str) -> Callable[[Any], bytes]:
        indexes = write_indexes(self.indexes_of(full_name))
        cls = self.message(self.indexes_of(full_name))

        def encode(value: Any) -> bytes:
            try:
                return indexes + cls(**_without_nulls(value)).SerializeToString()
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise SerializationError(f"the value does not fit {full_name}: {exc}") from None
        return encode


def to_python(message: Any) -> dict[str, Any]:
    """A message as a dict: unset message fields and unset optional scalars are None, enums
    their names, maps dicts."""
    out: dict[str, Any] = {}
    for name, kind, convert in _plan(message.DESCRIPTOR):
        value = getattr(message, name)
        if kind == _PLAIN:
            out[name] = value if convert is None else convert(value)
        elif kind == _PRESENCE:
            out[name] = (None if not message.HasField(name)
                         else value if convert is None else convert(value))
        elif kind == _REPEATED:
            out[name] = list(value) if convert is None else [convert(v) for v in value]
        else:
            out[name] = ({k: v for k, v in value.items()} if convert is None
                         else {k: convert(v) for k, v in value.items()})
    return out


_PLAIN, _PRESENCE, _REPEATED, _MAP = range(4)
#: per message descriptor: (field name, kind, converter of one value or None)
_PLANS: dict[Any, list[tuple[str, int, Any]]] = {}


def _plan(descriptor: Any) -> list[tuple[str, int, Any]]:
    """How to read each field of ``descriptor``'s messages, worked out once per descriptor:
    walking the descriptor for every message would cost more than the decoding."""
    found = _PLANS.get(descriptor)
    if found is None:
        found = []
        for f in descriptor.fields:
            if f.message_type is not None and f.message_type.GetOptions().map_entry:
                found.append((f.name, _MAP, _converter(f.message_type.fields_by_name["value"])))
            elif is_repeated(f):
                found.append((f.name, _REPEATED, _converter(f)))
            else:
                found.append((f.name, _PRESENCE if f.has_presence else _PLAIN, _converter(f)))
        _PLANS[descriptor] = found
    return found


def _converter(field: Any) -> Any:
    if field.message_type is not None:
        return to_python
    if field.enum_type is not None:
        names = {v.number: v.name for v in field.enum_type.values}
        return lambda number: names.get(number, str(number))
    return None


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


# --- JSON Schema --------------------------------------------------------------------------------

class JsonCodec:
    """JSON text; values written are validated against the schema first, as confluent-kafka's
    ``JSONSerializer`` validates them."""

    def __init__(self, schema: RegisteredSchema) -> None:
        import jsonschema

        parsed = json.loads(schema.schema)
        self.validator = jsonschema.validators.validator_for(parsed)(parsed)

    def decode(self, framed: bytes) -> Any:
        try:
            return json.loads(framed[HEADER.size:])
        except ValueError as exc:
            raise SerializationError(f"not JSON: {exc}") from None

    def encode(self, value: Any) -> bytes:
        error = next(iter(self.validator.iter_errors(value)), None)
        if error is not None:
            raise SerializationError(f"the value does not fit the JSON Schema: {error.message}")
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


_CODECS: dict[tuple[Any, ...], Any] = {}
_CODECS_LOCK = threading.Lock()


def cached(key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
    """The codec under ``key``, built once per process."""
    with _CODECS_LOCK:
        found = _CODECS.get(key)
    if found is None:
        found = build()
        with _CODECS_LOCK:
            found = _CODECS.setdefault(key, found)
    return found


__all__ = ["HEADER", "AvroCodec", "JsonCodec", "ProtobufCodec", "SerializationError", "cached",
           "file_descriptor", "read_indexes", "schema_id", "to_python", "write_indexes"]
