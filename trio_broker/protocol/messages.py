"""Request/response codec: headers by hand, bodies through the compiled message schemas.

Why this shape: the header decides everything else (which API, which version, flexible or not),
so it is parsed first, by hand, with every length checked against the bytes present. Bodies go
through the codec compiled from the project's schemas (``schema``, ``codec``), which turns every
problem with a peer's bytes into one ``RemoteProtocolError``, so nothing else ever escapes the
protocol layer.

Header rules (reference §1.1): request header v2 (tagged fields) for flexible versions, else v1;
``client_id`` keeps its i16 length even in v2. Response header v1 (tag byte) for flexible
versions, else v0, except ApiVersions, whose response header is always v0 (KIP-511).
"""

from __future__ import annotations

import struct
from typing import Any

from . import codec
from .api_keys import SUPPORTED_VERSIONS, ApiKey, is_flexible
from .errors import RemoteProtocolError, UnsupportedVersionError
from .schema import MessageSchema, data_schema, message_schema
from .structs import Message, class_for
from .wire import STRUCT_ERRORS, read_uvarint

__all__ = ["ApiMessage", "Encoded", "Message", "RequestHeader", "decode_data",
           "decode_request_body", "decode_request_header", "decode_response", "encode_data",
           "encode_request", "encode_response", "encode_response_parts", "error_codes",
           "make_request", "make_response", "peek_correlation_id", "response_header_bytes",
           "response_type"]

#: the type of every request and response body (kept under the name callers annotate with)
ApiMessage = Message

_HEADER_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
#: a response frame's size and correlation id
_SIZE_ID = struct.Struct(">ii")
#: compared for every response: read from the enum once (on Python 3.11 reading a member
#: through its class costs several times the comparison)
_API_VERSIONS = ApiKey.ApiVersions


class RequestHeader:
    """A decoded request header; ``body_offset`` is where the body starts in the frame."""

    __slots__ = ("api_key", "api_version", "body_offset", "client_id", "correlation_id",
                 "flexible")

    def __init__(self, api_key: int, api_version: int, correlation_id: int,
                 client_id: str | None, flexible: bool, body_offset: int) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.flexible = flexible
        self.body_offset = body_offset

    @property
    def api_name(self) -> str:
        try:
            return ApiKey(self.api_key).name
        except ValueError:
            return f"Unknown({self.api_key})"

    def __repr__(self) -> str:
        return (f"RequestHeader({self.api_name} v{self.api_version}, "
                f"correlation_id={self.correlation_id}, client_id={self.client_id!r})")


