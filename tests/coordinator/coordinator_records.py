"""A decoder of Kafka's coordinator records, written from Kafka's message specs
(OffsetCommitKey/Value, GroupMetadataKey/Value, TransactionLogKey/Value), independent of the
broker's encoder: what a lag monitor consuming ``__consumer_offsets`` would run."""

from __future__ import annotations

import struct
from typing import Any


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _unpack(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def i8(self) -> int:
        return int(self._unpack(">b"))

    def i16(self) -> int:
        return int(self._unpack(">h"))

    def i32(self) -> int:
        return int(self._unpack(">i"))

    def i64(self) -> int:
        return int(self._unpack(">q"))

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        raw = self.data[self.pos:self.pos + n]
        self.pos += n
        return raw.decode()

    def bytes_(self) -> bytes:
        n = self.i32()
        raw = self.data[self.pos:self.pos + max(n, 0)]
        self.pos += max(n, 0)
        return raw

    def done(self) -> None:
        assert self.pos == len(self.data), f"{len(self.data) - self.pos} trailing bytes"


def decode_offsets_key(key: bytes) -> tuple[str, tuple[Any, ...]]:
    """A key of ``__consumer_offsets``: ("offset", (group, topic, partition)) for an
    OffsetCommitKey (versions 0-1), ("group", (group,)) for a GroupMetadataKey (version 2)."""
    r = _Reader(key)
    version = r.i16()
    if version in (0, 1):
        group, topic, partition = r.string(), r.string(), r.i32()
        r.done()
        return "offset", (group, topic, partition)
    if version == 2:
        group = r.string()
        r.done()
        return "group", (group,)
    raise AssertionError(f"unknown key version {version}")


def decode_txn_key(key: bytes) -> str | None:
    """A TransactionLogKey (version 0): the transactional id."""
    r = _Reader(key)
    assert r.i16() == 0
    txn_id = r.string()
    r.done()
    return txn_id


def decode_offset_value(value: bytes) -> dict[str, Any]:
    r = _Reader(value)
    version = r.i16()
    out: dict[str, Any] = {"version": version, "offset": r.i64()}
    out["leader_epoch"] = r.i32() if version >= 3 else -1
    out["metadata"] = r.string()
    out["commit_timestamp"] = r.i64()
    if version == 1:
        out["expire_timestamp"] = r.i64()
    r.done()
    return out


def decode_group_value(value: bytes) -> dict[str, Any]:
    r = _Reader(value)
    version = r.i16()
    assert version == 3, version
    out: dict[str, Any] = {"protocol_type": r.string(), "generation": r.i32(),
                           "protocol": r.string(), "leader": r.string(),
                           "current_state_timestamp": r.i64(), "members": []}
    for _ in range(r.i32()):
        out["members"].append({
            "member_id": r.string(), "group_instance_id": r.string(), "client_id": r.string(),
            "client_host": r.string(), "rebalance_timeout": r.i32(), "session_timeout": r.i32(),
            "subscription": r.bytes_(), "assignment": r.bytes_()})
    r.done()
    return out


#: Kafka's TransactionState ids
TXN_STATES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort",
              4: "CompleteCommit", 5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


def decode_txn_value(value: bytes) -> dict[str, Any]:
    r = _Reader(value)
    version = r.i16()
    assert version == 0, version
    out: dict[str, Any] = {"producer_id": r.i64(), "producer_epoch": r.i16(),
                           "timeout_ms": r.i32(), "state": TXN_STATES[r.i8()]}
    count = r.i32()
    partitions: list[tuple[str | None, int]] | None = None if count < 0 else []
    for _ in range(max(count, 0)):
        topic = r.string()
        for _ in range(r.i32()):
            assert partitions is not None
            partitions.append((topic, r.i32()))
    out["partitions"] = partitions
    out["last_update_ms"], out["start_ms"] = r.i64(), r.i64()
    r.done()
    return out
