"""One produce record of Confluent's v3 API: parsed from JSON, serialized to Kafka's bytes, and
its delivery report.

A record is ``{"partition_id", "headers": [{"name", "value" (base64)}], "key", "value",
"timestamp" (ISO 8601)}``, its key and value each ``{"type": "JSON"|"BINARY"|"STRING",
"data": ...}``: JSON data is written as compact JSON text, BINARY data is base64 and written as
its bytes, STRING data is written as UTF-8. A ``data`` of null is a null key or value. Formats
that need a schema (AVRO, PROTOBUF, JSONSCHEMA, or any ``schema_id``, ``schema_version``,
``schema`` or ``subject``) are written by ``schema_records.py`` through the broker's Schema
Registry, and refused when it is not served: a record written without its schema would be
unreadable to the consumers that expect one. A key or value with no type at all is JSON, or,
when the registry holds its topic's subject, written with that subject's latest schema, as
Confluent's proxy does.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
from typing import Any

import attrs

from .errors import RestError
from .schema_records import SCHEMA_TYPES, SchemaSpec

FORMATS = ("JSON", "BINARY", "STRING")
_SCHEMA_FIELDS = ("schema_id", "schema_version", "subject", "subject_name_strategy",
                  "raw_schema", "schema")


def _bad(message: str) -> RestError:
    return RestError(400, 400, message)


@attrs.frozen
class Data:
    """A key or value: its format (None when absent) and its bytes (None when null); with
    ``schema``, what to write it with once the registry is asked (``data`` then holds the JSON
    fallback of an untyped value, or nothing)."""

    fmt: str | None
    data: bytes | None
    schema: SchemaSpec | None = None
    #: (subject, schema id, version) of the schema it was written with
    registered: tuple[str, int, int] | None = None

    def report(self) -> dict[str, Any] | None:
        if self.fmt is None:
            return None
        out: dict[str, Any] = {"type": self.fmt,
                               "size": len(self.data) if self.data is not None else 0}
        if self.registered is not None:
            out["subject"], out["schema_id"], out["schema_version"] = self.registered
        return out


@attrs.frozen
class ProduceRecord:
    partition_id: int | None
    key: Data
    value: Data
    headers: list[tuple[str, bytes | None]]
    timestamp_ms: int | None

    @property
    def size(self) -> int:
        """Roughly what the record costs in a batch."""
        return (len(self.key.data or b"") + len(self.value.data or b"") + 32
                + sum(len(n) + len(v or b"") for n, v in self.headers))


def _data(field: str, spec: Any) -> Data:
    if spec is None:
        return Data(None, None)
    if not isinstance(spec, dict):
        raise _bad(f"{field} must be an object: {{\"type\": ..., \"data\": ...}}")
    typed = spec.get("type")
    fmt = str(typed or "JSON").upper()
    if typed is not None and fmt not in FORMATS and fmt not in SCHEMA_TYPES:
        raise _bad(f"{field}: type {fmt} is not one of JSON, BINARY, STRING, AVRO, PROTOBUF, "
                   "JSONSCHEMA")
    if fmt in SCHEMA_TYPES or any(spec.get(name) is not None for name in _SCHEMA_FIELDS):
        return Data(None, None, SchemaSpec.of(field, spec, fmt if typed is not None else None))
    data = spec.get("data")
    if typed is None and data is not None:  # the subject's latest schema, if there is one
        return Data("JSON", _json_bytes(data), SchemaSpec(field, None, data))
    if data is None:
        return Data(fmt, None)
    if fmt == "JSON":
        return Data(fmt, _json_bytes(data))
    if not isinstance(data, str):
        raise _bad(f"{field}: {fmt} data must be a string")
    if fmt == "STRING":
        return Data(fmt, _utf8(data))
    try:
        return Data(fmt, base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        raise _bad(f"{field}: BINARY data must be base64") from None


def _json_bytes(data: Any) -> bytes:
    return _utf8(json.dumps(data, separators=(",", ":"), ensure_ascii=False))


def _utf8(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:  # JSON can escape a lone surrogate; UTF-8 cannot hold it
        raise _bad("a string holds an unpaired UTF-16 surrogate") from None


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def parse_timestamp(text: Any) -> int:
    """ISO 8601 (``2021-02-05T19:14:42Z``; no zone means UTC) -> ms since the epoch."""
    if not isinstance(text, str):
        raise _bad("timestamp must be an ISO 8601 string")
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise _bad(f"timestamp {text!r} is not ISO 8601") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def format_timestamp(ms: int) -> str:
    """ms since the epoch -> ISO 8601 in UTC as Java's ``Instant`` writes it (millis only
    when there are some)."""
    moment = _EPOCH + datetime.timedelta(milliseconds=ms)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if ms % 1000:
        text += f".{ms % 1000:03d}"
    return text + "Z"


def parse_record(spec: Any) -> ProduceRecord:
    if not isinstance(spec, dict):
        raise _bad("a record must be a JSON object")
    partition = spec.get("partition_id")
    if partition is not None and (not isinstance(partition, int) or isinstance(partition, bool)
                                  or partition < 0):
        raise _bad("partition_id must be a non-negative integer")
    headers: list[tuple[str, bytes | None]] = []
    listed = spec.get("headers") or []
    if not isinstance(listed, list):
        raise _bad("headers must be a list of {\"name\": ..., \"value\": base64}")
    for header in listed:
        if not isinstance(header, dict) or not isinstance(header.get("name"), str):
            raise _bad("headers must be a list of {\"name\": ..., \"value\": base64}")
        _utf8(header["name"])
        value = header.get("value")
        if value is None:
            headers.append((header["name"], None))
            continue
        try:
            headers.append((header["name"], base64.b64decode(str(value), validate=True)))
        except (binascii.Error, ValueError):
            raise _bad(f"header {header['name']!r}: value must be base64") from None
    timestamp = spec.get("timestamp")
    return ProduceRecord(partition, _data("key", spec.get("key")), _data("value",
                         spec.get("value")), headers,
                         None if timestamp is None else parse_timestamp(timestamp))


class JsonStream:
    """Concatenated JSON values arriving in pieces: ``feed`` bytes, take whole values out.

    Why a value is only taken once complete: a record split across two HTTP chunks is one
    record. A value that cannot become valid however much follows is an error at once, so a
    streaming client is answered without waiting for more of its data.
    """

    def __init__(self, max_value_bytes: int) -> None:
        self._buffer = ""
        self._pending = b""
        self._decoder = json.JSONDecoder()
        self.max_value_bytes = max_value_bytes
        #: a value could not be read: nothing after it can be (concatenated JSON has no
        #: other boundary), so the stream ends there
        self.broken = False

    def feed(self, data: bytes) -> None:
        data = self._pending + data
        try:
            text = data.decode()
            self._pending = b""
        except UnicodeDecodeError as exc:
            if exc.end < len(data) - 3 or exc.reason != "unexpected end of data":
                raise _bad("request body is not UTF-8") from None
            text, self._pending = data[:exc.start].decode(), data[exc.start:]
        self._buffer += text

    def values(self, final: bool) -> list[Any | RestError]:
        """The whole values buffered so far (a RestError in place of an invalid one); with
        ``final``, what is left must be whitespace."""
        out: list[Any | RestError] = []
        buffer, pos = self._buffer, 0
        while True:
            while pos < len(buffer) and buffer[pos] in " \t\r\n":
                pos += 1
            if pos == len(buffer):
                break
            try:
                value, pos = self._decoder.raw_decode(buffer, pos)
            except json.JSONDecodeError as exc:
                if not final and _incomplete(buffer, exc):
                    if len(buffer) - pos > self.max_value_bytes:
                        out.append(RestError(413, 413, f"a record exceeds "
                                                       f"{self.max_value_bytes} bytes"))
                        pos, self.broken = len(buffer), True
                    break
                out.append(_bad(f"Unexpected character in request body: {exc.msg} "
                                f"(character {exc.pos - pos + 1} of a record)"))
                pos, self.broken = len(buffer), True
                break
            except RecursionError:
                out.append(_bad("a record nests too deep"))
                pos, self.broken = len(buffer), True
                break
            out.append(value)
        self._buffer = buffer[pos:]
        return out


def _incomplete(buffer: str, exc: json.JSONDecodeError) -> bool:
    """Whether more text could still make the value at ``exc.pos`` valid: a string, an escape
    (``\\u00`` is 6 characters whole) or a literal cut at the buffer's end."""
    if exc.pos >= len(buffer) - 6 or exc.msg.startswith("Unterminated string"):
        return True
    rest = buffer[exc.pos:]
    return any(word.startswith(rest) for word in ("true", "false", "null"))
