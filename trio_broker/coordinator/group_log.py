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
import os
import struct
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import crc32c

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
    return _HEAD.pack(len(payload) + 4, crc32c.crc32c(payload)) + payload


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
        if crc32c.crc32c(payload) != crc:
            break
        try:
            group_id, kind, sub, value = json.loads(bytes(payload))
            apply(state, (str(group_id), str(kind), str(sub), value))
        except (ValueError, TypeError) as exc:
            raise GroupLogError(f"record at byte {pos} is malformed: {exc}") from exc
        pos += 4 + length
    return state, pos


class GroupLog:
    """The group metadata file of one broker: recover, append (fsynced), compact, close.

    Plain synchronous code run in worker threads; every call holds one lock, since ``close()``
    may come from the event loop while a write runs.
    """

    def __init__(self, directory: Path, *, compact_bytes: int = DEFAULT_COMPACT_BYTES) -> None:
        self.directory = Path(directory)
        self.path = self.directory / FILE_NAME
        self.compact_bytes = compact_bytes
        self._lock = threading.Lock()
        self._file: BinaryIO | None = None
        self._size = 0
        self._size_after_compaction = 0
        #: bytes cut off a torn tail by the last ``open``
        self.truncated_bytes = 0

    @property
    def size_bytes(self) -> int:
        return self._size

    def open(self) -> GroupRecords:
        """Recover the file (truncating a torn tail) and return the live records."""
        with self._lock:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = self.directory / TMP_NAME
            if tmp.exists():  # a compaction that did not reach its rename
                tmp.unlink()
            state: GroupRecords = {}
            if not self.path.exists() or self.path.stat().st_size < len(MAGIC):
                _write_new(self.path, MAGIC)
                _fsync_dir(self.directory)
                valid = len(MAGIC)
            else:
                data = self.path.read_bytes()
                state, valid = replay(data)
                self.truncated_bytes = len(data) - valid
                if self.truncated_bytes:
                    LOGGER.warning("group metadata file %s: truncating a torn tail of %d bytes",
                                   self.path, self.truncated_bytes)
                    with open(self.path, "r+b") as f:
                        f.truncate(valid)
                        os.fsync(f.fileno())
            self._file = open(self.path, "ab")  # noqa: SIM115 - held open until close()
            self._size = self._size_after_compaction = valid
            LOGGER.info("group metadata file %s: %d bytes, %d groups", self.path, valid,
                        len(state))
            return state

    def append(self, records: Sequence[bytes]) -> None:
        """Write encoded records and fsync: when this returns they survive a crash."""
        with self._lock:
            f = self._require_open()
            data = b"".join(records)
            try:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            except OSError:
                self._truncate_to_known_size()
                raise
            self._size += len(data)

    def should_compact(self) -> bool:
        return self._size > max(self.compact_bytes, 2 * self._size_after_compaction)

    def compact(self, state: Mapping[str, Mapping[tuple[str, str], Any]]) -> None:
        """Replace the file by one holding only the live ``state``."""
        with self._lock:
            f = self._require_open()
            tmp = self.directory / TMP_NAME
            data = b"".join([MAGIC, *(encode_record((g, kind, sub, value))
                                      for g, records in state.items()
                                      for (kind, sub), value in records.items())])
            _write_new(tmp, data)
            os.replace(tmp, self.path)
            _fsync_dir(self.directory)
            f.close()
            self._file = open(self.path, "ab")  # noqa: SIM115
            LOGGER.info("group metadata file %s compacted from %d to %d bytes", self.path,
                        self._size, len(data))
            self._size = self._size_after_compaction = len(data)

    def close(self, final_records: Iterable[bytes] = ()) -> None:
        """Append ``final_records``, fsync and close; idempotent."""
        with self._lock:
            try:
                final = b"".join(final_records)
                if final and self._file is not None:
                    self._file.write(final)
                    self._size += len(final)
            finally:
                if self._file is not None:
                    self._file.flush()
                    os.fsync(self._file.fileno())
                    self._file.close()
                    self._file = None

    def _require_open(self) -> BinaryIO:
        if self._file is None:
            raise GroupLogError(f"group metadata file {self.path} is not open")
        return self._file

    def _truncate_to_known_size(self) -> None:
        """Unacknowledged bytes must not stay in front of later records: cut them off."""
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass  # the failed flush may fail again on close; the buffer is dropped anyway
        self._file = None
        with open(self.path, "r+b") as f:
            f.truncate(self._size)
            os.fsync(f.fileno())
        self._file = open(self.path, "ab")  # noqa: SIM115


def _write_new(path: Path, data: bytes) -> None:
    with open(path, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


__all__ = ["DELETE_GROUP", "FILE_NAME", "GroupLog", "GroupLogError", "GroupRecords", "Record",
           "apply", "encode_record", "replay"]
