"""A stored Protobuf schema as a ``FileDescriptorProto``, to build message classes from.

A schema is stored either as the base64 of a serialized ``FileDescriptorProto`` (what
confluent-kafka's ``ProtobufSerializer`` registers) or as .proto text. The ``protobuf`` package
builds classes from descriptors only and has no parser of .proto text; the registry has one
(``protobuf.py``: messages, nested messages, enums, fields with labels and maps), and this
turns what it read into a descriptor. Used by the REST proxy's serializer and the Spark stage,
with the message indexes Confluent's wire format puts before a Protobuf payload (which message
of the file: a zig-zag varint count, then the indexes; the first message is the single byte 0).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from .protobuf import ProtoError, parse

_SCALARS = {"double": 1, "float": 2, "int64": 3, "uint64": 4, "int32": 5, "fixed64": 6,
            "fixed32": 7, "bool": 8, "string": 9, "bytes": 12, "uint32": 13, "sfixed32": 15,
            "sfixed64": 16, "sint32": 17, "sint64": 18}
_LABELS = {"": 1, "optional": 1, "required": 2, "repeated": 3}


def file_descriptor(text: str, name: str) -> Any:
    """The ``FileDescriptorProto`` of a stored schema named ``name`` (the file name its
    importers use); ProtoError when it is neither form."""
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    text = text.strip()
    if ";" not in text:
        try:
            fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text))
        except (binascii.Error, DecodeError, ValueError):
            pass
        else:
            if not fdp.name:
                fdp.name = name
            return fdp
    return proto_text_descriptor(text, name)


def proto_text_descriptor(text: str, name: str) -> Any:
    """.proto text as a ``FileDescriptorProto``; ProtoError when it cannot be read."""
    from google.protobuf import descriptor_pb2

    proto = parse(text)
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


def read_indexes(payload: memoryview) -> tuple[list[int], int]:
    """Protobuf's message indexes at the start of ``payload``: (indexes, bytes read)."""
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            if pos >= len(payload) or shift > 63:
                raise ValueError("truncated protobuf message indexes")
            byte = payload[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7

    count = varint()
    if count == 0:
        return [0], pos
    if count < 0 or count > 64:
        raise ValueError(f"{count} protobuf message indexes")
    return [varint() for _ in range(count)], pos


def write_indexes(indexes: list[int]) -> bytes:
    if indexes == [0]:
        return b"\x00"
    out = bytearray()
    for value in (len(indexes), *indexes):
        zigzag = (value << 1) ^ (value >> 63)
        while zigzag >= 0x80:
            out.append((zigzag & 0x7F) | 0x80)
            zigzag >>= 7
        out.append(zigzag)
    return bytes(out)


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


__all__ = ["ProtoError", "file_descriptor", "proto_text_descriptor", "read_indexes",
           "write_indexes"]
