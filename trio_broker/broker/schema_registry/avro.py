"""Avro schema resolution as a compatibility check: can a reader schema read a writer's data?

Why our own walk instead of a library's: fastavro parses and resolves at read time but has no
"can this reader read that writer" check, and Confluent's answers are Avro's Java
``SchemaCompatibility`` rules, which are few and are the spec's resolution rules: same names
(or an alias), reader fields missing in the writer need a default, the promotions int -> long
-> float -> double and string <-> bytes, every writer union branch readable, writer enum
symbols known to the reader unless it has a default, equal fixed sizes. The walk runs on
fastavro's parsed form (full names resolved; a named type used again is its full name).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastavro.schema import to_parsing_canonical_form

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
#: writer type -> reader types that read it (Avro's promotions)
PROMOTIONS = {"int": {"int", "long", "float", "double"}, "long": {"long", "float", "double"},
              "float": {"float", "double"}, "string": {"string", "bytes"},
              "bytes": {"bytes", "string"}}


def canonical_form(parsed: Any) -> str:
    """Avro's Parsing Canonical Form (``?normalize=true``)."""
    return str(to_parsing_canonical_form(parsed))


class _Checker:
    def __init__(self, reader_named: Mapping[str, Any], writer_named: Mapping[str, Any]) -> None:
        self.reader_named = reader_named
        self.writer_named = writer_named
        self.errors: list[str] = []
        self._assumed: set[tuple[str, str]] = set()

    def _resolve(self, schema: Any, named: Mapping[str, Any]) -> Any:
        if isinstance(schema, str) and schema not in PRIMITIVES:
            return named.get(schema, schema)
        return schema

    def _error(self, kind: str, path: str, description: str) -> None:
        self.errors.append(f"{{errorType:'{kind}', description:'{description}', "
                           f"additionalInfo:'{path}'}}")

    def check(self, reader: Any, writer: Any, path: str) -> None:
        reader = self._resolve(reader, self.reader_named)
        writer = self._resolve(writer, self.writer_named)
        if isinstance(writer, list):
            for i, branch in enumerate(writer):
                self.check(reader, branch, f"{path}/{i}")
            return
        if isinstance(reader, list):
            for branch in reader:
                probe = _Checker(self.reader_named, self.writer_named)
                probe._assumed = self._assumed
                probe.check(branch, writer, path)
                if not probe.errors:
                    return
            self._error("MISSING_UNION_BRANCH", path, f"The new schema is missing a type "
                        f"inside a union field at path '{path}' in the old schema: "
                        f"{_type_of(writer)}")
            return
        r_type, w_type = _type_of(reader), _type_of(writer)
        if w_type in PRIMITIVES or r_type in PRIMITIVES:
            if r_type not in PROMOTIONS.get(w_type, {w_type}):
                self._error("TYPE_MISMATCH", path, f"The type (path '{path}') of a field in the "
                            f"new schema does not match with the old schema: reader type "
                            f"{r_type} not compatible with writer type {w_type}")
            return
        if r_type != w_type:
            self._error("TYPE_MISMATCH", path, f"The type (path '{path}') of a field in the new "
                        f"schema does not match with the old schema: reader type {r_type} not "
                        f"compatible with writer type {w_type}")
            return
        if r_type in ("record", "enum", "fixed") and not _names_match(reader, writer):
            self._error("NAME_MISMATCH", f"{path}/name", f"The name of the schema has changed "
                        f"(path '{path}/name'): expected {writer['name']}, found "
                        f"{reader['name']}")
            return
        if r_type == "array":
            self.check(reader["items"], writer["items"], f"{path}/items")
        elif r_type == "map":
            self.check(reader["values"], writer["values"], f"{path}/values")
        elif r_type == "fixed":
            if reader.get("size") != writer.get("size"):
                self._error("FIXED_SIZE_MISMATCH", f"{path}/size", f"The size of FIXED type "
                            f"field at path '{path}/size' in the new schema does not match with "
                            f"the old schema: expected {writer.get('size')}, found "
                            f"{reader.get('size')}")
        elif r_type == "enum":
            missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
            if missing and reader.get("default") is None:
                self._error("MISSING_ENUM_SYMBOLS", f"{path}/symbols", f"The new schema is "
                            f"missing enum symbols '{missing}' at path '{path}/symbols' in the "
                            f"old schema")
        elif r_type == "record":
            self._check_record(reader, writer, path)

    def _check_record(self, reader: Any, writer: Any, path: str) -> None:
        key = (reader["name"], writer["name"])
        if key in self._assumed:  # a recursive type: assumed compatible while it is checked
            return
        self._assumed.add(key)
        by_name = {f["name"]: f for f in writer["fields"]}
        for i, field in enumerate(reader["fields"]):
            names = [field["name"], *field.get("aliases", ())]
            match = next((by_name[n] for n in names if n in by_name), None)
            here = f"{path}/fields/{i}"
            if match is None:
                if "default" not in field:
                    self._error("READER_FIELD_MISSING_DEFAULT_VALUE", field["name"],
                                f"The field '{field['name']}' at path '{here}' in the new "
                                f"schema has no default value and is missing in the old schema")
                continue
            self.check(field["type"], match["type"], f"{here}/type")


def _type_of(schema: Any) -> str:
    if isinstance(schema, dict):
        return str(schema["type"]) if not isinstance(schema["type"], (dict, list)) else (
            _type_of(schema["type"]))
    if isinstance(schema, list):
        return "union"
    return str(schema)


def _names_match(reader: Any, writer: Any) -> bool:
    w_name = writer["name"]
    if reader["name"] == w_name:
        return True
    namespace = reader["name"].rpartition(".")[0]
    for alias in reader.get("aliases", ()):
        full = alias if "." in alias or not namespace else f"{namespace}.{alias}"
        if w_name in (alias, full):
            return True
    # Java compares unqualified names for records met through their fields
    return bool(reader["name"].rpartition(".")[2] == w_name.rpartition(".")[2])


def can_read(reader: Any, reader_named: Mapping[str, Any], writer: Any,
             writer_named: Mapping[str, Any]) -> list[str]:
    """Why ``reader`` cannot read data written with ``writer`` (empty: it can)."""
    checker = _Checker(reader_named, writer_named)
    checker.check(reader, writer, "")
    return checker.errors
