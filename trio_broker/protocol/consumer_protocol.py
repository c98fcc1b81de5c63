"""The ``consumer`` protocol's payloads: the bytes a group's members exchange through the broker.

Why here, in the protocol layer: the coordinator stores and forwards these bytes untouched, but
every client face reads them (a group leader reads every member's subscription, each member its
own assignment, ``trio-broker groups describe`` shows who owns what), so the one codec lives
below all of them. The layout is Kafka's ``ConsumerProtocolSubscription`` and
``ConsumerProtocolAssignment`` (non-flexible: i16 string lengths, i32 array counts)::

    Subscription  v0: version i16, topics [string], user_data bytes (nullable)
                  v1+: ... owned_partitions [topic string, partitions [i32]]
                  v2+: ... generation_id i32;   v3+: ... rack_id string (nullable)
    Assignment    v0+: version i16, assigned_partitions [topic string, partitions [i32]],
                       user_data bytes (nullable)

Later versions only append fields, so a reader takes the fields it knows and ignores the rest,
as the protocol asks of readers. Writers write v0 subscriptions, as kafka-python and aiokafka
do, or v1/v2 when the member owns partitions (cooperative rebalancing needs the owned partitions
and the generation they were owned in), with topics and partitions sorted so equal assignments
are equal bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import NamedTuple

import attrs

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

__all__ = ["Assignment", "PayloadError", "Subscription", "decode_assignment",
           "decode_subscription", "encode_assignment", "encode_subscription"]


class PayloadError(ValueError):
    """The bytes are not a consumer-protocol payload."""


@attrs.frozen
class Subscription:
    version: int
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: dict[str, list[int]] = attrs.field(factory=dict)
    generation_id: int = -1
    rack_id: str | None = None


class Assignment(NamedTuple):
    version: int
    partitions: dict[str, list[int]]
    user_data: bytes | None = None


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise PayloadError(f"consumer protocol payload truncated at byte {self.pos}")
        out = self.data[self.pos:end]
        self.pos = end
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise PayloadError("null topic name in consumer protocol payload")
        try:
            return self._take(n).decode()
        except UnicodeDecodeError:
            raise PayloadError("topic name is not UTF-8") from None

    def nullable_string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        try:
            return self._take(n).decode()
        except UnicodeDecodeError:
            raise PayloadError("rack id is not UTF-8") from None

    def nullable_bytes(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self._take(n)

    def count(self) -> int:
        n = self.i32()
        if n < -1 or n > len(self.data) - self.pos:
            raise PayloadError(f"array of {n} elements in a {len(self.data)}-byte payload")
        return max(n, 0)

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.data)


def _topic_partitions(r: _Reader) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for _ in range(r.count()):
        topic = r.string()
        out.setdefault(topic, []).extend(r.i32() for _ in range(r.count()))
    return out


def decode_subscription(data: bytes) -> Subscription:
    """Any version; fields after the ones known here are ignored."""
    r = _Reader(bytes(data))
    version = r.i16()
    topics = [r.string() for _ in range(r.count())]
    user_data = None if r.at_end else r.nullable_bytes()
    owned: dict[str, list[int]] = {}
    generation_id = -1
    rack_id = None
    if version >= 1 and not r.at_end:
        owned = _topic_partitions(r)
    if version >= 2 and not r.at_end:
        generation_id = r.i32()
    if version >= 3 and not r.at_end:
        rack_id = r.nullable_string()
    return Subscription(version, topics, user_data, owned, generation_id, rack_id)


def decode_assignment(data: bytes) -> Assignment:
    """Any version; empty bytes (a member the leader left out) assign nothing."""
    if not data:
        return Assignment(0, {})
    r = _Reader(bytes(data))
    version = r.i16()
    partitions = _topic_partitions(r)
    user_data = None if r.at_end else r.nullable_bytes()
    return Assignment(version, partitions, user_data)


def _put_string(out: bytearray, value: str) -> None:
    raw = value.encode()
    out += _I16.pack(len(raw))
    out += raw


def _put_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(value))
        out += value


def encode_subscription(topics: Iterable[str], user_data: bytes | None = b"", *,
                        owned_partitions: Mapping[str, Iterable[int]] | None = None,
                        generation_id: int | None = None) -> bytes:
    """A subscription of the distinct ``topics``, sorted: v0, or v1 with the partitions the
    member owns (cooperative rebalancing), or v2 with the generation they were owned in."""
    names = sorted(set(topics))
    version = 2 if generation_id is not None else 1 if owned_partitions is not None else 0
    out = bytearray(_I16.pack(version))
    out += _I32.pack(len(names))
    for name in names:
        _put_string(out, name)
    _put_bytes(out, user_data)
    if version >= 1:
        _put_topic_partitions(out, owned_partitions or {})
    if version >= 2:
        out += _I32.pack(-1 if generation_id is None else generation_id)
    return bytes(out)


def _put_topic_partitions(out: bytearray, partitions: Mapping[str, Iterable[int]]) -> None:
    out += _I32.pack(len(partitions))
    for topic in sorted(partitions):
        _put_string(out, topic)
        ordered = sorted(partitions[topic])
        out += _I32.pack(len(ordered))
        for partition in ordered:
            out += _I32.pack(partition)


def encode_assignment(assignment: Mapping[str, Iterable[int]],
                      user_data: bytes | None = b"", *, version: int = 0) -> bytes:
    """An assignment, topics and partitions sorted. Versions 0 to 3 share one layout; a
    coordinator answers a member at the version of its subscription, as Kafka does."""
    out = bytearray(_I16.pack(min(max(version, 0), 3)))
    _put_topic_partitions(out, assignment)
    _put_bytes(out, user_data)
    return bytes(out)