def _skip_tagged_fields(buf: bytes | bytearray, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise RemoteProtocolError("tagged field runs past the end of the header")
    return pos


def peek_correlation_id(frame: bytes | bytearray) -> int | None:
    """The correlation id of a frame whose header may be otherwise unparseable."""
    if len(frame) < 8:
        return None
    return int(_I32.unpack_from(frame, 4)[0])


#: (API key, version) -> flexible, for every supported pair: the header's fast path
_KNOWN: dict[tuple[int, int], bool] = {
    (int(key), version): is_flexible(key, version)
    for key, supported in SUPPORTED_VERSIONS.items()
    for version in range(supported.min, supported.max + 1)}


def decode_request_header(frame: bytes | bytearray) -> RequestHeader:
    """Decode the header of a request frame (the size prefix already stripped).

    Raises ``UnsupportedVersionError`` for an API key or version outside ``SUPPORTED_VERSIONS``
    (ApiVersions excepted: the caller answers an unknown ApiVersions version with the v0 error
    reply), and ``RemoteProtocolError`` for anything malformed.
    """
    n = len(frame)
    if n >= 10:  # fast path: a supported version, a client id, no tagged fields
        api_key, api_version, correlation_id, id_len = _HEADER_FIXED.unpack_from(frame, 0)
        flexible = _KNOWN.get((api_key, api_version))
        end = 10 + id_len
        if flexible is not None and id_len >= 0 and end <= n:
            try:
                client_id = str(frame[10:end], "utf-8")
            except UnicodeDecodeError as exc:
                raise RemoteProtocolError("client_id is not UTF-8") from exc
            if not flexible:
                return RequestHeader(api_key, api_version, correlation_id, client_id, False,
                                     end)
            if end < n and frame[end] == 0:
                return RequestHeader(api_key, api_version, correlation_id, client_id, True,
                                     end + 1)
    return _decode_request_header(frame)


def _decode_request_header(frame: bytes | bytearray) -> RequestHeader:
    """Every header, with every check (unsupported versions, null client ids, tagged fields)."""
    if len(frame) < _HEADER_FIXED.size:
        raise RemoteProtocolError(f"request header needs 10 bytes, frame has {len(frame)}")
    api_key, api_version, correlation_id, id_len = _HEADER_FIXED.unpack_from(frame, 0)
    pos = _HEADER_FIXED.size
    if id_len < -1:
        raise RemoteProtocolError(f"client_id length {id_len} is negative")
    client_id: str | None = None
    if id_len >= 0:
        end = pos + id_len
        if end > len(frame):
            raise RemoteProtocolError("client_id runs past the end of the frame")
        try:
            client_id = str(frame[pos:end], "utf-8")
        except UnicodeDecodeError as exc:
            raise RemoteProtocolError("client_id is not UTF-8") from exc
        pos = end
    supported = SUPPORTED_VERSIONS.get(api_key)
    if supported is None:
        raise UnsupportedVersionError(f"unsupported API key {api_key}", api_key=api_key,
                                      api_version=api_version)
    known = supported.min <= api_version <= supported.max
    if not known and api_key != ApiKey.ApiVersions:
        raise UnsupportedVersionError(
            f"unsupported version {api_version} of {ApiKey(api_key).name} "
            f"(supported {supported.min}-{supported.max})",
            api_key=api_key, api_version=api_version)
    flexible = is_flexible(api_key, api_version)
    if flexible and known:
        # (an unknown ApiVersions version is answered without reading further: KIP-511)
        if pos < len(frame) and frame[pos] == 0:  # no tagged fields: the usual case
            pos += 1
        else:
            pos = _skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, flexible, pos)


# --- bodies ------------------------------------------------------------------------------------
# Per-request work is kept to a dict lookup or two: the compiled decoder of each (API, version)
# and the encoder of each (class, version) are cached here once found.

_schemas: dict[tuple[int, str], MessageSchema] = {}
_decoders: dict[tuple[int, str, int], codec.Decoder] = {}
_encoders: dict[tuple[type, int], codec.Encoder] = {}
_ENCODE_ERRORS = (AttributeError, TypeError, ValueError, OverflowError, struct.error)


def _schema(api_key: int, kind: str) -> MessageSchema:
    schema = _schemas.get((api_key, kind))
    if schema is None:
        found = message_schema(api_key, kind)
        if found is None:
            raise RemoteProtocolError(f"no {kind} schema for API key {api_key}")
        schema = _schemas[api_key, kind] = found
    return schema


def _decoder(api_key: int, kind: str, version: int) -> codec.Decoder:
    schema = _schema(api_key, kind)
    if version not in schema.versions:
        raise RemoteProtocolError(f"{schema.name} has no version {version}")
    fn = _decoders[api_key, kind, version] = codec.decoder(schema, version)
    return fn


def _decode(api_key: int, kind: str, version: int, data: bytes | bytearray,
            offset: int) -> Any:
    fn = _decoders.get((api_key, kind, version)) or _decoder(api_key, kind, version)
    try:
        return fn(memoryview(data), offset)[0]
    except RemoteProtocolError:
        raise
    except STRUCT_ERRORS as exc:
        raise RemoteProtocolError(f"{ApiKey(api_key).name} v{version} {kind} is malformed: "
                                  f"{type(exc).__name__}: {exc}") from exc


def decode_request_body(header: RequestHeader, frame: bytes | bytearray) -> Any:
    """Decode the body of a request whose header was decoded by ``decode_request_header``.

    Nulls in fields the schema declares non-nullable are refused here, as Kafka does.
    """
    return _decode(header.api_key, "request", header.api_version, frame, header.body_offset)


def _encoder(cls: type[Message], version: int) -> codec.Encoder:
    schema = cls._message
    try:
        fn = _encoders[cls, version] = codec.encoder(schema, version)
    except ValueError as exc:  # a version the schema does not cover
        raise ValueError(f"cannot encode {schema.name} v{version}: {exc}") from exc
    return fn


