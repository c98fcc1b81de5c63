"""Compatibility rules on parsed schemas, from Confluent's documented examples (no broker)."""

from __future__ import annotations

import json

import pytest

from trio_broker.broker.schema_registry.compat import check
from trio_broker.broker.schema_registry.errors import RegistryError
from trio_broker.broker.schema_registry.schemas import ParsedSchema, parse_schema


def avro(*fields: dict[str, object], name: str = "User", **extra: object) -> ParsedSchema:
    return parse_schema("AVRO", json.dumps({"type": "record", "name": name, **extra,
                                            "fields": list(fields)}))


def field(name: str, kind: object, **extra: object) -> dict[str, object]:
    return {"name": name, "type": kind, **extra}


V1 = avro(field("name", "string"))
ADDED_WITH_DEFAULT = avro(field("name", "string"), field("age", "int", default=0))
ADDED_NO_DEFAULT = avro(field("name", "string"), field("age", "int"))


@pytest.mark.parametrize(("level", "new", "ok"), [
    # Confluent: BACKWARD allows deleting fields and adding optional ones
    ("BACKWARD", ADDED_WITH_DEFAULT, True),
    ("BACKWARD", ADDED_NO_DEFAULT, False),
    ("BACKWARD", avro(), True),
    # FORWARD allows adding fields and deleting optional ones
    ("FORWARD", ADDED_NO_DEFAULT, True),
    ("FORWARD", avro(), False),
    # FULL: only optional fields are added or deleted
    ("FULL", ADDED_WITH_DEFAULT, True),
    ("FULL", ADDED_NO_DEFAULT, False),
    ("NONE", avro(field("name", "int")), True),
])
def test_levels_on_added_and_removed_fields(level: str, new: ParsedSchema, ok: bool) -> None:
    assert (check(level, new, [V1]) == []) is ok


def test_transitive_checks_every_version() -> None:
    v1 = avro(field("a", "int"))
    v2 = avro(field("a", "int"), field("b", "string", default="x"))
    v3 = avro(field("a", "int"), field("b", "string"))
    assert check("BACKWARD", v3, [v1, v2]) == []
    problems = check("BACKWARD_TRANSITIVE", v3, [v1, v2])
    assert problems
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in problems[0]


def test_forward_and_full_transitive() -> None:
    v1 = avro(field("a", "int"), field("b", "string"))
    v2 = avro(field("a", "int"), field("b", "string", default="x"))
    # v3 drops b: v2 (b has a default) reads v3's data, v1 (no default) cannot
    v3 = avro(field("a", "int"))
    assert check("FORWARD", v3, [v1, v2]) == []
    assert check("FORWARD_TRANSITIVE", v3, [v1, v2])
    assert check("FULL", v3, [v1, v2]) == []
    assert check("FULL_TRANSITIVE", v3, [v1, v2])


@pytest.mark.parametrize(("writer", "reader", "ok"), [
    ("int", "long", True), ("int", "float", True), ("int", "double", True),
    ("long", "double", True), ("float", "double", True), ("string", "bytes", True),
    ("bytes", "string", True), ("long", "int", False), ("double", "float", False),
    ("string", "int", False), ("int", ["null", "long"], True), (["null", "int"], "int", False),
    (["null", "int"], ["null", "int", "string"], True),
])
def test_promotions_and_unions(writer: object, reader: object, ok: bool) -> None:
    assert (check("BACKWARD", avro(field("f", reader)), [avro(field("f", writer))]) == []) is ok


def enum(*symbols: str, **extra: object) -> ParsedSchema:
    return avro(field("e", {"type": "enum", "name": "E", "symbols": list(symbols), **extra}))


def test_enum_symbols() -> None:
    assert check("BACKWARD", enum("A", "B", "C"), [enum("A", "B")]) == []
    assert "MISSING_ENUM_SYMBOLS" in check("BACKWARD", enum("A"), [enum("A", "B")])[0]
    # a reader default reads the symbols it lost
    assert check("BACKWARD", enum("A", default="A"), [enum("A", "B")]) == []


def test_aliases_rename_fields_and_records() -> None:
    renamed = avro(field("full_name", "string", aliases=["name"]))
    assert check("BACKWARD", renamed, [V1]) == []
    new_name = avro(field("name", "string"), name="Person", aliases=["User"])
    assert check("BACKWARD", new_name, [V1]) == []
    assert "NAME_MISMATCH" in check("BACKWARD", avro(field("name", "string"), name="Person"),
                                    [V1])[0]


def test_nested_records_arrays_maps_and_recursion() -> None:
    def nested(extra: list[dict[str, object]]) -> ParsedSchema:
        inner = {"type": "record", "name": "Inner", "fields": [field("x", "int"), *extra]}
        return avro(field("items", {"type": "array", "items": inner}),
                    field("by_key", {"type": "map", "values": "Inner"}),
                    field("next", ["null", "User"], default=None))
    assert check("BACKWARD", nested([field("y", "int", default=1)]), [nested([])]) == []
    problems = check("BACKWARD", nested([field("y", "int")]), [nested([])])
    assert problems
    assert "'y'" in problems[0]


