"""Hostile bytes against every compiled decoder: truncations, huge counts and lengths, bad
varints, nulls where the schema forbids them, random garbage. The only exception allowed out is
``RemoteProtocolError``; it comes quickly, and decoding allocates in proportion to the bytes
given, never to what they claim."""

from __future__ import annotations

import random
import struct
import time
import tracemalloc
from typing import Any

import pytest

from trio_broker.protocol import codec
from trio_broker.protocol.errors import RemoteProtocolError
from trio_broker.protocol.schema import MessageSchema, load, message_names
from trio_broker.protocol.structs import class_for

SEED = 20261123
ALL = [(name, v) for name in message_names()
       for v in range(load(name).versions.min, load(name).versions.max + 1)]  # type: ignore[union-attr]


def _schema(name: str) -> MessageSchema:
    schema = load(name)
    assert schema is not None
    return schema


def _filled(schema: MessageSchema, version: int) -> bytes:
    """A valid encoding with one element in every array and text in every string."""
    class_for(schema)

    def build(struct_schema: Any) -> Any:
        kwargs: dict[str, Any] = {}
        for f in struct_schema.fields_in(version):
            if f.struct is not None:
                value: Any = build(f.struct)
            elif f.element == "string":
                value = "ab"
            elif f.element in ("bytes", "records"):
                value = b"xyz"
            elif f.element in ("uuid", "bitfield", "float64", "bool"):
                continue
            else:
                value = 1
            kwargs[f.name] = [value] if f.is_array else value
        return struct_schema.cls(**kwargs)

    parts: list[Any] = []
    codec.encode_into(schema, version, build(schema.root), parts.append)
    return b"".join(parts)


def _only_protocol_errors(schema: MessageSchema, version: int, data: bytes) -> None:
    try:
        codec.decode(schema, version, data)
    except RemoteProtocolError:
        pass


def test_every_truncation_of_every_message_is_refused() -> None:
    for name, v in ALL:
        schema = _schema(name)
        full = _filled(schema, v)
        assert codec.decode(schema, v, full)[1] == len(full)
        for cut in range(len(full)):
            with pytest.raises(RemoteProtocolError):
                codec.decode(schema, v, full[:cut])


def test_mutations_and_garbage_raise_only_remote_protocol_errors() -> None:
    rng = random.Random(SEED)
    started = time.monotonic()
    for name, v in ALL:
        schema = _schema(name)
        full = _filled(schema, v)
        for _ in range(30):
            data = bytearray(full)
            for _ in range(rng.randint(1, 4)):
                if not data:
                    break
                i = rng.randrange(len(data))
                kind = rng.randrange(4)
                if kind == 0:
                    data[i] ^= 1 << rng.randrange(8)
                elif kind == 1:
                    data[i] = rng.choice((0x00, 0x7F, 0x80, 0xFF))
                elif kind == 2 and len(data) >= 4:
                    i = min(i, len(data) - 4)
                    data[i:i + 4] = struct.pack(">i", rng.choice((-2, -1, 0x7FFFFFFF, 1 << 20)))
                else:
                    data[i:i] = rng.randbytes(rng.randint(1, 6))
            _only_protocol_errors(schema, v, bytes(data))
        for _ in range(10):
            _only_protocol_errors(schema, v, rng.randbytes(rng.randint(0, 64)))
    assert time.monotonic() - started < 120, f"seed {SEED}: hostile decoding is too slow"


@pytest.mark.parametrize("claim", [0x7FFFFFFF, 1 << 24, 1 << 16])
def test_huge_counts_fail_before_anything_is_built(claim: int) -> None:
    schema = _schema("ProduceRequest")
    # transactional_id null, acks, timeout, then a topic_data count nobody could send
    frame = struct.pack(">hhii", -1, 1, 1000, claim) + bytes(64)
    tracemalloc.start()
    try:
        started = time.perf_counter()
        with pytest.raises(RemoteProtocolError, match="claims"):
            codec.decode(schema, 7, frame)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 0.05
    assert peak < 64 * 1024


def test_huge_compact_counts_and_lengths_fail_before_anything_is_built() -> None:
    schema = _schema("ProduceRequest")
    # v9: transactional_id null (00), acks, timeout, topic_data count as a 5-byte varint
    frame = b"\x00" + struct.pack(">hi", 1, 1000) + b"\xff\xff\xff\xff\x07" + bytes(32)
    tracemalloc.start()
    try:
        with pytest.raises(RemoteProtocolError, match="claims"):
            codec.decode(schema, 9, frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024
    records = b"\x00" + struct.pack(">hi", 1, 1000) + b"\x02\x02t\x02" + struct.pack(">i", 0) + (
        b"\xfe\xff\xff\xff\x07")  # a records length of 2**31
    with pytest.raises(RemoteProtocolError, match="runs past the end"):
        codec.decode(schema, 9, records)


@pytest.mark.parametrize("varint", [b"\x80\x80\x80\x80\x80\x01", b"\xff\xff\xff\xff\x7f", b"\x80"])
def test_bad_varints_are_refused(varint: bytes) -> None:
    schema = _schema("ApiVersionsRequest")
    with pytest.raises(RemoteProtocolError):
        codec.decode(schema, 3, varint + b"\x01\x00")


@pytest.mark.parametrize(("name", "version", "data", "field"), [
    ("ProduceRequest", 7, struct.pack(">hhii", -1, 1, 10, -1), "topic_data"),
    ("JoinGroupRequest", 0, struct.pack(">h", -1), "group_id"),
    ("SyncGroupRequest", 4, b"\x00", "group_id"),
    ("MetadataRequest", 0, struct.pack(">i", -1), "topics"),
])
def test_nulls_where_the_schema_forbids_them_are_refused(name: str, version: int, data: bytes,
                                                         field: str) -> None:
    with pytest.raises(RemoteProtocolError, match=f"{field} was serialized as null"):
        codec.decode(_schema(name), version, data)


def test_negative_lengths_other_than_null_are_refused() -> None:
    with pytest.raises(RemoteProtocolError, match="negative length -2"):
        codec.decode(_schema("ProduceRequest"), 7, struct.pack(">h", -2))


def test_an_unknown_tagged_field_is_skipped_and_a_known_one_read() -> None:
    schema = _schema("ApiVersionsResponse")
    # error_code, no api_keys, throttle, then tags 1 (finalized_features_epoch) and 9 (unknown)
    body = (struct.pack(">h", 0) + b"\x01" + struct.pack(">i", 0)
            + b"\x02" + b"\x01\x08" + struct.pack(">q", 5) + b"\x09\x01z")
    message, end = codec.decode(schema, 3, body)
    assert (message.finalized_features_epoch, message.api_keys, end) == (5, [], len(body))
    with pytest.raises(RemoteProtocolError):  # a tag claiming more bytes than there are
        codec.decode(schema, 3, body[:-1])
    with pytest.raises(RemoteProtocolError, match="longer than its declared size"):
        codec.decode(schema, 3, body.replace(b"\x01\x08", b"\x01\x04"))
