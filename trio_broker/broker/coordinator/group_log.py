"""The group metadata file: every group's membership, beside the committed offsets.

Why a file of its own next to ``commits.log``: Kafka keeps group metadata records (a classic
group's generation, leader, members and assignments; a consumer group's epochs, members,
target and current assignments, resolved regular expressions) in ``__consumer_offsets``
together with the offsets, and replays them when it loads the partition. Here the offsets file
already has its own format and writer; group metadata changes at different moments (a
generation forms, a member's epoch moves) and is keyed differently, so it gets its own
append-only file with the same guarantees: a record is fsynced before the request that caused
it is answered, a torn tail is cut off on start, and the live state is rewritten (temp file,
fsync, rename, directory fsync) when the file has grown past twice its live size.

A record is a key and a value, like Kafka's coordinator records: the key is (group id, kind,
sub-key), the value a JSON object, or null for a tombstone; kind ``"-"`` with a null value
deletes every record of the group. The last value of a key wins on replay.

Layout (big-endian)::

    file header   8 bytes   b"TBGRPLG" + format version 0x01
    record        u32 length     bytes after this field (crc + payload)
                  u32 crc        CRC-32C (Castagnoli) of payload
                  payload        UTF-8 JSON: [group id, kind, sub-key, value or null]
"""

from __future__ import annotations

import json
import logging
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...protocol.crc import crc32c
from .record_file import RecordFile

LOGGER = logging.getLogger(__name__)

MAGIC = b"TBGRPLG\x01"
FILE_NAME = "groups.log"
TMP_NAME = "groups.log.tmp"
DEFAULT_COMPACT_BYTES = 4 * 1024 * 1024
MAX_RECORD_BYTES = 256 * 1024 * 1024
#: kind of the record that deletes every record of its group
DELETE_GROUP = "-"

_HEAD = struct.Struct(">II")

#: (group id, kind, sub-key) -> value; None in a record is a tombstone
Record = tuple[str, str, str, Any]
#: group id -> (kind, sub-key) -> value: the live state a replay yields
GroupRecords = dict[str, dict[tuple[str, str], Any]]


class GroupLogError(Exception):
    """The group metadata file cannot be used (not ours, or a record CRC-valid but unreadable)."""


def encode_record(record: Record) -> bytes:
    payload = json.dumps(list(record), separators=(",", ":"), ensure_ascii=False).encode()
    return _HEAD.pack(len(payload) + 4, crc32c(payload)) + payload


def apply(state: GroupRecords, record: Record) -> None:
    """Fold one record into ``state``."""
    group_id, kind, sub, value = record
    if kind == DELETE_GROUP:
        state.pop(group_id, None)
        return
    records = state.setdefault(group_id, {})
    if value is None:
        records.pop((kind, sub), None)
        if not records:
            del state[group_id]
    else:
        records[(kind, sub)] = value


def replay(data: bytes) -> tuple[GroupRecords, int]:
    """The live records of a whole file and the length of its valid prefix (a torn tail, cut
    short or failing its CRC, ends the replay)."""
    if not data.startswith(MAGIC):
        raise GroupLogError("not a trio-broker group metadata file (bad magic)")
    state: GroupRecords = {}
    view = memoryview(data)
    pos, end = len(MAGIC), len(data)
    while end - pos >= _HEAD.size:
        length, crc = _HEAD.unpack_from(view, pos)
        if length < 4 or length > MAX_RECORD_BYTES or pos + 4 + length > end:
            break
        payload = view[pos + _HEAD.size:pos + 4 + length]
        if crc32c(payload) != crc:
            break
        try:
            group_id, kind, sub, value = json.loads(bytes(payload))
            apply(state, (str(group_id), str(kind), str(sub), value))
        except (ValueError, TypeError) as exc:
            raise GroupLogError(f"record at byte {pos} is malformed: {exc}") from exc
        pos += 4 + length
    return state, pos


class GroupLog(RecordFile[GroupRecords]):
    """The group metadata file of one broker: recover, append (fsynced), compact, close (the
    durability is ``RecordFile``'s; calls run in worker threads)."""

    MAGIC = MAGIC
    FILE_NAME = FILE_NAME
    TMP_NAME = TMP_NAME
    WHAT = "group metadata file"

    def __init__(self, directory: Path, *, compact_bytes: int = DEFAULT_COMPACT_BYTES) -> None:
        super().__init__(directory, compact_bytes=compact_bytes)

    def replay(self, data: bytes) -> tuple[GroupRecords, int]:
        return replay(data)

    def live_records(self, state: GroupRecords) -> Iterator[bytes]:
        for g, records in state.items():
            for (kind, sub), value in records.items():
                yield encode_record((g, kind, sub, value))

    def describe(self, state: GroupRecords) -> str:
        return f"{len(state)} groups"

    def not_open(self) -> Exception:
        return GroupLogError(f"group metadata file {self.path} is not open")


__all__ = ["DELETE_GROUP", "FILE_NAME", "GroupLog", "GroupLogError", "GroupRecords", "Record",
           "apply", "encode_record", "replay"]
