"""Compatibility levels over the three schema types: who must read whom, against which versions.

BACKWARD: the new schema reads data written with the latest one; FORWARD: the latest reads the
new one's; FULL: both. The ``_TRANSITIVE`` levels check every live version instead of the
latest, NONE checks nothing (Confluent's ``CompatibilityLevel``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import avro, protobuf
from .schemas import ParsedSchema

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
          "FULL_TRANSITIVE")


def _can_read(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    if reader.schema_type != writer.schema_type:
        return [f"{{errorType:'TYPE_MISMATCH', description:'The schema type changed from "
                f"{writer.schema_type} to {reader.schema_type}'}}"]
    if reader.schema_type == "AVRO":
        return avro.can_read(reader.parsed, reader.named, writer.parsed, writer.named)
    if reader.schema_type == "PROTOBUF":
        return protobuf.incompatibilities(reader.parsed, writer.parsed)
    return _json_can_read(reader.parsed, writer.parsed, "#")


def check(level: str, new: ParsedSchema, previous: Sequence[ParsedSchema]) -> list[str]:
    """Why ``new`` breaks ``level`` against ``previous`` (oldest first; empty: it does not)."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    errors: list[str] = []
    for old in reversed(against):
        if level.startswith(("BACKWARD", "FULL")):
            errors += _can_read(new, old)
        if level.startswith(("FORWARD", "FULL")):
            errors += _can_read(old, new)
        if errors:
            break
    return errors


# --- JSON Schema: Confluent's rules, in part ---------------------------------------------------

def _types(schema: Any) -> set[str] | None:
    if not isinstance(schema, dict) or "type" not in schema:
        return None
    kind = schema["type"]
    return set(kind) if isinstance(kind, list) else {kind}


def _open(schema: dict[str, Any]) -> bool:
    return schema.get("additionalProperties", True) is not False


def _json_can_read(reader: Any, writer: Any, path: str) -> list[str]:
    """Can data valid under ``writer`` be valid under ``reader``? (types, properties, required,
    items and enums; the other keywords are not compared)"""
    if reader is True or reader == {}:
        return []
    if writer is True or writer == {}:
        return [f"{{errorType:'TYPE_NARROWED', description:'{path} accepted anything'}}"]
    if not isinstance(reader, dict) or not isinstance(writer, dict):
        return []
    errors = []
    r_types, w_types = _types(reader), _types(writer)
    if r_types is not None and w_types is not None:
        widened = r_types | ({"integer"} if "number" in r_types else set())
        if not w_types <= widened:
            errors.append(f"{{errorType:'TYPE_CHANGED', description:'The type at {path} changed "
                          f"from {sorted(w_types)} to {sorted(r_types)}'}}")
            return errors
    if "enum" in reader:
        lost = [v for v in writer.get("enum", [None]) if v not in reader["enum"]]
        if lost or "enum" not in writer:
            errors.append(f"{{errorType:'ENUM_ARRAY_NARROWED', description:'The enum at {path} "
                          f"lost values'}}")
    r_props, w_props = reader.get("properties", {}), writer.get("properties", {})
    for name, sub in w_props.items():
        if name in r_props:
            errors += _json_can_read(r_props[name], sub, f"{path}/properties/{name}")
        elif not _open(reader):
            errors.append(f"{{errorType:'PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL', "
                          f"description:'{path}/properties/{name} was removed'}}")
    for name in r_props:
        if name not in w_props and _open(writer):
            errors.append(f"{{errorType:'PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL', "
                          f"description:'{path}/properties/{name} was added'}}")
    for name in set(reader.get("required", [])) - set(writer.get("required", [])):
        errors.append(f"{{errorType:'REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL', "
                      f"description:'{path}/properties/{name} became required'}}")
    if isinstance(reader.get("items"), dict) and isinstance(writer.get("items"), dict):
        errors += _json_can_read(reader["items"], writer["items"], f"{path}/items")
    return errors
