"""Message schemas as data: the project's compact text format, parsed lazily per message.

Why text: one line per field is the shortest faithful record of Kafka's message definitions (field
names, types, versions, nullability, tags, defaults, struct names), easy to review against Kafka's
own and cheap to keep in the package; a message is parsed only when first used, so start-up pays
for none of it. The compiler (``codec``) and the message classes (``structs``) read this model.

Format (``schemas/*.py``): one block per message, separated by blank lines; a header line names the
message (``ProduceRequest``; the API and its versions come from ``versions.KAFKA_VERSIONS``), or
``Name data 0-3`` for a versioned payload outside any API (the consumer protocol's). Then one field
per line, two spaces of indentation per nesting level (``#`` starts a comment line)::

    name type [versions] [null | null=versions] [tag=N [tagged=versions]] [=default]

- ``type``: ``int8 int16 int32 int64 uint16 float64 bool string bytes records uuid``, a struct
  name, or ``[]`` before either for an array. ``bitfield`` is an int32 of authorized-operation
  bits read as the set of bit numbers, ``None`` for Kafka's "not requested" (-2**31), as the
  kafka-python classes this project grew up with expose those four fields. A struct's fields
  follow it, indented one level; a later field of the same struct type in the same message
  reuses it (Kafka's common structs).
- ``versions``: ``3+``, ``0-12`` or ``5``; omitted means every version of the message.
- ``null``: nullable wherever present; ``null=1+``: nullable in those versions only.
- ``tag=N``: a tagged field of the flexible versions; ``tagged=`` only when its tagged versions
  differ from its versions. Tags from ``OWN_TAGS_FROM`` (9000) up are the project's own
  extensions (Kafka defines none there and its clients skip tags they do not know); comparisons
  with Kafka's definitions leave them out.
- ``=default``: Kafka's default where it is not the type's zero value (``=-1``, ``=null``,
  ``=true``). Zero values: 0, false, "", b"", [] and a default struct; uuid ``None`` (all zeros),
  bitfield ``None``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .schemas import configs, groups, metadata, produce, security, share, topics, transactions
from .versions import KAFKA_VERSIONS, ApiKey, VersionRange

__all__ = [
    "PRIMITIVES",
    "Field",
    "MessageSchema",
    "StructSchema",
    "data_schema",
    "message_names",
    "message_schema",
]

#: primitive type -> (fixed size in bytes or None, struct format character or "")
PRIMITIVES: dict[str, tuple[int | None, str]] = {
    "bool": (1, "?"), "int8": (1, "b"), "int16": (2, "h"), "uint16": (2, "H"),
    "int32": (4, "i"), "int64": (8, "q"), "float64": (8, "d"), "uuid": (16, "16s"),
    "bitfield": (4, "I"), "string": (None, ""), "bytes": (None, ""), "records": (None, ""),
}
_FAMILIES = (produce, metadata, groups, topics, configs, security, transactions, share)
_NO_VERSIONS = VersionRange(0, -1)
#: the first tag of the project's own tagged fields (``Field.own``)
OWN_TAGS_FROM = 9000


class Field:
    """One field of a struct: its type and the versions in which it exists, is nullable, is
    tagged. ``struct`` is the element struct of a struct or struct-array field."""

    __slots__ = ("default", "element", "is_array", "name", "nullable_versions", "struct", "tag",
                 "tagged_versions", "type", "versions")

    def __init__(self, name: str, type_: str, versions: VersionRange,
                 nullable_versions: VersionRange, tag: int | None,
                 tagged_versions: VersionRange, default: Any) -> None:
        self.name = name
        self.type = type_
        self.is_array = type_.startswith("[]")
        #: the element type of an array, else the type itself
        self.element = type_[2:] if self.is_array else type_
        self.versions = versions
        self.nullable_versions = nullable_versions
        self.tag = tag
        self.tagged_versions = tagged_versions
        #: the raw default (``None`` for null, an int, a bool, a str); see ``default_value``
        self.default = default
        self.struct: StructSchema | None = None

    def present(self, version: int) -> bool:
        return self.versions.min <= version <= self.versions.max

    def nullable(self, version: int) -> bool:
        return self.nullable_versions.min <= version <= self.nullable_versions.max

    def tagged(self, version: int) -> bool:
        """Whether, in ``version``, the field lives in its struct's tagged-field section."""
        return self.tag is not None and (
            self.tagged_versions.min <= version <= self.tagged_versions.max)

    @property
    def own(self) -> bool:
        """A tagged field of the project's own, not in Kafka's definition of the message."""
        return self.tag is not None and self.tag >= OWN_TAGS_FROM

    @property
    def is_struct(self) -> bool:
        return self.struct is not None

    def default_value(self) -> Any:
        """A fresh default value (new lists and structs each call), Kafka's default."""
        if self.default is None:
            return None
        if self.is_array:
            return []
        if self.struct is not None:
            return None if self.tag is not None else self.struct.cls()
        return _zero(self.element) if self.default == "" else self.default

    def __repr__(self) -> str:
        return f"Field({self.name} {self.type} {self.versions.min}-{self.versions.max})"


def _zero(type_: str) -> Any:
    if type_ == "bool":
        return False
    if type_ == "float64":
        return 0.0
    if type_ == "string":
        return ""
    if type_ in ("bytes", "records"):
        return b""
    if type_ in ("uuid", "bitfield"):
        return None
    return 0


