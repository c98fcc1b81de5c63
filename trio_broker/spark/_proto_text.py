"""A Protobuf schema stored as .proto text, as a ``FileDescriptorProto`` to build classes from.

Why: the ``protobuf`` package builds message classes from descriptors only and has no parser of
.proto text; the broker's Schema Registry has one (``broker.schema_registry.protobuf``), which
reads messages, nested messages, enums, fields with labels and maps. This turns what it read
into a descriptor. Imported only for a schema stored as text (confluent-kafka's serializer and
this sink register serialized descriptors), since importing the registry's package costs a
worker a few hundred milliseconds.
"""

from __future__ import annotations

from typing import Any

from ..client.core.errors import ConfigError

_SCALARS = {"double": 1, "float": 2, "int64": 3, "uint64": 4, "int32": 5, "fixed64": 6,
            "fixed32": 7, "bool": 8, "string": 9, "bytes": 12, "uint32": 13, "sfixed32": 15,
            "sfixed64": 16, "sint32": 17, "sint64": 18}
_LABELS = {"": 1, "optional": 1, "required": 2, "repeated": 3}


def proto_text_descriptor(text: str, name: str) -> Any:
    from google.protobuf import descriptor_pb2

    from ..broker.schema_registry.protobuf import ProtoError, parse

    try:
        proto = parse(text)
    except ProtoError as exc:
        raise ConfigError(f"Protobuf schema {name} cannot be read: {exc}") from None
    file = descriptor_pb2.FileDescriptorProto(name=name, syntax=proto.syntax,
                                              package=proto.package)
    file.dependency.extend(proto.imports)
    prefix = f"{proto.package}." if proto.package else ""
    built: dict[str, Any] = {}
    enums: dict[str, Any] = {}
    for full in sorted(proto.messages, key=lambda n: n.count(".")):
        parent = full.rpartition(".")[0]
        container = built[parent].nested_type if parent in built else file.message_type
        built[full] = container.add(name=full.rpartition(".")[2])
    for full, symbols in proto.enums.items():
        parent = full.rpartition(".")[0]
        container = built[parent].enum_type if parent in built else file.enum_type
        enum = container.add(name=full.rpartition(".")[2])
        for symbol, number in symbols.items():
            enum.value.add(name=symbol, number=number)
        enums[full] = enum
    for full, message in proto.messages.items():
        out = built[full]
        for number, f in sorted(message.fields.items()):
            field = out.field.add(name=f.name, number=number, label=_LABELS[f.label])
            kind = f.type
            if kind.startswith("map<"):
                key, _, value = kind[4:-1].partition(",")
                entry = out.nested_type.add(name="".join(
                    p[:1].upper() + p[1:] for p in f.name.split("_")) + "Entry")
                entry.options.map_entry = True
                for n, (part, part_kind) in enumerate((("key", key), ("value", value)), 1):
                    _set_type(entry.field.add(name=part, number=n, label=1), part_kind, built,
                              enums, prefix)
                field.type = 11
                field.type_name = f".{full}.{entry.name}"
            else:
                _set_type(field, kind, built, enums, prefix)
    return file


def _set_type(field: Any, kind: str, built: dict[str, Any], enums: dict[str, Any],
              prefix: str) -> None:
    if kind in _SCALARS:
        field.type = _SCALARS[kind]
    elif kind in enums or f"{prefix}{kind}" in enums:
        field.type = 14
        field.type_name = f".{kind if kind in enums else prefix + kind}"
    else:  # a message here, or in an imported file (named as written there)
        field.type = 11
        field.type_name = f".{kind}" if kind in built or "." in kind else f".{prefix}{kind}"


__all__ = ["proto_text_descriptor"]
