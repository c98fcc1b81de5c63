"""A subset parser of .proto text (proto2 and proto3), enough to check and compare schemas.

Why our own: the ``protobuf`` package has no parser of .proto text (only of descriptors), and
confluent-kafka's ProtobufSerializer registers the .proto text of the message's file, with each
import as a reference. This parser reads what such files hold: ``syntax``, ``package``,
``import``, ``option``, messages (nested), enums, fields with labels, ``map<K, V>``, ``oneof``,
``reserved``, ``extensions``, ``extend`` and ``service`` blocks (skipped). It tokenizes with
one regular expression and never recurses deeper than the text's nesting, which the caller
bounds by the body size.
"""

from __future__ import annotations

import re

import attrs

_TOKEN = re.compile(r'\s+|//[^\n]*|/\*.*?\*/|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\''
                    r'|[A-Za-z_][\w.]*|\.[A-Za-z_][\w.]*|-?\d[\w.+-]*|[{}()\[\];=<>,:\-+]', re.S)
MAX_DEPTH = 64


class ProtoError(ValueError):
    pass


@attrs.frozen
class Field:
    name: str
    number: int
    type: str
    label: str


@attrs.define
class Message:
    name: str
    fields: dict[int, Field] = attrs.field(factory=dict)


@attrs.define
class ProtoFile:
    syntax: str = "proto2"
    package: str = ""
    imports: list[str] = attrs.field(factory=list)
    #: full name -> message
    messages: dict[str, Message] = attrs.field(factory=dict)
    #: full name -> symbols
    enums: dict[str, dict[str, int]] = attrs.field(factory=dict)


