"""The ``consumer`` protocol's payloads: opaque to the coordinator, decoded only for people.

Why a decoder at all: the coordinator stores and forwards subscription and assignment bytes
untouched, but ``trio-broker groups describe`` shows who owns which partition, and tests check
that every partition is assigned once. Both payloads start with ``version:i16``; later versions
only append fields, so reading the fields we know and ignoring the rest works for any version.

    Subscription  v0: topics [str], user_data bytes?   v1+: owned_partitions [topic, [i32]]
                  v2+: generation_id i32               v3+: rack_id str?
    Assignment    v0-3: assigned_partitions [topic str, partitions [i32]], user_data bytes?
"""

from __future__ import annotations

import struct

import attrs

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class PayloadError(ValueError):
    """The bytes are not a consumer-protocol payload."""


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise PayloadError(f"payload truncated at byte {self.pos}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self._take(n).decode("utf-8", "replace")

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self._take(n)

    def count(self) -> int:
        n = self.i32()
        if n > len(self.data):
            raise PayloadError(f"array of {n} elements in a {len(self.data)}-byte payload")
        return max(n, 0)

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.data)


@attrs.frozen
class Subscription:
    version: int
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: dict[str, list[int]] = attrs.field(factory=dict)
    generation_id: int = -1
    rack_id: str | None = None


@attrs.frozen
class Assignment:
    version: int
    partitions: dict[str, list[int]]
    user_data: bytes | None = None


def _topic_partitions(r: _Reader) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for _ in range(r.count()):
        topic = r.string() or ""
        out.setdefault(topic, []).extend(r.i32() for _ in range(r.count()))
    return out


def decode_subscription(data: bytes) -> Subscription:
    r = _Reader(data)
    version = r.i16()
    topics = [r.string() or "" for _ in range(r.count())]
    user_data = r.bytes_()
    owned: dict[str, list[int]] = {}
    generation_id = -1
    rack_id = None
    if version >= 1 and not r.at_end:
        owned = _topic_partitions(r)
    if version >= 2 and not r.at_end:
        generation_id = r.i32()
    if version >= 3 and not r.at_end:
        rack_id = r.string()
    return Subscription(version, topics, user_data, owned, generation_id, rack_id)


def decode_assignment(data: bytes) -> Assignment:
    """Decode an assignment; empty bytes (a member the leader left out) assign nothing."""
    if not data:
        return Assignment(0, {})
    r = _Reader(data)
    version = r.i16()
    partitions = _topic_partitions(r)
    user_data = r.bytes_() if not r.at_end else None
    return Assignment(version, partitions, user_data)


def _str(s: str) -> bytes:
    raw = s.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def encode_subscription(topics: list[str], user_data: bytes | None = b"") -> bytes:
    """A v0 subscription, as kafka-python and aiokafka send it."""
    out = [_I16.pack(0), _I32.pack(len(topics)), *(_str(t) for t in topics)]
    out.append(_I32.pack(-1) if user_data is None else _I32.pack(len(user_data)) + user_data)
    return b"".join(out)


def encode_assignment(partitions: dict[str, list[int]], user_data: bytes | None = b"") -> bytes:
    """A v0 assignment."""
    out = [_I16.pack(0), _I32.pack(len(partitions))]
    for topic, parts in partitions.items():
        out += (_str(topic), _I32.pack(len(parts)), *(_I32.pack(p) for p in parts))
    out.append(_I32.pack(-1) if user_data is None else _I32.pack(len(user_data)) + user_data)
    return b"".join(out)
