"""Request/response codec: headers by hand, bodies through the schema-driven message classes.

Why this shape: the header decides everything else (which API, which version, flexible or not),
so it is parsed first, by hand, with every length checked against the bytes present. Bodies go
through kafka-python's generated codec; any exception it raises for hostile bytes is turned into
one ``RemoteProtocolError`` here, so nothing else ever escapes the protocol layer.

Header rules (reference §1.1): request header v2 (tagged fields) for flexible versions, else v1;
``client_id`` keeps its i16 length even in v2. Response header v1 (tag byte) for flexible
versions, else v0, except ApiVersions, whose response header is always v0 (KIP-511).
"""

from __future__ import annotations

import struct
from typing import Any

from kafka.protocol.api_key import ApiKey
from kafka.protocol.api_message import ApiMessage

from .api_keys import SUPPORTED_VERSIONS, is_flexible, request_class, response_class
from .errors import RemoteProtocolError, UnsupportedVersionError

_HEADER_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


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


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise RemoteProtocolError("truncated varint in tagged fields")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise RemoteProtocolError("varint longer than 5 bytes in tagged fields")


def _skip_tagged_fields(buf: bytes, pos: int) -> int:
    count, pos = _read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise RemoteProtocolError("tagged field runs past the end of the header")
    return pos


def peek_correlation_id(frame: bytes) -> int | None:
    """The correlation id of a frame whose header may be otherwise unparseable."""
    if len(frame) < 8:
        return None
    return _I32.unpack_from(frame, 4)[0]


def decode_request_header(frame: bytes) -> RequestHeader:
    """Decode the header of a request frame (the size prefix already stripped).

    Raises ``UnsupportedVersionError`` for an API key or version outside ``SUPPORTED_VERSIONS``
    (ApiVersions excepted: the caller answers an unknown ApiVersions version with the v0 error
    reply), and ``RemoteProtocolError`` for anything malformed.
    """
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
            client_id = frame[pos:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RemoteProtocolError("client_id is not UTF-8") from exc
        pos = end
    supported = SUPPORTED_VERSIONS.get(api_key)  # type: ignore[call-overload]
    if supported is None or request_class(api_key) is None:
        raise UnsupportedVersionError(f"unsupported API key {api_key}", api_key=api_key,
                                      api_version=api_version)
    if api_version not in supported and api_key != ApiKey.ApiVersions:
        raise UnsupportedVersionError(
            f"unsupported version {api_version} of {ApiKey(api_key).name} "
            f"(supported {supported.min}-{supported.max})",
            api_key=api_key, api_version=api_version)
    flexible = is_flexible(api_key, api_version)
    if flexible and api_version in supported:
        # (an unknown ApiVersions version is answered without reading further: KIP-511)
        pos = _skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, flexible, pos)


def decode_request_body(header: RequestHeader, frame: bytes) -> Any:
    """Decode the body of a request whose header was decoded by ``decode_request_header``.

    Also rejects nulls in fields the schema declares non-nullable, which the codec lets through.
    """
    cls = request_class(header.api_key)
    assert cls is not None
    body = _decode(cls, header.api_version, frame, header.body_offset, "request")
    check_non_nullable(header.api_key, header.api_version, body)
    return body


def _decode(cls: type[ApiMessage], version: int, data: bytes, offset: int, what: str) -> Any:
    try:
        return cls.decode(memoryview(data)[offset:], version=version)
    except RemoteProtocolError:
        raise
    except (MemoryError, RecursionError) as exc:
        raise RemoteProtocolError(f"{cls.__name__} v{version} {what} body is malformed: "
                                  f"{type(exc).__name__}") from exc
    except Exception as exc:  # the codec raises struct/Value/Index/Unicode errors and more
        raise RemoteProtocolError(
            f"{cls.__name__} v{version} {what} body is malformed: {type(exc).__name__}: {exc}"
        ) from exc


def response_header_bytes(api_key: int, api_version: int, correlation_id: int) -> bytes:
    """Response header v0, or v1 (one empty tag section) for flexible versions."""
    if api_key != ApiKey.ApiVersions and is_flexible(api_key, api_version):
        return _I32.pack(correlation_id) + b"\x00"
    return _I32.pack(correlation_id)


def encode_response(header: RequestHeader, body: ApiMessage, *,
                    version: int | None = None) -> bytes:
    """A whole response frame (size prefix, header, body) for ``header``'s request.

    ``version`` overrides the body's version (the ApiVersions error reply is always v0).
    """
    v = header.api_version if version is None else version
    head = response_header_bytes(header.api_key, header.api_version, header.correlation_id)
    data = _body_bytes(body, v)
    # One copy of the body (a fetch response carries up to max_bytes of records), not two.
    return b"".join((_I32.pack(len(head) + len(data)), head, data))