class Encoded(Message):
    """A response body encoded once, answered many times as it is (an answer that does not
    change between requests: Metadata naming no topic for the same version and cluster).

    It has no fields, so nothing (a quota's ``throttle_time_ms``) can be set in it after
    encoding: a handler returns one only where nothing would be; ``error_codes`` reads the
    codes found when it was made."""

    __slots__ = ("data", "errors", "version")

    def __init__(self, body: Message, version: int) -> None:
        parts: list[Any] = []
        _encode_body(body, version, parts)
        self.data = b"".join(parts)
        self.version = version
        self.errors = error_codes(body)

    def at(self, version: int) -> bytes:
        """The encoded body, which can only answer the version it was encoded for."""
        if self.version != version:
            raise ValueError(f"cannot encode a v{self.version} answer as v{version}")
        return self.data

    @classmethod
    def of(cls, data: bytes, version: int, errors: list[int]) -> Encoded:
        """A body encoded by hand (an answer too common for the generic encoder's walk), with
        the error codes it carries."""
        answer = cls.__new__(cls)
        answer.data, answer.version, answer.errors = data, version, errors
        return answer


def _encode_body(body: Message, version: int, parts: list[Any]) -> None:
    cls = type(body)
    if cls is Encoded:
        assert isinstance(body, Encoded)
        parts.append(body.at(version))
        return
    encode = _encoders.get((cls, version)) or _encoder(cls, version)
    try:
        encode(body, parts.append)
    except _ENCODE_ERRORS as exc:
        raise ValueError(f"cannot encode {cls._message.name} v{version}: "
                         f"{type(exc).__name__}: {exc}") from exc


def response_header_bytes(api_key: int, api_version: int, correlation_id: int) -> bytes:
    """Response header v0, or v1 (one empty tag section) for flexible versions."""
    if api_key != ApiKey.ApiVersions and is_flexible(api_key, api_version):
        return _I32.pack(correlation_id) + b"\x00"
    return _I32.pack(correlation_id)


def encode_response(header: RequestHeader, body: Message, *,
                    version: int | None = None) -> bytes:
    """A whole response frame (size prefix, header, body) for ``header``'s request.

    ``version`` overrides the body's version (the ApiVersions error reply is always v0).
    """
    if type(body) is Encoded and version is None:  # an answer encoded once: one pack, one join
        assert isinstance(body, Encoded)
        data = body.at(header.api_version)
        if header.flexible and header.api_key != _API_VERSIONS:
            return _SIZE_ID.pack(len(data) + 5, header.correlation_id) + b"\x00" + data
        return _SIZE_ID.pack(len(data) + 4, header.correlation_id) + data
    if header.flexible and header.api_key != _API_VERSIONS:
        head = _I32.pack(header.correlation_id) + b"\x00"
    else:
        head = _I32.pack(header.correlation_id)
    parts: list[Any] = [b"", head]
    _encode_body(body, header.api_version if version is None else version, parts)
    # One copy of the body (a fetch response carries up to max_bytes of records), not two.
    parts[0] = _I32.pack(sum(map(len, parts)))
    return b"".join(parts)


def encode_response_parts(header: RequestHeader, body: Message) -> list[Any]:
    """A whole response frame as parts: runs of bytes joined, and between them, as they are,
    the values of ``records`` fields that are not bytes (sized file regions, which the network
    layer sends from their files). A frame without such values is one part."""
    parts: list[Any] = [b"", response_header_bytes(header.api_key, header.api_version,
                                                   header.correlation_id)]
    _encode_body(body, header.api_version, parts)
    parts[0] = _I32.pack(sum(map(len, parts)))
    out: list[Any] = []
    run: list[Any] = []
    for part in parts:
        if isinstance(part, bytes | bytearray | memoryview):
            run.append(part)
        else:
            out.append(b"".join(run))
            out.append(part)
            run = []
    out.append(b"".join(run))
    return out


def make_response(api_key: int, api_version: int, **fields: Any) -> Any:
    """Build a response body of the given API and version from keyword fields."""
    return _new(api_key, "response", api_version, fields)


def response_type(api_key: int) -> Any:
    """The response class, whose nested struct classes build array elements."""
    return class_for(_schema(api_key, "response"))


_classes: dict[tuple[int, str], tuple[type[Message], int, int]] = {}