def test_fixed_size() -> None:
    def fixed(size: int) -> ParsedSchema:
        return avro(field("f", {"type": "fixed", "name": "F", "size": size}))
    assert check("FULL", fixed(16), [fixed(16)]) == []
    assert "FIXED_SIZE_MISMATCH" in check("BACKWARD", fixed(8), [fixed(16)])[0]


@pytest.mark.parametrize(("schema_type", "text"), [
    ("AVRO", '{"type": "record", "name": "R"}'),
    ("AVRO", '{"type": "nope"}'),
    ("AVRO", "not json"),
    ("JSON", '{"type": 12}'),
    ("PROTOBUF", "message M { int32 a = 1 }"),
    ("PROTOBUF", "message M { int32 a = 1; int64 b = 1; }"),
    ("PROTOBUF", 'syntax = "proto3"; message { }'),
])
def test_invalid_schemas_are_42201(schema_type: str, text: str) -> None:
    with pytest.raises(RegistryError) as info:
        parse_schema(schema_type, text)
    assert info.value.error_code == 42201


def json_schema(properties: dict[str, object], **extra: object) -> ParsedSchema:
    return parse_schema("JSON", json.dumps({"type": "object", "properties": properties,
                                            **extra}))


def test_json_schema_rules() -> None:
    closed = {"additionalProperties": False}
    old = json_schema({"a": {"type": "integer"}}, **closed)
    # a property added to a closed model reads the old data
    assert check("BACKWARD", json_schema({"a": {"type": "integer"}, "b": {"type": "string"}},
                                         **closed), [old]) == []
    # widening integer to number reads it too; narrowing does not
    assert check("BACKWARD", json_schema({"a": {"type": "number"}}, **closed), [old]) == []
    wide = json_schema({"a": {"type": "number"}}, **closed)
    assert "TYPE_CHANGED" in check("BACKWARD", old, [wide])[0]
    # a property added to an open model may clash with what the old one let through
    assert "OPEN_CONTENT_MODEL" in check("BACKWARD", json_schema(
        {"a": {"type": "integer"}, "b": {"type": "string"}}), [json_schema(
            {"a": {"type": "integer"}})])[0]
    assert "REQUIRED" in check("BACKWARD", json_schema({"a": {"type": "integer"}}, required=["a"],
                                                       **closed), [old])[0]


PROTO = 'syntax = "proto3";\npackage acme;\nmessage Order {{ {fields} }}\n'


def proto(fields: str) -> ParsedSchema:
    return parse_schema("PROTOBUF", PROTO.format(fields=fields))


def test_protobuf_rules() -> None:
    old = proto("string id = 1; int32 qty = 2;")
    assert check("FULL", proto("string id = 1; int64 qty = 2; string note = 3;"), [old]) == []
    assert check("BACKWARD", proto("string id = 1;"), [old]) == []
    assert "FIELD_SCALAR_KIND_CHANGED" in check("BACKWARD", proto("string id = 1; "
                                                                  "string qty = 2;"), [old])[0]
    assert "FIELD_LABEL_CHANGED" in check("BACKWARD", proto("string id = 1; "
                                                            "repeated int32 qty = 2;"), [old])[0]
    renamed = parse_schema("PROTOBUF", 'syntax = "proto3";\npackage acme;\nmessage Other {}')
    assert "MESSAGE_REMOVED" in check("BACKWARD", renamed, [old])[0]


def test_protobuf_text_and_descriptor_compare_alike() -> None:
    """The same file as .proto text and as the base64 descriptor confluent-kafka sends."""
    import base64

    from google.protobuf import descriptor_pb2

    text = ('syntax = "proto3";\npackage acme;\nmessage Money { int64 cents = 1; }\n'
            "message Order { Money price = 1; repeated string tags = 2; }\n")
    t = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="order.proto", package="acme",
                                               syntax="proto3")
    proto.message_type.add(name="Money").field.add(name="cents", number=1, type=t.TYPE_INT64,
                                                   label=t.LABEL_OPTIONAL)
    order = proto.message_type.add(name="Order")
    order.field.add(name="price", number=1, type=t.TYPE_MESSAGE, type_name=".acme.Money",
                    label=t.LABEL_OPTIONAL)
    order.field.add(name="tags", number=2, type=t.TYPE_STRING, label=t.LABEL_REPEATED)
    from_text = parse_schema("PROTOBUF", text)
    from_descriptor = parse_schema("PROTOBUF",
                                   base64.b64encode(proto.SerializeToString()).decode())
    assert from_text.parsed.messages == from_descriptor.parsed.messages
    assert check("FULL_TRANSITIVE", from_text, [from_descriptor]) == []
