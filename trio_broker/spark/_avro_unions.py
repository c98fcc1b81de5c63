"""Avro unions of several non-null types as Spark's ``member0``, ``member1``, ... structs.

Why: Spark's ``from_avro`` maps a union such as ``["null", "int", "string", "Order"]`` to
``struct<member0: int, member1: string, member2: struct<...>>`` with only the member of the
value's branch set, and jobs moved from ``from_avro`` expect that shape. fastavro returns the
value itself, so which branch it came from is worked out here: named types (records, enums,
fixed) come back with their name (fastavro's ``return_named_type``), other branches are told
apart by the value's Python type, the first fitting branch winning as in Avro's own writers.

``union_shaper`` builds, once per schema, the function that reshapes a decoded value; it is
None for a schema without such a union, which then decodes as before.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable
from typing import Any

Shaper = Callable[[Any], Any]

_PRIMITIVE_TYPES: dict[str, tuple[type, ...]] = {
    "boolean": (bool,), "int": (int,), "long": (int,), "float": (float,), "double": (float,),
    "string": (str,), "bytes": (bytes,),
}
_LOGICAL_TYPES: dict[str, tuple[type, ...]] = {
    "date": (datetime.date,), "timestamp-millis": (datetime.datetime,),
    "timestamp-micros": (datetime.datetime,), "local-timestamp-millis": (datetime.datetime,),
    "local-timestamp-micros": (datetime.datetime,), "decimal": (decimal.Decimal,),
}


def is_multi_union(branches: list[Any]) -> bool:
    """Whether a union maps to a member struct (not a nullable type or a numeric pair)."""
    others = [b for b in branches if b != "null"]
    return len(others) > 1 and set(map(str, others)) not in ({"int", "long"},
                                                             {"float", "double"})


def _full_name(schema: dict[str, Any], namespace: str) -> tuple[str, str]:
    """(full name, namespace for what it contains) of a named type's definition."""
    name = str(schema["name"])
    if "." in name:
        return name, name.rpartition(".")[0]
    space = str(schema.get("namespace", namespace))
    return (f"{space}.{name}" if space else name), space


def union_shaper(schema: Any, namespace: str = "",
                 named: dict[str, Any] | None = None) -> Shaper | None:
    """The function reshaping a value decoded with ``return_named_type`` from ``schema`` (the
    JSON of an Avro schema), or None when no multi-type union is in it."""
    named = {} if named is None else named
    if not _has_multi_union(schema, namespace, named, set()):
        return None
    return _shaper(schema, namespace, named)


def _has_multi_union(schema: Any, namespace: str, named: dict[str, Any], seen: set[str]) -> bool:
    if isinstance(schema, list):
        return is_multi_union(schema) or any(
            _has_multi_union(b, namespace, named, seen) for b in schema)
    if isinstance(schema, str):
        full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
        target = named.get(full, named.get(schema))
        if target is None or full in seen:
            return False
        seen.add(full)
        return _has_multi_union(target[0], target[1], named, seen)
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if kind in ("record", "error", "enum", "fixed"):
        full, space = _full_name(schema, namespace)
        named[full] = (schema, namespace)
        seen.add(full)
        return kind in ("record", "error") and any(
            _has_multi_union(f["type"], space, named, seen) for f in schema["fields"])
    if kind == "array":
        return _has_multi_union(schema["items"], namespace, named, seen)
    if kind == "map":
        return _has_multi_union(schema["values"], namespace, named, seen)
    return isinstance(kind, (dict, list)) and _has_multi_union(kind, namespace, named, seen)


def _shaper(schema: Any, namespace: str, named: dict[str, Any]) -> Shaper:
    if isinstance(schema, list):
        return _union(schema, namespace, named)
    if isinstance(schema, str):
        full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
        target = named.get(full, named.get(schema))
        return _identity if target is None else _shaper(target[0], target[1], named)
    if not isinstance(schema, dict):
        return _identity
    kind = schema.get("type")
    if kind in ("record", "error"):
        _, space = _full_name(schema, namespace)
        fields = [(str(f["name"]), _shaper(f["type"], space, named)) for f in schema["fields"]]
        fields = [(name, shape) for name, shape in fields if shape is not _identity]

        def record(value: Any) -> Any:
            if value is None:
                return None
            out = dict(value)
            for name, shape in fields:
                out[name] = shape(out.get(name))
            return out
        return record if fields else _identity
    if kind == "array":
        item = _shaper(schema["items"], namespace, named)
        return _identity if item is _identity else (
            lambda value: None if value is None else [item(v) for v in value])
    if kind == "map":
        entry = _shaper(schema["values"], namespace, named)
        return _identity if entry is _identity else (
            lambda value: None if value is None else {k: entry(v) for k, v in value.items()})
    if isinstance(kind, (dict, list)):
        return _shaper(kind, namespace, named)
    return _identity


def _identity(value: Any) -> Any:
    return value


def _union(branches: list[Any], namespace: str, named: dict[str, Any]) -> Shaper:
    others = [b for b in branches if b != "null"]
    shapes = [_shaper(b, namespace, named) for b in others]
    if not is_multi_union(branches):
        inner = shapes[0] if len(shapes) == 1 else _identity

        def single(value: Any) -> Any:
            if isinstance(value, tuple):  # a named type's (name, value)
                value = value[1]
            return inner(value)
        return single
    names = [_branch_name(b, namespace) for b in others]
    fits = [_python_types(b, namespace, named) for b in others]
    members = [f"member{i}" for i in range(len(others))]

    def multi(value: Any) -> Any:
        if value is None:
            return None
        out: dict[str, Any] = dict.fromkeys(members)
        if isinstance(value, tuple):
            index = names.index(value[0]) if value[0] in names else -1
            value = value[1]
        else:
            index = next((i for i, kinds in enumerate(fits) if kinds and isinstance(value, kinds)
                          and not (isinstance(value, bool) and bool not in kinds)), -1)
        if index >= 0:
            out[members[index]] = shapes[index](value)
        return out
    return multi


def _branch_name(branch: Any, namespace: str) -> str | None:
    if isinstance(branch, dict) and branch.get("type") in ("record", "error", "enum", "fixed"):
        return _full_name(branch, namespace)[0]
    if isinstance(branch, str) and branch not in _PRIMITIVE_TYPES:
        return branch if "." in branch or not namespace else f"{namespace}.{branch}"
    return None


def _python_types(branch: Any, namespace: str, named: dict[str, Any]) -> tuple[type, ...]:
    """The Python types a value of an unnamed branch decodes to (empty: named, found by name)."""
    if isinstance(branch, str):
        return _PRIMITIVE_TYPES.get(branch, ())
    if not isinstance(branch, dict):
        return ()
    logical = branch.get("logicalType")
    if logical in _LOGICAL_TYPES:
        return _LOGICAL_TYPES[logical]
    kind = branch.get("type")
    if kind == "array":
        return (list,)
    if kind == "map":
        return (dict,)
    return _PRIMITIVE_TYPES.get(kind, ()) if isinstance(kind, str) else ()


__all__ = ["Shaper", "is_multi_union", "union_shaper"]
