"""Hostile request frames for every advertised (API, version), and a socket feeder.

Why schema-driven: a fuzzer that only sends random bytes never gets past the header check.
``valid_requests`` walks each request schema and draws a well-formed body (boundary integers,
odd strings, nulls where allowed, real record batches), so the handlers see structurally valid
but hostile requests; ``mutated`` then breaks those frames the ways a buggy or malicious peer
would (bit flips, lengths set to extremes, truncation, insertion), and ``random_frames`` covers
plain garbage behind a valid header. Shared by ``tests/hostile`` and ``bench/fuzz_long.py``.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

from trio_broker.broker.apis.registry import advertised_versions
from trio_broker.protocol.api_keys import ApiKey, request_class, response_class
from trio_broker.protocol.compression import Compression
from trio_broker.protocol.messages import decode_response, encode_request
from trio_broker.protocol.records import build_batch
from trio_broker.protocol.schema import Field, StructSchema, message_schema

#: every (api key, version) the broker advertises
API_VERSIONS: list[tuple[int, int]] = sorted(
    (int(k), v) for k, r in advertised_versions().items() for v in range(r.min, r.max + 1))

_INT_BOUNDS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
# Fields whose hostile values only make a request wait (legitimately) for a long time; kept
# short so a feeder is not stuck behind a parked request.
_WAITS = {"max_wait_ms": st.integers(-1, 20), "rebalance_timeout_ms": st.integers(-1, 50),
          "session_timeout_ms": st.integers(-1, 6000)}
_NAMES = st.one_of(st.sampled_from(["fuzz", "t", "__consumer_offsets", "", ".", "..", "a" * 249,
                                    "a" * 250, "x/../y", "g"]),
                   st.text(max_size=12))


def _int(bits: int) -> st.SearchStrategy[int]:
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return st.one_of(st.sampled_from([lo, hi, -1, 0, 1, 2, 3]), st.integers(lo, hi))


@st.composite
def record_batches(draw: st.DrawFn) -> bytes:
    n = draw(st.integers(1, 4))
    records = [(draw(st.none() | st.binary(max_size=8)), draw(st.none() | st.binary(max_size=64)))
               for _ in range(n)]
    idempotent = draw(st.booleans())
    return build_batch(records, compression=draw(st.sampled_from(list(Compression))),
                       producer_id=draw(st.integers(-1, 5)) if idempotent else -1,
                       producer_epoch=draw(st.integers(-1, 2)) if idempotent else -1,
                       base_sequence=draw(st.integers(-1, 10)) if idempotent else -1,
                       is_transactional=draw(st.booleans()) and draw(st.booleans()),
                       base_timestamp_ms=draw(st.integers(-1, 2**41)))


def _simple(field: Field, version: int, *, allow_null: bool = True) -> st.SearchStrategy[Any]:
    t = field.element
    if field.name in _WAITS:
        s: st.SearchStrategy[Any] = _WAITS[field.name]
    elif t in _INT_BOUNDS:
        s = _int(_INT_BOUNDS[t])
    elif t == "uint16":
        s = st.integers(0, 65535)
    elif t == "bool":
        s = st.booleans()
    elif t == "float64":
        s = st.floats(allow_nan=True)
    elif t == "uuid":
        s = st.uuids()
    elif t == "bitfield":  # authorized operations: bit numbers (all 32 set is "not requested")
        s = st.frozensets(st.integers(0, 30)).map(set)
    elif t == "string":
        s = _NAMES if field.name in ("name", "topic", "group_id", "key", "member_id") else \
            st.text(max_size=24)
    elif t == "records":
        s = st.one_of(record_batches(), st.binary(max_size=80))
    elif t == "bytes":
        s = st.binary(max_size=48)
    else:  # pragma: no cover - a schema type this table does not know yet
        raise NotImplementedError(t)
    if allow_null and field.nullable(version):
        s = st.none() | s
    return s


def _field(field: Field, version: int) -> st.SearchStrategy[Any]:
    if field.is_array and field.struct is not None:
        s: st.SearchStrategy[Any] = st.lists(_struct(field.struct, version), max_size=3)
    elif field.struct is not None:
        s = _struct(field.struct, version)
    elif field.is_array:
        # elements of an array of strings are never nullable, even when the array is
        s = st.lists(_simple(field, version, allow_null=False), max_size=4)
    else:
        return _simple(field, version)
    if field.nullable(version):
        s = st.none() | s
    return s


def _struct(struct: StructSchema, version: int) -> st.SearchStrategy[Any]:
    parts = {f.name: _field(f, version) for f in struct.fields_in(version)}
    make = struct.cls
    return st.fixed_dictionaries(parts).map(lambda kw: make(**kw))


def request_bodies(api_key: int, version: int) -> st.SearchStrategy[Any]:
    assert request_class(api_key) is not None  # builds the classes the strategy constructs
    schema = message_schema(api_key, "request")
    assert schema is not None
    return _struct(schema.root, version)


def response_bodies(api_key: int, version: int) -> st.SearchStrategy[Any]:
    """Well-formed response bodies of every field the schema has at ``version``."""
    assert response_class(api_key) is not None
    schema = message_schema(api_key, "response")
    assert schema is not None
    return _struct(schema.root, version)


@st.composite
def valid_requests(draw: st.DrawFn, api: tuple[int, int] | None = None) -> bytes:
    """A whole well-formed request frame (with its size prefix)."""
    api_key, version = api or draw(st.sampled_from(API_VERSIONS))
    body = draw(request_bodies(api_key, version))
    client_id = draw(st.none() | st.text(max_size=10))
    return encode_request(api_key, version, draw(_int(32)), client_id, body)


@st.composite
def mutated(draw: st.DrawFn, frames: st.SearchStrategy[bytes]) -> bytes:
    """A frame broken after its size prefix; the prefix is fixed up unless it is the target."""
    data = bytearray(draw(frames)[4:])
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 5))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == 0 and data:  # flip bits
            data[pos] ^= draw(st.integers(1, 255))
        elif kind == 1 and len(data) >= 4:  # a length or count set to an extreme
            pos = min(pos, len(data) - 4)
            data[pos:pos + 4] = struct.pack(">i", draw(st.sampled_from(
                [-1, -2, 0, 1, 0x7FFFFFFF, -0x80000000, 0xFFFF, 1 << 24])))
        elif kind == 2:  # truncate
            del data[pos:]
        elif kind == 3:  # insert garbage
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif kind == 4 and len(data) >= 2:  # an i16 length to an extreme
            pos = min(pos, len(data) - 2)
            data[pos:pos + 2] = struct.pack(">h", draw(st.sampled_from([-1, -2, 0x7FFF, -0x8000])))
        elif kind == 5:  # duplicate a slice
            end = draw(st.integers(pos, len(data)))
            data[end:end] = data[pos:end]
    size = len(data)
    if draw(st.integers(0, 9)) == 0:
        size = draw(st.sampled_from([-1, 0, len(data) + 1, 0x7FFFFFFF]))
    return struct.pack(">i", size) + bytes(data)


@st.composite
def random_frames(draw: st.DrawFn) -> bytes:
    """Random bytes behind a header that is valid (half the time) or random."""
    if draw(st.booleans()):
        api_key, version = draw(st.sampled_from(API_VERSIONS))
        head = struct.pack(">hhih", api_key, version, draw(_int(32)), -1)
    else:
        head = draw(st.binary(min_size=0, max_size=10))
    payload = head + draw(st.binary(max_size=200))
    return struct.pack(">i", len(payload)) + payload


def hostile_frames() -> st.SearchStrategy[bytes]:
    good = valid_requests()
    return st.one_of(good, mutated(good), random_frames())


# --- feeding a broker over real sockets --------------------------------------------------------

_API_VERSIONS_PROBE_ID = 0x7EAD0000


def api_versions_probe(correlation_id: int = _API_VERSIONS_PROBE_ID) -> bytes:
    from trio_broker.protocol.messages import make_request

    return encode_request(ApiKey.ApiVersions, 0, correlation_id, "probe",
                          make_request(ApiKey.ApiVersions, 0))


def _read_frames(sock: socket.socket, deadline: float) -> Iterator[bytes]:
    buf = b""
    while True:
        while len(buf) >= 4:
            (size,) = struct.unpack_from(">i", buf)
            if len(buf) < 4 + size:
                break
            yield buf[4:4 + size]
            buf = buf[4 + size:]
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        try:
            chunk = sock.recv(1 << 20)
        except (TimeoutError, ConnectionError):
            return
        if not chunk:
            return
        buf += chunk


def feed(address: tuple[str, int], frame: bytes, *, timeout_s: float = 3.0) -> str:
    """Send ``frame`` then an ApiVersions probe on one connection.

    Returns ``"answered"`` (the broker processed the frame and answered the probe),
    ``"closed"`` (it closed the connection, as for malformed input) or ``"waiting"`` (it is
    still holding the connection, e.g. a partial frame or a parked request).
    """
    with socket.create_connection(address, timeout=timeout_s) as sock:
        try:
            sock.sendall(frame + api_versions_probe())
        except (BrokenPipeError, ConnectionResetError):
            return "closed"
        deadline = time.monotonic() + timeout_s
        for payload in _read_frames(sock, deadline):
            if payload[:4] == struct.pack(">i", _API_VERSIONS_PROBE_ID):
                return "answered"
            if time.monotonic() > deadline:
                break
        return "closed" if _is_closed(sock) else "waiting"


def _is_closed(sock: socket.socket) -> bool:
    sock.settimeout(0.001)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


def well_behaved_client_ok(address: tuple[str, int], timeout_s: float = 5.0) -> bool:
    """A fresh connection gets a correct ApiVersions answer."""
    with socket.create_connection(address, timeout=timeout_s) as sock:
        sock.sendall(api_versions_probe(7))
        for payload in _read_frames(sock, time.monotonic() + timeout_s):
            cid, body = decode_response(ApiKey.ApiVersions, 0, payload)
            return cid == 7 and body.error_code == 0
    return False
