"""Registry schemas as Spark types, and Spark types as registry schemas.

Why both ways: a read declares its ``key``/``value`` columns with the type the subject's schema
maps to, and a write registers the schema its column's type maps to, as confluent-kafka's
serializers register the schema of what they write (auto-register).

Avro follows Spark's own ``SchemaConverters`` (``from_avro``/``to_avro``): records -> structs,
arrays, maps, ``[null, T]`` unions -> nullable T, ``[int, long]`` -> long, ``[float, double]``
-> double, other unions -> ``struct<member0, member1, ...>`` (read only), enum -> string,
fixed/bytes -> binary, logical types date, timestamp-millis/micros, local-timestamp-millis/micros
and decimal -> date, timestamp, timestamp_ntz, decimal; uuid -> string. A write's derived
schema differs from ``to_avro`` in one point: a nullable field is ``["null", T]`` with default
null (what Confluent's tools write, and what lets a reader drop
or add the field under BACKWARD compatibility). Protobuf: messages -> structs, repeated ->
arrays, maps -> maps, enums -> their names. JSON Schema: ``object`` with ``properties`` ->
struct, ``array`` -> array, an ``object`` with only ``additionalProperties`` -> map,
``["T", "null"]`` -> nullable T. What does not map raises ``UnmappableSchema`` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from ..client.core.errors import ConfigError

#: Spark's ``to_avro`` default name of the top-level record
TOP_LEVEL_RECORD = "topLevelRecord"


class UnmappableSchema(ConfigError):
    """A schema (or a part of it) has no Spark type, or a Spark type no schema."""


# --- Avro ---------------------------------------------------------------------------------------

_AVRO_PRIMITIVES: dict[str, DataType] = {
    "boolean": BooleanType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
    "double": DoubleType(), "bytes": BinaryType(), "string": StringType(),
}
_AVRO_LOGICAL: dict[str, DataType] = {
    "date": DateType(), "timestamp-millis": TimestampType(), "timestamp-micros": TimestampType(),
    "local-timestamp-millis": TimestampNTZType(), "local-timestamp-micros": TimestampNTZType(),
    "uuid": StringType(),
}


def avro_to_spark(schema: Any, named: dict[str, Any] | None = None,
                  namespace: str = "") -> DataType:
    """The Spark type of an Avro schema (JSON value); ``named`` collects named types."""
    named = {} if named is None else named
    if isinstance(schema, str):
        if schema in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[schema]
        full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
        for candidate in (full, schema):
            if candidate in named:
                if named[candidate] is None:
                    raise UnmappableSchema(f"recursive Avro type {candidate} has no Spark type")
                return named[candidate]  # type: ignore[no-any-return]
        raise UnmappableSchema(f"unknown Avro type {schema!r}")
    if isinstance(schema, list):
        return _avro_union(schema, named, namespace)
    if not isinstance(schema, dict):
        raise UnmappableSchema(f"not an Avro schema: {schema!r}")
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        return DecimalType(int(schema["precision"]), int(schema.get("scale", 0)))
    if logical in _AVRO_LOGICAL and kind in ("int", "long", "string"):
        return _AVRO_LOGICAL[logical]
    if kind in ("record", "error", "enum", "fixed"):
        name = str(schema["name"])
        space = schema.get("namespace", namespace) if "." not in name else name.rpartition(".")[0]
        full = name if "." in name or not space else f"{space}.{name}"
        if kind == "enum":
            named[full] = StringType()
        elif kind == "fixed":
            named[full] = BinaryType()
        else:
            named[full] = None  # being mapped: a reference to it now is recursion
            named[full] = StructType([
                StructField(str(f["name"]), *_avro_field(f["type"], named, space))
                for f in schema["fields"]])
        return named[full]  # type: ignore[no-any-return]
    if kind == "array":
        item, item_null = _avro_field(schema["items"], named, namespace)
        return ArrayType(item, item_null)
    if kind == "map":
        value, value_null = _avro_field(schema["values"], named, namespace)
        return MapType(StringType(), value, value_null)
    return avro_to_spark(kind, named, namespace)


def _avro_field(schema: Any, named: dict[str, Any], namespace: str) -> tuple[DataType, bool]:
    """(type, nullable): a union with null is a nullable field of the other branch."""
    nullable = isinstance(schema, list) and "null" in schema
    return avro_to_spark(schema, named, namespace), nullable


def _avro_union(branches: list[Any], named: dict[str, Any], namespace: str) -> DataType:
    """Spark's ``SchemaConverters``: one non-null branch is that type, nullable; int and long
    (float and double) the wider one; other unions a struct with a ``member<i>`` field per
    non-null branch (``_avro_unions`` fills the one a value came from)."""
    others = [b for b in branches if b != "null"]
    if len(others) == 1:
        return avro_to_spark(others[0], named, namespace)
    if set(map(str, others)) in ({"int", "long"}, {"float", "double"}):
        return LongType() if "long" in others else DoubleType()
    return StructType([StructField(f"member{i}", avro_to_spark(b, named, namespace), True)
                       for i, b in enumerate(others)])


def spark_to_avro(data_type: DataType, name: str = TOP_LEVEL_RECORD,
                  namespace: str = "") -> Any:
    """The Avro schema a write registers for a column of ``data_type``."""
    if isinstance(data_type, StructType):
        space = f"{namespace}.{name}" if namespace else name
        fields = []
        for f in data_type.fields:
            child = spark_to_avro(f.dataType, f.name, space)
            fields.append({"name": f.name, "type": ["null", child], "default": None}
                          if f.nullable else {"name": f.name, "type": child})
        record: dict[str, Any] = {"type": "record", "name": name, "fields": fields}
        if namespace:
            record["namespace"] = namespace
        return record
    if isinstance(data_type, ArrayType):
        item = spark_to_avro(data_type.elementType, name, namespace)
        return {"type": "array", "items": ["null", item] if data_type.containsNull else item}
    if isinstance(data_type, MapType):
        if not isinstance(data_type.keyType, StringType):
            raise UnmappableSchema(f"Avro maps have string keys, not {data_type.keyType}")
        value = spark_to_avro(data_type.valueType, name, namespace)
        return {"type": "map",
                "values": ["null", value] if data_type.valueContainsNull else value}
    if isinstance(data_type, DecimalType):
        return {"type": "bytes", "logicalType": "decimal", "precision": data_type.precision,
                "scale": data_type.scale}
    for spark_type, avro in _SPARK_TO_AVRO:
        if isinstance(data_type, spark_type):
            return avro
    raise UnmappableSchema(f"{data_type.simpleString()} has no Avro type")


_SPARK_TO_AVRO: tuple[tuple[type, Any], ...] = (
    (BooleanType, "boolean"), (ByteType, "int"), (ShortType, "int"), (IntegerType, "int"),
    (LongType, "long"), (FloatType, "float"), (DoubleType, "double"), (StringType, "string"),
    (BinaryType, "bytes"), (DateType, {"type": "int", "logicalType": "date"}),
    (TimestampNTZType, {"type": "long", "logicalType": "local-timestamp-micros"}),
    (TimestampType, {"type": "long", "logicalType": "timestamp-micros"}),
)


# --- Protobuf -----------------------------------------------------------------------------------

def proto_to_spark(descriptor: Any, depth: int = 0) -> StructType:
    """The struct of a protobuf ``Descriptor`` (a message type)."""
    if depth > 32:
        raise UnmappableSchema(f"recursive message {descriptor.full_name} has no Spark type")
    fields = []
    for f in descriptor.fields:
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            key = _proto_scalar(f.message_type.fields_by_name["key"], depth)
            value = _proto_scalar(f.message_type.fields_by_name["value"], depth)
            fields.append(StructField(f.name, MapType(key, value, True)))
        elif is_repeated(f):
            fields.append(StructField(f.name, ArrayType(_proto_scalar(f, depth), False)))
        else:
            fields.append(StructField(f.name, _proto_scalar(f, depth)))
    return StructType(fields)


def is_repeated(field: Any) -> bool:
    from google.protobuf.descriptor import FieldDescriptor as FD

    repeated = getattr(field, "is_repeated", None)
    return bool(repeated) if repeated is not None else field.label == FD.LABEL_REPEATED


def _proto_scalar(field: Any, depth: int) -> DataType:
    from google.protobuf.descriptor import FieldDescriptor as FD

    if field.type == FD.TYPE_MESSAGE:
        return proto_to_spark(field.message_type, depth + 1)
    if field.type == FD.TYPE_ENUM:
        return StringType()
    found = _PROTO_TYPES.get(field.type)
    if found is None:
        raise UnmappableSchema(f"protobuf field {field.full_name} of type {field.type} has no "
                               "Spark type")
    return found


# FieldDescriptor.TYPE_* numbers (descriptor.proto): fixed by the protobuf format; the unsigned
# 32-bit types (uint32 13, fixed32 7) need a bigint, as in Spark's protobuf connector
_PROTO_TYPES: dict[int, DataType] = {
    1: DoubleType(), 2: FloatType(), 3: LongType(), 4: LongType(), 5: IntegerType(),
    6: LongType(), 7: LongType(), 8: BooleanType(), 9: StringType(), 12: BinaryType(),
    13: LongType(), 15: IntegerType(), 16: LongType(), 17: IntegerType(), 18: LongType(),
}
_SPARK_TO_PROTO: tuple[tuple[type, int], ...] = (
    (BooleanType, 8), (ByteType, 5), (ShortType, 5), (IntegerType, 5), (LongType, 3),
    (FloatType, 2), (DoubleType, 1), (StringType, 9), (BinaryType, 12),
)


def spark_to_proto(struct: StructType, message: str, file_name: str) -> Any:
    """A proto3 ``FileDescriptorProto`` with one message for ``struct``: fields numbered in
    column order, a nullable scalar ``optional`` (so null and zero stay apart), a nested struct
    a nested message named after its field."""
    from google.protobuf import descriptor_pb2

    file = descriptor_pb2.FileDescriptorProto(name=file_name, syntax="proto3")
    _proto_message(file.message_type.add(), struct, message, f".{message}")
    return file


def _proto_message(out: Any, struct: StructType, name: str, full: str) -> None:
    from google.protobuf import descriptor_pb2

    t = descriptor_pb2.FieldDescriptorProto
    out.name = name
    for number, f in enumerate(struct.fields, start=1):
        field = out.field.add(name=f.name, number=number, json_name=_json_name(f.name))
        data_type = f.dataType
        if isinstance(data_type, MapType):
            entry = out.nested_type.add(name=_camel(f.name) + "Entry")
            entry.options.map_entry = True
            for n, (part, kind) in enumerate((("key", data_type.keyType),
                                              ("value", data_type.valueType)), start=1):
                sub = entry.field.add(name=part, number=n, json_name=part,
                                      label=t.LABEL_OPTIONAL)
                _proto_type(sub, kind, entry, f"{full}.{entry.name}", part)
            field.label = t.LABEL_REPEATED
            field.type = t.TYPE_MESSAGE
            field.type_name = f"{full}.{entry.name}"
            continue
        if isinstance(data_type, ArrayType):
            field.label = t.LABEL_REPEATED
            data_type = data_type.elementType
        else:
            field.label = t.LABEL_OPTIONAL
            if f.nullable and not isinstance(data_type, StructType):
                field.proto3_optional = True
                field.oneof_index = len(out.oneof_decl)
                out.oneof_decl.add(name=f"_{f.name}")
        _proto_type(field, data_type, out, full, f.name)


def _proto_type(field: Any, data_type: DataType, parent: Any, full: str, name: str) -> None:
    from google.protobuf import descriptor_pb2

    if isinstance(data_type, StructType):
        nested_name = _camel(name)
        _proto_message(parent.nested_type.add(), data_type, nested_name,
                       f"{full}.{nested_name}")
        field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
        field.type_name = f"{full}.{nested_name}"
        return
    for spark_type, proto_type in _SPARK_TO_PROTO:
        if isinstance(data_type, spark_type):
            field.type = proto_type
            return
    raise UnmappableSchema(f"{data_type.simpleString()} has no protobuf type")


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_")) or "Field"


def _json_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


# --- JSON Schema --------------------------------------------------------------------------------

_JSON_TYPES: dict[str, DataType] = {"string": StringType(), "integer": LongType(),
                                    "number": DoubleType(), "boolean": BooleanType()}


def json_schema_to_spark(schema: Mapping[str, Any], depth: int = 0) -> DataType:
    """The Spark type of a JSON Schema (``$ref``s to ``#/definitions`` and ``#/$defs`` of the
    root are followed)."""
    return _json_type(schema, schema, depth)[0]


def _json_type(schema: Any, root: Mapping[str, Any], depth: int) -> tuple[DataType, bool]:
    if depth > 32:
        raise UnmappableSchema("JSON Schema nested too deep (or recursive) for a Spark type")
    if not isinstance(schema, Mapping):
        raise UnmappableSchema(f"JSON Schema {schema!r} has no Spark type")
    if "$ref" in schema:
        ref = str(schema["$ref"])
        parts = ref.removeprefix("#/").split("/")
        if not ref.startswith("#/") or len(parts) != 2 or parts[0] not in ("definitions",
                                                                           "$defs"):
            raise UnmappableSchema(f"JSON Schema $ref {ref!r} is not followed here")
        return _json_type(root[parts[0]][parts[1]], root, depth + 1)
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    nullable = "null" in kinds
    others = [k for k in kinds if k != "null"]
    if others == ["object"] or (not others and "properties" in schema):
        props = schema.get("properties")
        if props:
            required = set(schema.get("required", ()))
            fields = []
            for name, sub in props.items():
                kind, null = _json_type(sub, root, depth + 1)
                fields.append(StructField(name, kind, null or name not in required))
            return StructType(fields), nullable
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            value, _ = _json_type(extra, root, depth + 1)
            return MapType(StringType(), value, True), nullable
        raise UnmappableSchema("a JSON Schema object without properties has no Spark type")
    if others == ["array"]:
        item, _ = _json_type(schema.get("items", {}), root, depth + 1)
        return ArrayType(item, True), nullable
    if len(others) == 1 and others[0] in _JSON_TYPES:
        return _JSON_TYPES[others[0]], nullable
    if set(others) == {"integer", "number"}:
        return DoubleType(), nullable
    raise UnmappableSchema(f"JSON Schema {dict(schema)!r} has no Spark type (one type, or one "
                           "type and null, is mapped)")


def spark_to_json_schema(data_type: DataType, nullable: bool = False,
                         title: str | None = TOP_LEVEL_RECORD) -> dict[str, Any]:
    """The JSON Schema a write registers for a column of ``data_type`` (draft-07)."""
    out: dict[str, Any]
    if isinstance(data_type, StructType):
        out = {"type": "object", "properties": {
            f.name: spark_to_json_schema(f.dataType, f.nullable, None) for f in data_type.fields},
            "required": [f.name for f in data_type.fields if not f.nullable]}
        if not out["required"]:
            del out["required"]
    elif isinstance(data_type, ArrayType):
        out = {"type": "array",
               "items": spark_to_json_schema(data_type.elementType, data_type.containsNull,
                                             None)}
    elif isinstance(data_type, MapType) and isinstance(data_type.keyType, StringType):
        out = {"type": "object", "additionalProperties": spark_to_json_schema(
            data_type.valueType, data_type.valueContainsNull, None)}
    elif isinstance(data_type, (ByteType, ShortType, IntegerType, LongType)):
        out = {"type": "integer"}
    elif isinstance(data_type, (FloatType, DoubleType)):
        out = {"type": "number"}
    elif isinstance(data_type, BooleanType):
        out = {"type": "boolean"}
    elif isinstance(data_type, StringType):
        out = {"type": "string"}
    else:
        raise UnmappableSchema(f"{data_type.simpleString()} has no JSON Schema type here")
    if nullable:
        out["type"] = [out["type"], "null"]
    if title is not None:
        out = {"$schema": "http://json-schema.org/draft-07/schema#", "title": title, **out}
    return out


__all__ = ["TOP_LEVEL_RECORD", "UnmappableSchema", "avro_to_spark", "is_repeated",
           "json_schema_to_spark", "proto_to_spark", "spark_to_avro", "spark_to_json_schema",
           "spark_to_proto"]