def _body_bytes(body: ApiMessage, version: int) -> bytes:
    # Messages produced by the decoder skip __init__ and lack the header slot that encode()
    # touches; give them one so a decoded message can be re-encoded (proxies, tests).
    try:
        body._header  # noqa: B018
    except AttributeError:
        body._header = None
    return body.encode(version=version)


def make_response(api_key: int, api_version: int, **fields: Any) -> ApiMessage:
    """Build a response body of the given API and version from keyword fields."""
    cls = response_class(api_key)
    assert cls is not None
    return cls[api_version](**fields)


def response_type(api_key: int) -> Any:
    """The response class, whose nested struct classes build array elements."""
    cls = response_class(api_key)
    assert cls is not None
    return cls


# --- client side -----------------------------------------------------------------------------

def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                   body: ApiMessage) -> bytes:
    """A whole request frame for a client: size prefix, header v1/v2, body."""
    flexible = is_flexible(api_key, api_version)
    if client_id is None:
        header = _HEADER_FIXED.pack(api_key, api_version, correlation_id, -1)
    else:
        raw = client_id.encode("utf-8")
        header = _HEADER_FIXED.pack(api_key, api_version, correlation_id, len(raw)) + raw
    if flexible:
        header += b"\x00"
    payload = header + _body_bytes(body, api_version)
    return _I32.pack(len(payload)) + payload


def make_request(api_key: int, api_version: int, **fields: Any) -> ApiMessage:
    """Build a request body of the given API and version from keyword fields."""
    cls = request_class(api_key)
    assert cls is not None
    return cls[api_version](**fields)


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
    cls = response_class(api_key)
    if cls is None:
        raise RemoteProtocolError(f"no response schema for API key {api_key}")
    version = api_version
    if (api_key == ApiKey.ApiVersions and len(frame) >= pos + 2
            and _I16.unpack_from(frame, pos)[0] != 0):
        version = 0
    return correlation_id, _decode(cls, version, frame, pos, "response")


# --- null checks ----------------------------------------------------------------------------
# The codec decodes a length of -1 as None even where the schema says the field cannot be null;
# Kafka rejects such a request as unparseable. Handlers rely on the schema, so the same check
# runs here, once per request, from a plan compiled per (API, version).

_NullPlan = list[tuple[str, bool, int, Any]]  # (field, nullable, kind, plan of the elements)
_SIMPLE, _STRUCT, _STRUCT_ARRAY, _SIMPLE_ARRAY = range(4)
_null_plans: dict[tuple[int, int], _NullPlan] = {}
_NULLABLE_TYPES = frozenset({"string", "bytes", "records"})


def _plan(struct: Any, version: int) -> _NullPlan:
    plan: _NullPlan = []
    for name, field in struct.fields.items():
        if not field.for_version_q(version) or field.tagged_field_q(version):
            continue
        nullable = field.nullable_for_version_q(version)
        if field.is_struct_array():
            sub = _plan(field.array_of, version)
            plan.append((name, nullable, _STRUCT_ARRAY if sub else _SIMPLE, sub))
        elif field.is_struct():
            plan.append((name, nullable, _STRUCT, _plan(field, version)))
        elif field.is_array():
            kind = _SIMPLE_ARRAY if field.array_of.type_str in _NULLABLE_TYPES else _SIMPLE
            plan.append((name, nullable, kind, None))
        elif field.type_str in _NULLABLE_TYPES:  # numbers and booleans never decode as null
            plan.append((name, nullable, _SIMPLE, None))
    return plan


def _check(obj: Any, plan: _NullPlan) -> None:
    for name, nullable, kind, sub in plan:
        value = getattr(obj, name)
        if value is None:
            if not nullable:
                raise RemoteProtocolError(f"non-nullable field {name} was serialized as null")
        elif kind == _STRUCT_ARRAY:
            for item in value:
                _check(item, sub)
        elif kind == _STRUCT:
            _check(value, sub)
        elif kind == _SIMPLE_ARRAY and None in value:
            raise RemoteProtocolError(f"an element of {name} was serialized as null")


def check_non_nullable(api_key: int, api_version: int, body: Any) -> None:
    """Raise RemoteProtocolError if a field the schema declares non-nullable is null."""
    key = (api_key, api_version)
    plan = _null_plans.get(key)
    if plan is None:
        cls = request_class(api_key)
        plan = _null_plans[key] = _plan(cls._struct, api_version) if cls is not None else []
    _check(body, plan)
