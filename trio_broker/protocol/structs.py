"""Message classes built from the schemas: one class per struct, every field of every version.

Why generated classes: a handler builds and reads messages field by field, so each struct is a
``__slots__`` class with an ``__init__`` carrying Kafka's defaults (one ``exec`` per
message, on first use), which is as cheap as Python objects get. A class is the same for every
version: fields outside the version being read hold their defaults, fields outside the version
being written are not written. Nested struct classes are attributes of their parents under
Kafka's struct names (``ProduceResponse.TopicProduceResponse.PartitionProduceResponse``); the
typed view of all of them is the generated stub ``message_types.pyi``.
"""

from __future__ import annotations

import keyword
from typing import Any, ClassVar

from .schema import Field, MessageSchema, StructSchema, data_schema, load, message_schema

__all__ = ["Message", "Struct", "class_by_name", "class_for", "data_class", "message_class"]


class Struct:
    """Base of every generated struct class: keyword construction, equality, repr."""

    __slots__ = ()
    #: the field names, in wire order
    _fields: ClassVar[tuple[str, ...]] = ()
    _schema: ClassVar[StructSchema]

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._fields)

    __hash__ = None  # type: ignore[assignment]  # mutable, like a dataclass with eq

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._fields)
        return f"{type(self).__name__}({inner})"


class Message(Struct):
    """Base of every request, response and data-payload class."""

    __slots__ = ()
    #: the API key, or None for a data payload
    API_KEY: ClassVar[int | None] = None
    _message: ClassVar[MessageSchema]

    def __class_getitem__(cls, version: int) -> type[Message]:
        """``cls[version]`` is ``cls``: one class serves every version (kept for callers that
        pick a versioned class, as kafka-python's API has it)."""
        return cls


_built: dict[str, type[Message]] = {}


def message_class(api_key: int, kind: str) -> type[Message] | None:
    """The request or response class of ``api_key``, or None if no schema defines it."""
    schema = message_schema(api_key, kind)
    return None if schema is None else class_for(schema)


def data_class(name: str) -> type[Message]:
    """The class of a versioned data payload (``ConsumerProtocolSubscription``, ...)."""
    return class_for(data_schema(name))


def class_by_name(name: str) -> type[Message]:
    """A message class by Kafka's name (``ProduceRequest``, ``ConsumerProtocolAssignment``)."""
    schema = load(name)
    if schema is None:
        raise AttributeError(f"no message schema named {name!r}")
    return class_for(schema)


def class_for(schema: MessageSchema) -> type[Message]:
    """The class of ``schema``'s root struct, building the message's classes on first use."""
    cls = _built.get(schema.name)
    if cls is None:
        cls = _built[schema.name] = _build(schema)
    return cls


_NOTHING: Any = type("_Nothing", (), {"__repr__": lambda self: "<default>"})()


def _build(schema: MessageSchema) -> type[Message]:
    namespace: dict[str, Any] = {"_Struct": Struct, "_Message": Message, "_N": _NOTHING}
    source: list[str] = []
    for struct in schema.structs.values():
        base = "_Message" if struct is schema.root else "_Struct"
        source += _class_source(struct, base)
    exec(compile("\n".join(source), f"<{schema.name} classes>", "exec"), namespace)
    for struct in schema.structs.values():
        cls = namespace[f"_c_{struct.name}"]
        cls._schema = struct
        struct.cls = cls
        for field in struct.fields:
            if field.struct is not None:
                setattr(cls, field.struct.name, namespace[f"_c_{field.struct.name}"])
    root: type[Message] = schema.root.cls
    root.API_KEY = schema.api_key
    root._message = schema
    return root


def _class_source(struct: StructSchema, base: str) -> list[str]:
    names = [f.name for f in struct.fields]
    for name in names:
        if keyword.iskeyword(name) or name.startswith("_"):
            raise ValueError(f"{struct.name}.{name} is not a usable attribute name")
    lines = [f"class {struct.name}({base}):",
             f"    __slots__ = {tuple(names)!r}",
             f"    _fields = {tuple(names)!r}"]
    if names:
        params = ", ".join(f"{f.name}={_param_default(f)}" for f in struct.fields)
        # fields by keyword, or by position in wire order (``_fields``), which a hot path that
        # builds one per request uses: a call by keywords costs more than the assignments
        lines.append(f"    def __init__(self, {params}):")
        lines += [f"        self.{f.name} = {_assign(f)}" for f in struct.fields]
    lines.append(f"_c_{struct.name} = {struct.name}")
    return lines


def _param_default(field: Field) -> str:
    value = field.default
    if value is None:
        return "None"
    if field.is_array or (field.struct is not None and field.tag is None):
        return "_N"  # a fresh list or struct per instance
    if field.struct is not None:
        return "None"  # a tagged struct is absent by default
    return repr(field.default_value())


def _assign(field: Field) -> str:
    if _param_default(field) != "_N":
        return field.name
    fresh = "[]" if field.is_array else f"_c_{field.element}()"
    return f"{fresh} if {field.name} is _N else {field.name}"