def _new(api_key: int, kind: str, version: int, fields: dict[str, Any]) -> Message:
    found = _classes.get((api_key, kind))
    if found is None:
        schema = _schema(api_key, kind)
        found = _classes[api_key, kind] = (class_for(schema), *schema.versions)
    cls, lo, hi = found
    if not lo <= version <= hi:
        raise ValueError(f"{cls.__name__} has no version {version} (schemas cover {lo}-{hi})")
    return cls(**fields)


# --- client side -------------------------------------------------------------------------------

def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                   body: Message) -> bytes:
    """A whole request frame for a client: size prefix, header v1/v2, body."""
    if client_id is None:
        header = _HEADER_FIXED.pack(api_key, api_version, correlation_id, -1)
    else:
        raw = client_id.encode("utf-8")
        header = _HEADER_FIXED.pack(api_key, api_version, correlation_id, len(raw)) + raw
    if is_flexible(api_key, api_version):
        header += b"\x00"
    parts: list[Any] = [b"", header]
    _encode_body(body, api_version, parts)
    parts[0] = _I32.pack(sum(map(len, parts)))
    return b"".join(parts)


def make_request(api_key: int, api_version: int, **fields: Any) -> Any:
    """Build a request body of the given API and version from keyword fields."""
    return _new(api_key, "request", api_version, fields)


def decode_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """Decode a response frame (size prefix stripped) into (correlation_id, body).

    An ApiVersions response carrying an error is decoded as v0, as brokers send it.
    """
    if len(frame) < 4:
        raise RemoteProtocolError("response shorter than its correlation id")
    (correlation_id,) = _I32.unpack_from(frame, 0)
    pos = 4
    if api_key != ApiKey.ApiVersions and is_flexible(api_key, api_version):
        pos = _skip_tagged_fields(frame, pos)
    version = api_version
    if (api_key == ApiKey.ApiVersions and len(frame) >= pos + 2
            and _I16.unpack_from(frame, pos)[0] != 0):
        version = 0
    return correlation_id, _decode(api_key, "response", version, frame, pos)


# --- data payloads and walks -------------------------------------------------------------------

def encode_data(message: Message, version: int) -> bytes:
    """A versioned data payload (the consumer protocol's): i16 version, then the body."""
    parts: list[Any] = [_I16.pack(version)]
    _encode_body(message, version, parts)
    return b"".join(parts)


def decode_data(name: str, data: bytes) -> tuple[int, Any]:
    """(version, payload) of a versioned data payload; a version newer than the schema's is read
    as the newest one known, whose fields it extends (Kafka's forward compatibility rule)."""
    schema = data_schema(name)
    if len(data) < 2:
        raise RemoteProtocolError(f"{name} shorter than its version")
    (version,) = _I16.unpack_from(data, 0)
    if version < schema.versions.min:
        raise RemoteProtocolError(f"{name} has no version {version}")
    return version, codec.decode(schema, min(version, schema.versions.max), data, 2)[0]


_error_paths: dict[tuple[type, int], list[tuple[str, ...]]] = {}


def error_codes(body: Message, depth: int = 3) -> list[int]:
    """The error codes in a response body: top level and nested arrays (topics, partitions),
    ``depth`` arrays deep. Every response passes here (metrics), so the paths that lead to an
    ``error_code`` are found once per response class and only those are followed."""
    if type(body) is Encoded:
        assert isinstance(body, Encoded)
        return list(body.errors)
    key = (type(body), depth)
    paths = _error_paths.get(key)
    if paths is None:
        paths = _error_paths[key] = _paths_to_error_codes(type(body)._schema, depth)
    out: list[int] = []
    for path in paths:
        _follow(body, path, 0, out)
    return out


def _paths_to_error_codes(struct_schema: Any, depth: int) -> list[tuple[str, ...]]:
    paths: list[tuple[str, ...]] = []
    for field in struct_schema.fields:
        if field.name == "error_code":
            paths.append((field.name,))
        elif depth and field.is_array and field.struct is not None:
            paths += [(field.name, *sub)
                      for sub in _paths_to_error_codes(field.struct, depth - 1)]
    return paths


def _follow(obj: Any, path: tuple[str, ...], i: int, out: list[int]) -> None:
    value = getattr(obj, path[i], None)
    if i == len(path) - 1:
        if isinstance(value, int):
            out.append(value)
    elif isinstance(value, list):
        for item in value:
            _follow(item, path, i + 1, out)