def _tokens(text: str) -> list[str]:
    out = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ProtoError(f"unexpected character {text[pos]!r} at offset {pos}")
        tok = m.group()
        pos = m.end()
        if not tok.isspace() and not tok.startswith(("//", "/*")):
            out.append(tok)
    return out


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.toks = tokens
        self.i = 0
        self.file = ProtoFile()

    def peek(self) -> str:
        if self.i >= len(self.toks):
            raise ProtoError("unexpected end of the schema")
        return self.toks[self.i]

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if expected is not None and tok != expected:
            raise ProtoError(f"expected {expected!r}, found {tok!r}")
        self.i += 1
        return tok

    def skip_statement(self) -> None:
        depth = 0
        while True:
            tok = self.take()
            if tok in "{[(":
                depth += 1
            elif tok in "}])":
                depth -= 1
                if depth == 0 and tok == "}":
                    return
            elif tok == ";" and depth == 0:
                return

    def parse(self) -> ProtoFile:
        while self.i < len(self.toks):
            tok = self.take()
            if tok == "syntax" or tok == "edition":
                self.take("=")
                self.file.syntax = self.take().strip("\"'")
                self.take(";")
            elif tok == "package":
                self.file.package = self.take()
                self.take(";")
            elif tok == "import":
                name = self.take()
                if name in ("public", "weak"):
                    name = self.take()
                self.file.imports.append(name.strip("\"'"))
                self.take(";")
            elif tok == "message":
                self.message(self.file.package, 1)
            elif tok == "enum":
                self.enum(self.file.package)
            elif tok in ("option", "service", "extend"):
                self.skip_statement()
            elif tok == ";":
                continue
            else:
                raise ProtoError(f"unexpected {tok!r} at the top level")
        return self.file

    def _name(self, scope: str) -> tuple[str, str]:
        name = self.take()
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise ProtoError(f"invalid name {name!r}")
        return name, f"{scope}.{name}" if scope else name

    def enum(self, scope: str) -> None:
        _, full = self._name(scope)
        self.take("{")
        symbols: dict[str, int] = {}
        while (tok := self.take()) != "}":
            if tok in ("option", "reserved"):
                self.skip_statement()
            elif tok != ";":
                self.take("=")
                symbols[tok] = _int(self.take())
                if self.peek() == "[":
                    self.skip_statement()
                else:
                    self.take(";")
        self.file.enums[full] = symbols

    def message(self, scope: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise ProtoError("messages nested too deep")
        _, full = self._name(scope)
        msg = Message(full)
        self.file.messages[full] = msg
        self.take("{")
        self.body(msg, full, depth)

    def body(self, msg: Message, full: str, depth: int) -> None:
        while (tok := self.take()) != "}":
            if tok == "message":
                self.message(full, depth + 1)
            elif tok == "enum":
                self.enum(full)
            elif tok == "oneof":
                self._name(full)
                self.take("{")
                self.body(msg, full, depth)
            elif tok in ("option", "reserved", "extensions", "extend"):
                self.skip_statement()
            elif tok == ";":
                continue
            else:
                self.field(msg, tok)

    def field(self, msg: Message, tok: str) -> None:
        label = ""
        if tok in ("optional", "required", "repeated"):
            label, tok = tok, self.take()
        if tok == "map":
            self.take("<")
            key = self.take()
            self.take(",")
            value = self.take()
            self.take(">")
            tok, label = f"map<{key},{value}>", "repeated"
        elif tok == "group":
            raise ProtoError("proto2 groups are not supported")
        name = self.take()
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise ProtoError(f"invalid field name {name!r}")
        self.take("=")
        number = _int(self.take())
        if not 1 <= number <= 536870911:
            raise ProtoError(f"field number {number} of {name!r} is out of range")
        if number in msg.fields:
            raise ProtoError(f"field number {number} is used twice in {msg.name}")
        msg.fields[number] = Field(name, number, tok, label)
        if self.peek() == "[":
            self.skip_statement()
        else:
            self.take(";")


def _int(tok: str) -> int:
    try:
        return int(tok, 0)
    except ValueError:
        raise ProtoError(f"expected a number, found {tok!r}") from None


SCALARS = {"double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
           "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes"}


def parse(text: str) -> ProtoFile:
    """Parse .proto text; ProtoError names the first problem."""
    return _resolve_types(_Parser(_tokens(text)).parse())


def _resolve_types(proto: ProtoFile) -> ProtoFile:
    """Name each field's message or enum type in full, as a descriptor does (``Money`` in
    message ``acme.Order`` -> ``acme.Money``), so text and descriptors compare alike. A type
    from an import keeps the name it was written with."""
    known = proto.messages.keys() | proto.enums.keys()

    def resolve(kind: str, scope: str) -> str:
        if kind in SCALARS or kind.startswith("map<"):
            return kind
        if kind.startswith("."):
            return kind[1:]
        while True:  # protobuf's scoping: innermost scope first
            candidate = f"{scope}.{kind}" if scope else kind
            if candidate in known or not scope:
                return candidate
            scope = scope.rpartition(".")[0]

    for name, message in proto.messages.items():
        for number, f in list(message.fields.items()):
            message.fields[number] = attrs.evolve(f, type=resolve(f.type, name))
    return proto


def render(proto: ProtoFile) -> str:
    """A normalized text for ``?normalize=true``: what compatibility reads, sorted."""
    lines = [f'syntax = "{proto.syntax}";']
    if proto.package:
        lines.append(f"package {proto.package};")
    lines += [f'import "{name}";' for name in sorted(proto.imports)]
    for name in sorted(proto.enums):
        symbols = " ".join(f"{s} = {n};" for s, n in sorted(proto.enums[name].items(),
                                                             key=lambda kv: kv[1]))
        lines.append(f"enum {name} {{ {symbols} }}")
    for name in sorted(proto.messages):
        fields = " ".join(f"{(f.label + ' ') if f.label else ''}{f.type} {f.name} = {n};"
                          for n, f in sorted(proto.messages[name].fields.items()))
        lines.append(f"message {name} {{ {fields} }}")
    return "\n".join(lines) + "\n"


def incompatibilities(reader: ProtoFile, writer: ProtoFile) -> list[str]:
    """Confluent's wire-level Protobuf rules, in part: a message the reader lost, a field
    number whose type changed, a field that moved in or out of ``repeated``."""
    errors = []
    for name, old in writer.messages.items():
        new = reader.messages.get(name)
        if new is None:
            errors.append(f"{{errorType:'MESSAGE_REMOVED', description:'The new schema is "
                          f"missing message {name}'}}")
            continue
        for number, field in old.fields.items():
            other = new.fields.get(number)
            if other is None:
                continue
            if other.type != field.type and not _same_wire_type(other.type, field.type):
                errors.append(f"{{errorType:'FIELD_SCALAR_KIND_CHANGED', description:'The "
                              f"type of field {number} of {name} changed from {field.type} "
                              f"to {other.type}'}}")
            elif (other.label == "repeated") != (field.label == "repeated"):
                errors.append(f"{{errorType:'FIELD_LABEL_CHANGED', description:'Field "
                              f"{number} of {name} changed between repeated and singular'}}")
    return errors


_VARINT = {"int32", "int64", "uint32", "uint64", "bool"}


def _same_wire_type(a: str, b: str) -> bool:
    # Confluent accepts changes within the varint family and between string and bytes
    return (a in _VARINT and b in _VARINT) or {a, b} == {"string", "bytes"}


_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")


def parse_any(text: str) -> ProtoFile:
    """.proto text, or the base64 of a serialized ``FileDescriptorProto`` (what
    confluent-kafka's ProtobufSerializer sends, and Confluent's registry accepts)."""
    if not _BASE64.fullmatch(text) or ";" in text:
        return parse(text)
    import base64
    import binascii

    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    try:
        proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text,
                                                                               validate=False))
    except (binascii.Error, DecodeError, ValueError) as exc:
        raise ProtoError(f"neither .proto text nor a serialized file descriptor: {exc}") from None
    return from_descriptor(proto)


def from_descriptor(proto: object) -> ProtoFile:
    """The ProtoFile of a ``FileDescriptorProto``."""
    from google.protobuf import descriptor_pb2

    assert isinstance(proto, descriptor_pb2.FileDescriptorProto)
    t = descriptor_pb2.FieldDescriptorProto
    labels = {t.LABEL_OPTIONAL: "", t.LABEL_REQUIRED: "required", t.LABEL_REPEATED: "repeated"}
    out = ProtoFile(syntax=proto.syntax or "proto2", package=proto.package,
                    imports=list(proto.dependency))

    def add(message: descriptor_pb2.DescriptorProto, scope: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise ProtoError("messages nested too deep")
        full = f"{scope}.{message.name}" if scope else message.name
        msg = Message(full)
        for f in message.field:
            kind = (f.type_name.lstrip(".") if f.type_name else
                    t.Type.Name(f.type).removeprefix("TYPE_").lower())
            msg.fields[f.number] = Field(f.name, f.number, kind, labels.get(f.label, ""))
        out.messages[full] = msg
        for nested in message.nested_type:
            add(nested, full, depth + 1)
        for e in message.enum_type:
            out.enums[f"{full}.{e.name}"] = {v.name: v.number for v in e.value}

    for message in proto.message_type:
        add(message, proto.package, 1)
    for e in proto.enum_type:
        name = f"{proto.package}.{e.name}" if proto.package else e.name
        out.enums[name] = {v.name: v.number for v in e.value}
    return out
