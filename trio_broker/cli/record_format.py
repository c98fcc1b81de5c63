"""How ``trio-broker consume`` writes one record: Kafka's ``--property print.*`` names, kcat's
``--format`` tokens, or one JSON object per line (kcat's ``-J`` fields).

Why three writers behind one call: the consumer loop stays the same whatever the form, and each
form is exactly the one its users know. Keys and values are written as raw bytes in the first
two forms (a value is not text until its reader says so); JSON carries text where the bytes are
UTF-8 and base64 otherwise, saying so in ``key_encoding`` / ``payload_encoding``.
"""

from __future__ import annotations

import base64
import json
import re
import struct
from collections.abc import Callable
from typing import Any

from .base import UsageError

#: Kafka's console consumer properties and their defaults
PROPERTIES = {
    "print.key": "false", "print.value": "true", "print.timestamp": "false",
    "print.partition": "false", "print.offset": "false", "print.headers": "false",
    "key.separator": "\t", "headers.separator": ",", "line.separator": "\n",
    "null.literal": "null",
}
#: kcat's format tokens
TOKENS = {
    "s": "value", "S": "value length (-1 for null)", "R": "value length as a big-endian int32",
    "k": "key", "K": "key length (-1 for null)", "t": "topic", "p": "partition",
    "o": "offset", "T": "timestamp (ms)", "h": "headers as name=value,...", "%": "a percent sign",
}
_ESCAPES = re.compile(rb"\\(x[0-9a-fA-F]{2}|[nrt\\])")

Writer = Callable[[str, int, Any, int, int], bytes]


def parse_properties(items: list[str]) -> dict[str, str]:
    props = dict(PROPERTIES)
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in PROPERTIES:
            raise UsageError(f"bad --property {item!r}: expected one of "
                             f"{', '.join(PROPERTIES)} as KEY=VALUE")
        if key.startswith("print.") and value.lower() not in ("true", "false"):
            raise UsageError(f"bad --property {item!r}: expected true or false")
        props[key] = value.encode().decode("unicode_escape") if "\\" in value else value
    return props


def properties_writer(props: dict[str, str]) -> Writer:
    """Kafka's DefaultMessageFormatter: the fields asked for, in its order, joined by
    ``key.separator``: ``CreateTime:1700000000000	Partition:0	Offset:0	h:1	k0	v0``."""
    flags = {k: v.lower() == "true" for k, v in props.items() if k.startswith("print.")}
    sep = props["key.separator"].encode()
    null = props["null.literal"].encode()
    headers_sep = props["headers.separator"].encode()
    end = props["line.separator"].encode()

    def write(topic: str, partition: int, record: Any, timestamp_type: int, leader: int,
              ) -> bytes:
        fields: list[bytes] = []
        if flags["print.timestamp"]:
            kind = "LogAppendTime" if timestamp_type else "CreateTime"
            fields.append(f"{kind}:{record.timestamp}".encode())
        if flags["print.partition"]:
            fields.append(f"Partition:{partition}".encode())
        if flags["print.offset"]:
            fields.append(f"Offset:{record.offset}".encode())
        if flags["print.headers"]:
            if record.headers:
                fields.append(headers_sep.join(
                    k.encode() + b":" + (null if v is None else v) for k, v in record.headers))
            else:
                fields.append(b"NO_HEADERS")
        if flags["print.key"]:
            fields.append(null if record.key is None else record.key)
        if flags["print.value"]:
            fields.append(null if record.value is None else record.value)
        return sep.join(fields) + end

    return write


def format_writer(fmt: str, null_literal: str = "") -> Writer:
    """kcat's ``-f`` format: ``%k %s %t %p %o %T %h %K %S %R %%``, escapes ``\\n \\r \\t \\xHH``.
    A format without a newline of its own gets one after each record, so lines stay lines."""
    raw = _ESCAPES.sub(_unescape, fmt.encode())
    if b"\n" not in raw:
        raw += b"\n"
    parts: list[bytes | str] = []
    i = 0
    literal = bytearray()
    while i < len(raw):
        ch = raw[i:i + 1]
        if ch == b"%":
            token = raw[i + 1:i + 2].decode("latin-1")
            if token not in TOKENS:
                raise UsageError(f"bad --format {fmt!r}: unknown token %{token or ''} "
                                 f"(tokens: {' '.join('%' + t for t in TOKENS)})")
            if token == "%":
                literal += b"%"
            else:
                if literal:
                    parts.append(bytes(literal))
                    literal = bytearray()
                parts.append(token)
            i += 2
            continue
        literal += ch
        i += 1
    if literal:
        parts.append(bytes(literal))
    null = null_literal.encode()

    def write(topic: str, partition: int, record: Any, timestamp_type: int, leader: int,
              ) -> bytes:
        out = bytearray()
        for part in parts:
            if isinstance(part, bytes):
                out += part
            elif part == "s":
                out += null if record.value is None else record.value
            elif part == "k":
                out += null if record.key is None else record.key
            elif part == "S":
                out += str(-1 if record.value is None else len(record.value)).encode()
            elif part == "K":
                out += str(-1 if record.key is None else len(record.key)).encode()
            elif part == "R":
                out += struct.pack(">i", -1 if record.value is None else len(record.value))
            elif part == "t":
                out += topic.encode()
            elif part == "p":
                out += str(partition).encode()
            elif part == "o":
                out += str(record.offset).encode()
            elif part == "T":
                out += str(record.timestamp).encode()
            elif part == "h":
                out += b",".join(k.encode() + b"=" + (v or b"") for k, v in record.headers)
        return bytes(out)

    return write


def _unescape(match: re.Match[bytes]) -> bytes:
    code = match.group(1)
    if code.startswith(b"x"):
        return bytes([int(code[1:], 16)])
    return {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"\\": b"\\"}[code]


def _text(value: bytes | None, name: str, doc: dict[str, Any]) -> None:
    if value is None:
        doc[name] = None
        return
    try:
        doc[name] = value.decode("utf-8")
    except UnicodeDecodeError:
        doc[name] = base64.b64encode(value).decode("ascii")
        doc[f"{name}_encoding"] = "base64"


def json_writer() -> Writer:
    """One JSON object per line with kcat's ``-J`` fields: topic, partition, offset, tstype,
    ts, broker, headers (a flat name, value, ... list), key, payload."""
    def write(topic: str, partition: int, record: Any, timestamp_type: int, leader: int,
              ) -> bytes:
        doc: dict[str, Any] = {
            "topic": topic, "partition": partition, "offset": record.offset,
            "tstype": "logappend" if timestamp_type else "create", "ts": record.timestamp,
            "broker": leader}
        if record.headers:
            flat: list[str | None] = []
            for name, value in record.headers:
                flat.append(name)
                flat.append(None if value is None else value.decode("utf-8", "replace"))
            doc["headers"] = flat
        _text(record.key, "key", doc)
        _text(record.value, "payload", doc)
        return (json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n").encode()

    return write


__all__ = ["PROPERTIES", "TOKENS", "Writer", "format_writer", "json_writer",
           "parse_properties", "properties_writer"]
