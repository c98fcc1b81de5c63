"""What the decoder and encoder compilers share: the source under construction, wire sizes.

Why generate source: a message of one version is a fixed walk over its fields, so the compiler
writes that walk out as straight Python (adjacent fixed-size fields read or written by one
``struct`` call, nested structs inlined into their loops, no per-field dispatch) and ``exec``s it
once per (message, version). A message then costs what its fields cost, not a walk of the
schema per field (against a schema-walking codec: docs/benchmarks.md, "Codec"), and every bound
check stays explicit.
"""

from __future__ import annotations

import struct
from typing import Any

from .schema import PRIMITIVES, Field, StructSchema

__all__ = ["SMALL_ARRAY", "Source", "min_size"]

#: arrays of fixed-size numbers shorter than this are read and written by one precompiled struct
SMALL_ARRAY = 32
_arrays: dict[tuple[str, str], tuple[Any, ...]] = {}


class Source:
    """Python source being generated, with the constants its code refers to."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {}
        self._count = 0

    def var(self, prefix: str) -> str:
        """A fresh local variable name."""
        self._count += 1
        return f"{prefix}{self._count}"

    def const(self, key: str, value: Any) -> str:
        """The global name under which ``value`` is visible to the code (one per key)."""
        name = "_" + "".join(c if c.isalnum() else "_" for c in key)
        if name in self.consts:
            if self.consts[name] is not value and key.startswith("cls:"):
                raise ValueError(f"two values for {key}")
        else:
            self.consts[name] = value
        return name

    def array_const(self, kind: str, fmt: str) -> str:
        """A tuple of ``struct.Struct('>' + n * fmt)``'s ``unpack_from`` or ``pack`` for the
        array sizes 0 .. SMALL_ARRAY - 1: one call reads or writes a whole small array."""
        methods = _arrays.get((kind, fmt))
        if methods is None:
            compiled = [struct.Struct(">" + fmt * n) for n in range(SMALL_ARRAY)]
            methods = _arrays[kind, fmt] = tuple(
                c.unpack_from if kind == "unpack" else c.pack for c in compiled)
        return self.const(f"{kind}s:{fmt}", methods)

    def struct_const(self, kind: str, fmt: str) -> str:
        """``struct.Struct('>' + fmt)``'s ``unpack_from``, ``pack`` or ``iter_unpack``."""
        compiled = struct.Struct(">" + fmt)
        method = {"unpack": compiled.unpack_from, "pack": compiled.pack,
                  "iter": compiled.iter_unpack}[kind]
        return self.const(f"{kind}:{fmt}", method)

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def fixed_size(field: Field) -> int | None:
    """The wire size of a fixed-size primitive field, else None."""
    if field.is_array or field.struct is not None:
        return None
    return PRIMITIVES[field.element][0]


def min_size(struct_schema: StructSchema, version: int, flexible: bool) -> int:
    """The fewest bytes a struct of this version can take (bounds array counts on decode)."""
    size = 1 if flexible else 0  # the tagged-field section
    for field in struct_schema.fields_in(version):
        if field.tagged(version):
            continue
        size += _field_min_size(field, version, flexible)
    return size


def _field_min_size(field: Field, version: int, flexible: bool) -> int:
    if field.is_array:
        return 1 if flexible else 4
    if field.struct is not None:
        if field.nullable(version):
            return 1
        return min_size(field.struct, version, flexible)
    fixed = PRIMITIVES[field.element][0]
    if fixed is not None:
        return fixed
    if flexible:
        return 1
    return 2 if field.element == "string" else 4


def element_min_size(field: Field, version: int, flexible: bool) -> int:
    """The fewest bytes one element of an array field takes."""
    if field.struct is not None:
        return min_size(field.struct, version, flexible)
    fixed = PRIMITIVES[field.element][0]
    if fixed is not None:
        return fixed
    if flexible:
        return 1
    return 2 if field.element == "string" else 4
