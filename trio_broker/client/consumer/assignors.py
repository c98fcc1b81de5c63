"""Partition assignors and the ConsumerProtocol payloads the group leader exchanges.

Why the payload layout matters: the broker stores these bytes without reading them, but every
consumer in a group reads every member's subscription (when it leads) and its own assignment,
whichever client library wrote them. So they follow Kafka's ``ConsumerProtocolSubscription`` and
``ConsumerProtocolAssignment`` exactly (non-flexible encoding, i16 string lengths, i32 arrays)::

    Subscription v0:  version i16, topics [string], user_data bytes (nullable)
                 v1+: ... owned_partitions [topic string, partitions [i32]]
                 v2+: ... generation_id i32;  v3+: ... rack_id string (nullable)
    Assignment:       version i16, assigned_partitions [topic string, partitions [i32]],
                      user_data bytes (nullable)

This client writes v0 (as kafka-python and aiokafka do) and reads any version, ignoring fields
after the ones it knows, as the protocol asks of readers.

The range and roundrobin assignors reproduce the Java client's results, so a mixed group agrees
on who owns what.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import NamedTuple

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class ProtocolPayloadError(ValueError):
    """A member's subscription or assignment bytes do not parse."""


class Subscription(NamedTuple):
    version: int
    topics: list[str]
    user_data: bytes | None


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


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, size: int) -> bytes:
        end = self.pos + size
        if size < 0 or end > len(self.data):
            raise ProtocolPayloadError("consumer protocol payload is truncated")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def string(self) -> str:
        length = self.i16()
        if length < 0:
            raise ProtocolPayloadError("null string in consumer protocol payload")
        try:
            return self._take(length).decode()
        except UnicodeDecodeError:
            raise ProtocolPayloadError("topic name is not UTF-8") from None

    def nullable_bytes(self) -> bytes | None:
        length = self.i32()
        return None if length == -1 else self._take(length)

    def count(self) -> int:
        n = self.i32()
        if n < -1 or n > len(self.data):
            raise ProtocolPayloadError(f"array of {n} elements in consumer protocol payload")
        return max(n, 0)


def encode_subscription(topics: Iterable[str], user_data: bytes | None = b"") -> bytes:
    out = bytearray(_I16.pack(0))
    names = sorted(set(topics))
    out += _I32.pack(len(names))
    for name in names:
        _put_string(out, name)
    _put_bytes(out, user_data)
    return bytes(out)


def decode_subscription(data: bytes) -> Subscription:
    reader = _Reader(data)
    version = reader.i16()
    topics = [reader.string() for _ in range(reader.count())]
    user_data = reader.nullable_bytes() if reader.pos < len(data) else None
    return Subscription(version, topics, user_data)


def encode_assignment(assignment: Mapping[str, Iterable[int]],
                      user_data: bytes | None = b"") -> bytes:
    out = bytearray(_I16.pack(0))
    topics = sorted(assignment)
    out += _I32.pack(len(topics))
    for topic in topics:
        _put_string(out, topic)
        partitions = sorted(assignment[topic])
        out += _I32.pack(len(partitions))
        for partition in partitions:
            out += _I32.pack(partition)
    _put_bytes(out, user_data)
    return bytes(out)


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """An empty payload (a member the leader left out) is an empty assignment."""
    if not data:
        return {}
    reader = _Reader(data)
    reader.i16()
    assignment: dict[str, list[int]] = {}
    for _ in range(reader.count()):
        topic = reader.string()
        assignment[topic] = [reader.i32() for _ in range(reader.count())]
    return assignment


#: member id -> topic -> partitions
GroupAssignment = dict[str, dict[str, list[int]]]


class RangeAssignor:
    """Per topic, consecutive partition ranges to members sorted by id (Java's ``range``)."""

    name = "range"

    @staticmethod
    def assign(subscriptions: Mapping[str, Iterable[str]],
               partitions_per_topic: Mapping[str, int]) -> GroupAssignment:
        result: GroupAssignment = {member: {} for member in subscriptions}
        members_by_topic: dict[str, list[str]] = defaultdict(list)
        for member, topics in subscriptions.items():
            for topic in set(topics):
                if topic in partitions_per_topic:
                    members_by_topic[topic].append(member)
        for topic, members in members_by_topic.items():
            members.sort()
            count = partitions_per_topic[topic]
            per_member, extra = divmod(count, len(members))
            start = 0
            for index, member in enumerate(members):
                length = per_member + (1 if index < extra else 0)
                if length:
                    result[member][topic] = list(range(start, start + length))
                start += length
        return result


class RoundRobinAssignor:
    """All partitions in (topic, partition) order dealt to subscribed members in turn."""

    name = "roundrobin"

    @staticmethod
    def assign(subscriptions: Mapping[str, Iterable[str]],
               partitions_per_topic: Mapping[str, int]) -> GroupAssignment:
        result: GroupAssignment = {member: {} for member in subscriptions}
        members = sorted(subscriptions)
        if not members:
            return result
        subscribed = {member: set(topics) for member, topics in subscriptions.items()}
        all_topics = sorted({t for topics in subscribed.values() for t in topics
                             if t in partitions_per_topic})
        turn = 0
        for topic in all_topics:
            for partition in range(partitions_per_topic[topic]):
                # next member (cyclically) subscribed to this topic
                for _ in range(len(members)):
                    member = members[turn % len(members)]
                    turn += 1
                    if topic in subscribed[member]:
                        result[member].setdefault(topic, []).append(partition)
                        break
        return result


ASSIGNORS = {cls.name: cls for cls in (RangeAssignor, RoundRobinAssignor)}
