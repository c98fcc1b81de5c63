"""The three schema types: parse, validate and give the form a schema is stored and compared in.

Why a parsed form per type: lookups and de-duplication compare schemas by their canonical text
(Confluent's ``canonicalString``: Avro and JSON Schema as compact JSON, Protobuf as given), and
compatibility works on the parsed form. Parsing is plain synchronous code; the HTTP side runs it
in a worker thread under a limiter (``registry.py``), so a huge or hostile schema never stalls
the broker's event loop.

References resolve before the schema: each one names a (subject, version) whose schema text is
handed in by the caller, with its own references already resolved.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from . import protobuf
from .errors import RegistryError, invalid_schema

#: Confluent's ``/schemas/types``
SCHEMA_TYPES = ("JSON", "PROTOBUF", "AVRO")


@attrs.frozen
class Reference:
    name: str
    subject: str
    version: int

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@attrs.frozen
class ParsedSchema:
    """A schema checked against its type's rules."""

    schema_type: str
    #: the stored text (``canonicalString``)
    canonical: str
    #: the parsed form compatibility reads: Avro/JSON as JSON values, Protobuf as a ProtoFile
    parsed: Any
    #: Avro's named types visible through references (full name -> definition)
    named: Mapping[str, Any] = attrs.field(factory=dict)


def unknown_type(schema_type: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema type {schema_type}")


def parse_schema(schema_type: str, text: str, references: Sequence[ParsedSchema] = (), *,
                 normalize: bool = False) -> ParsedSchema:
    """Parse ``text`` as ``schema_type``; RegistryError 42201 when it is not a valid schema."""
    if schema_type == "AVRO":
        return _parse_avro(text, references, normalize)
    if schema_type == "JSON":
        return _parse_json_schema(text, normalize)
    if schema_type == "PROTOBUF":
        try:
            proto = protobuf.parse_any(text)
        except protobuf.ProtoError as exc:
            raise invalid_schema(f"{text[:200]}, details: {exc}") from None
        return ParsedSchema("PROTOBUF", protobuf.render(proto) if normalize else text, proto)
    raise unknown_type(schema_type)


#: how deep a schema's JSON may nest: far beyond any real schema, well within the recursion
#: the parsers and the compatibility walks need
MAX_NESTING = 64


def _load_json(text: str) -> Any:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise invalid_schema(f"{text[:200]}, details: not JSON: {exc}") from None
    if _nesting(value) > MAX_NESTING:
        raise invalid_schema(f"{text[:200]}, details: nested deeper than {MAX_NESTING} levels")
    return value


def _nesting(value: Any) -> int:
    """How deep ``value`` nests (without recursion)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in item)
    return deepest


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _parse_avro(text: str, references: Sequence[ParsedSchema], normalize: bool) -> ParsedSchema:
    import fastavro
    from fastavro.schema import SchemaParseException, UnknownType

    from .avro import canonical_form

    value = _load_json(text)
    named: dict[str, Any] = {}
    for ref in references:
        if ref.schema_type != "AVRO":
            raise invalid_schema(f"{text[:200]}, details: an Avro schema references a "
                                 f"{ref.schema_type} schema")
        named.update(ref.named)
    parse_names = dict(named)
    try:
        parsed = fastavro.parse_schema(value, named_schemas=parse_names, _write_hint=False)
    except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError,
            AttributeError, RecursionError) as exc:
        raise invalid_schema(f"{text[:200]}, details: {exc}") from None
    # what this schema defines, for schemas that reference it
    problem = _avro_problem(value, 0)
    if problem:
        raise invalid_schema(f"{text[:200]}, details: {problem}")
    canonical = canonical_form(parsed) if normalize else compact(_avro_order(value))
    return ParsedSchema("AVRO", canonical, parsed, parse_names)


#: the order Avro's ``Schema.toString()`` writes attributes in (a type's, a field's): the same
#: schema written with its keys in another order is the same stored text, hence the same id, as
#: in Confluent's registry
_TYPE_KEYS = ("type", "name", "namespace", "doc", "fields", "symbols", "items", "values", "size",
              "default", "aliases", "logicalType", "precision", "scale")
_FIELD_KEYS = ("name", "type", "doc", "default", "order", "aliases")
_AVRO_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes",
                              "string"})


def _avro_order(value: Any, keys: tuple[str, ...] = _TYPE_KEYS) -> Any:
    if isinstance(value, list):
        return [_avro_order(v) for v in value]
    if not isinstance(value, dict):
        return value
    if keys is _TYPE_KEYS and set(value) == {"type"} and value["type"] in _AVRO_PRIMITIVES:
        return value["type"]  # {"type": "string"} is written "string", as Avro's toString()
    rank = {key: i for i, key in enumerate(keys)}
    out = {}
    for key in sorted(value, key=lambda k: (rank.get(k, len(rank)), k)):
        item = value[key]
        if key == "fields" and isinstance(item, list):
            out[key] = [_avro_order(f, _FIELD_KEYS) for f in item]
        elif key == "default":  # data, not schema: as written
            out[key] = item
        else:
            out[key] = _avro_order(item)
    return out


def _avro_problem(value: Any, depth: int) -> str | None:
    """What Avro's Java parser refuses and fastavro lets through: a record without a fields
    list, a field name used twice."""
    if depth > 200:
        return "nested too deep"
    if isinstance(value, list):
        return next((p for v in value if (p := _avro_problem(v, depth + 1))), None)
    if not isinstance(value, dict):
        return None
    kind = value.get("type")
    if kind in ("record", "error"):
        fields = value.get("fields")
        if not isinstance(fields, list):
            return f"record {value.get('name')!r} has no fields"
        names = [f.get("name") for f in fields if isinstance(f, dict)]
        if len(set(names)) != len(names):
            return f"record {value.get('name')!r} has a field name used twice"
        return next((p for f in fields if isinstance(f, dict)
                     and (p := _avro_problem(f.get("type"), depth + 1))), None)
    if kind == "array":
        return _avro_problem(value.get("items"), depth + 1)
    if kind == "map":
        return _avro_problem(value.get("values"), depth + 1)
    return _avro_problem(kind, depth + 1) if isinstance(kind, (dict, list)) else None


def _parse_json_schema(text: str, normalize: bool) -> ParsedSchema:
    import jsonschema
    from jsonschema.exceptions import SchemaError

    value = _load_json(text)
    if not isinstance(value, (dict, bool)):
        raise invalid_schema(f"{text[:200]}, details: a JSON schema is an object or a boolean")
    try:
        jsonschema.validators.validator_for(value).check_schema(value)
    except SchemaError as exc:
        raise invalid_schema(f"{text[:200]}, details: {exc.message}") from None
    except RecursionError:  # jsonschema recurses several frames per level of a schema
        raise invalid_schema(f"{text[:200]}, details: nested too deep") from None
    canonical = (json.dumps(value, separators=(",", ":"), sort_keys=True) if normalize
                 else compact(value))
    return ParsedSchema("JSON", canonical, value)