class StructSchema:
    """A struct: its Kafka name and fields in wire order. ``cls`` is its message class, set by
    ``structs`` when the classes are built."""

    __slots__ = ("cls", "fields", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.fields: list[Field] = []
        self.cls: Any = None

    def fields_in(self, version: int) -> Iterator[Field]:
        """The fields present in ``version``, in wire order (tagged ones included)."""
        return (f for f in self.fields if f.present(version))

    def __repr__(self) -> str:
        return f"StructSchema({self.name})"


class MessageSchema:
    """A whole message: a request, a response, or a versioned data payload."""

    __slots__ = ("api_key", "flexible_from", "kind", "name", "root", "structs", "versions")

    def __init__(self, name: str, kind: str, api_key: int | None, versions: VersionRange,
                 flexible_from: int | None) -> None:
        self.name = name
        self.kind = kind  # "request", "response" or "data"
        self.api_key = api_key
        self.versions = versions
        self.flexible_from = flexible_from
        self.root = StructSchema(name)
        #: every struct of the message by name, the root included
        self.structs: dict[str, StructSchema] = {name: self.root}

    def flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from

    def __repr__(self) -> str:
        return f"MessageSchema({self.name} v{self.versions.min}-{self.versions.max})"


# --- the text blocks, indexed lazily ----------------------------------------------------------

_blocks: dict[str, str] = {}
_parsed: dict[str, MessageSchema] = {}
_HEADER = re.compile(r"^(?=[^\s#])", re.M)


def _index() -> dict[str, str]:
    if not _blocks:
        for family in _FAMILIES:
            for block in _HEADER.split(family.SCHEMAS):
                names = [line.split()[0] for line in block.splitlines()
                         if line.strip() and not line.lstrip().startswith("#")]
                if names:
                    _blocks[names[0]] = block
    return _blocks


def message_names() -> list[str]:
    """Every message defined by the schemas (requests, responses and data payloads)."""
    return sorted(_index())


def message_schema(api_key: int, kind: str) -> MessageSchema | None:
    """The schema of ``api_key``'s request or response, or None if no schema defines it."""
    try:
        name = ApiKey(api_key).name
    except ValueError:
        return None
    return load(name + ("Request" if kind == "request" else "Response"))


def data_schema(name: str) -> MessageSchema:
    """A versioned data payload by name (``ConsumerProtocolSubscription``, ...)."""
    schema = load(name)
    if schema is None or schema.kind != "data":
        raise KeyError(name)
    return schema


def load(name: str) -> MessageSchema | None:
    """A message's schema by name, parsed on first use; None if no schema has that name."""
    schema = _parsed.get(name)
    if schema is None:
        text = _index().get(name)
        if text is None:
            return None
        schema = _parsed[name] = _parse(text)
    return schema


def _parse(text: str) -> MessageSchema:
    lines = [line for line in text.splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    head = lines[0].split()
    name = head[0]
    if len(head) == 3 and head[1] == "data":
        lo, hi = _range(head[2], 0)
        schema = MessageSchema(name, "data", None, VersionRange(lo, hi), None)
    else:
        kind = "request" if name.endswith("Request") else "response"
        key = ApiKey[name.removesuffix("Request").removesuffix("Response")]
        table = KAFKA_VERSIONS[key]
        versions = VersionRange(min(table.kafka_3_9.min, table.kafka_4_1.min),
                                max(table.kafka_3_9.max, table.kafka_4_1.max))
        schema = MessageSchema(name, kind, int(key), versions, table.flexible_from)
    stack: list[StructSchema] = [schema.root]
    last: Field | None = None
    for line in lines[1:]:
        depth = (len(line) - len(line.lstrip(" "))) // 2
        if depth > len(stack):
            if last is None or last.struct is None or last.struct.fields or depth != len(
                    stack) + 1:
                raise ValueError(f"{name}: unexpected indentation: {line!r}")
            stack.append(last.struct)
        del stack[depth:]
        last = _field(schema, line.split(), stack[-1])
        stack[-1].fields.append(last)
    return schema


def _field(schema: MessageSchema, tokens: list[str], parent: StructSchema) -> Field:
    name, type_ = tokens[0], tokens[1]
    top = schema.versions.max
    versions = schema.versions
    nullable = _NO_VERSIONS
    tag: int | None = None
    tagged: VersionRange | None = None
    default: Any = ""
    for token in tokens[2:]:
        if token[0].isdigit():
            versions = VersionRange(*_range(token, top))
        elif token == "null":
            nullable = versions
        elif token.startswith("null="):
            nullable = VersionRange(*_range(token[5:], top))
        elif token.startswith("tag="):
            tag = int(token[4:])
        elif token.startswith("tagged="):
            tagged = VersionRange(*_range(token[7:], top))
        elif token.startswith("="):
            default = _default(token[1:])
        else:
            raise ValueError(f"{schema.name}.{parent.name}.{name}: unknown token {token!r}")
    field = Field(name, type_, versions, nullable, tag,
                  tagged if tagged is not None else (versions if tag is not None
                                                     else _NO_VERSIONS), default)
    element = field.element
    if element not in PRIMITIVES:
        struct = schema.structs.get(element)
        if struct is None:
            struct = schema.structs[element] = StructSchema(element)
        field.struct = struct
    return field


def _range(token: str, top: int) -> tuple[int, int]:
    if token.endswith("+"):
        return int(token[:-1]), top
    lo, _, hi = token.partition("-")
    return int(lo), int(hi or lo)


def _default(token: str) -> Any:
    if token == "null":
        return None
    if token in ("true", "false"):
        return token == "true"
    return int(token)
