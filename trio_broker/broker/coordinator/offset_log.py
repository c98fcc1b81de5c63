"""Committed offsets on disk: an append-only, checksummed, fsynced commit log.

Why this format and not a partition log of ``__consumer_offsets``: committed offsets are tiny,
keyed state (group, topic, partition) -> offset. Kafka keeps them in a compacted topic because it
replicates them; a single broker only needs them durable and quick to reload. An append-only file
gives durability with one sequential write and one fsync per batch of commits (commits that
arrive together share the fsync), and a periodic rewrite of the live state keeps the file, and
so the reload time, proportional to the number of committed partitions rather than to the number
of commits ever made.

Durability rule: a commit is acknowledged only after its record is written and fsynced. A crash
can leave at most the record being written half on disk (a torn tail); recovery keeps every
record up to the first one whose length runs past the end of the file or whose CRC-32C does not
match, and truncates the rest. Nothing after that point was ever acknowledged.

Compaction: when the file grows past ``compact_bytes`` (and past twice the size it had after the
last compaction, so a large live state does not rewrite itself on every commit), the live state
is written to ``commits.log.tmp``, fsynced, renamed over ``commits.log`` and the directory is
fsynced. A crash at any point leaves either the old complete file or the new one.

Layout (big-endian)::

    file header   8 bytes   b"TBOFFLG" + format version 0x01
    record        u32 length     bytes after this field (crc + payload)
                  u32 crc        CRC-32C (Castagnoli) of payload
                  payload:
                    u8  kind         0 = offsets, 1 = delete group (no entries)
                    u16 + utf-8      group id
                    u32 count        entries that follow
                    entry:
                      u16 + utf-8    topic
                      i32 partition
                      u8  flags      bit 0: tombstone (the partition's offset is removed)
                                     bit 1: a committed leader epoch follows the fixed part
                      i64 offset
                      i64 commit timestamp (ms since the epoch)
                      i64 expire timestamp (ms since the epoch, -1 = by group retention)
                      i32 metadata length (-1 = null)
                      [i32 leader epoch, when flags bit 1]
                      utf-8 metadata

One OffsetCommit request becomes exactly one record.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from ...protocol.crc import crc32c
from .record_file import RecordFile

LOGGER = logging.getLogger(__name__)

MAGIC = b"TBOFFLG\x01"
FILE_NAME = "commits.log"
TMP_NAME = "commits.log.tmp"
DEFAULT_COMPACT_BYTES = 4 * 1024 * 1024
#: a record longer than this is treated as garbage, not allocated
MAX_RECORD_BYTES = 256 * 1024 * 1024
#: entries per record when compaction writes the live state
_ENTRIES_PER_RECORD = 2000

KIND_OFFSETS = 0
KIND_DELETE_GROUP = 1
_FLAG_TOMBSTONE = 1
#: set when the entry carries a committed leader epoch (OffsetCommit v6+); files written before
#: leader epochs were kept have no such entries and read back with epoch -1
_FLAG_LEADER_EPOCH = 2

_HEAD = struct.Struct(">II")  # length, crc
_KIND_GROUP = struct.Struct(">BH")  # kind, group id length
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_ENTRY = struct.Struct(">iBqqqi")  # partition, flags, offset, commit ts, expire ts, metadata len

TopicPartition = tuple[str, int]


class OffsetLogError(Exception):
    """The offsets file cannot be used (not ours, or unreadable); never a torn tail."""


class OffsetAndMetadata(NamedTuple):
    """One committed offset, as OffsetFetch returns it and retention judges it."""

    offset: int
    metadata: str | None
    commit_timestamp_ms: int
    #: absolute expiry from an explicit retention time in the commit; -1 = group retention rule
    expire_timestamp_ms: int = -1
    #: the leader epoch of the last record consumed (OffsetCommit v6+); -1 = unknown
    leader_epoch: int = -1


#: group id -> partition -> committed offset
OffsetState = dict[str, dict[TopicPartition, OffsetAndMetadata]]


def encode_record(group_id: str,
                  entries: Iterable[tuple[TopicPartition, OffsetAndMetadata | None]],
                  *, kind: int = KIND_OFFSETS) -> bytes:
    """One record: ``entries`` maps partitions to offsets, ``None`` removing the partition."""
    group_raw = group_id.encode("utf-8")
    parts: list[bytes] = []
    count = 0
    for (topic, partition), om in entries:
        topic_raw = topic.encode("utf-8")
        if om is None:
            parts += (_U16.pack(len(topic_raw)), topic_raw,
                      _ENTRY.pack(partition, _FLAG_TOMBSTONE, -1, -1, -1, -1))
        else:
            meta = None if om.metadata is None else om.metadata.encode("utf-8")
            flags = _FLAG_LEADER_EPOCH if om.leader_epoch != -1 else 0
            parts += (_U16.pack(len(topic_raw)), topic_raw,
                      _ENTRY.pack(partition, flags, om.offset, om.commit_timestamp_ms,
                                  om.expire_timestamp_ms, -1 if meta is None else len(meta)))
            if flags:
                parts.append(_I32.pack(om.leader_epoch))
            if meta is not None:
                parts.append(meta)
        count += 1
    payload = b"".join([_KIND_GROUP.pack(kind, len(group_raw)), group_raw, _U32.pack(count),
                        *parts])
    return _HEAD.pack(len(payload) + 4, crc32c(payload)) + payload


def _decode_payload(payload: memoryview, state: OffsetState) -> None:
    """Apply one record's payload to ``state`` (raises on a malformed payload)."""
    kind, glen = _KIND_GROUP.unpack_from(payload, 0)
    pos = _KIND_GROUP.size
    group_id = bytes(payload[pos:pos + glen]).decode("utf-8")
    pos += glen
    (count,) = _U32.unpack_from(payload, pos)
    pos += 4
    if kind == KIND_DELETE_GROUP:
        state.pop(group_id, None)
        return
    if kind != KIND_OFFSETS:
        raise ValueError(f"unknown record kind {kind}")
    offsets = state.setdefault(group_id, {})
    for _ in range(count):
        (tlen,) = _U16.unpack_from(payload, pos)
        pos += 2
        topic = bytes(payload[pos:pos + tlen]).decode("utf-8")
        pos += tlen
        partition, flags, offset, commit_ts, expire_ts, mlen = _ENTRY.unpack_from(payload, pos)
        pos += _ENTRY.size
        leader_epoch = -1
        if flags & _FLAG_LEADER_EPOCH:
            (leader_epoch,) = _I32.unpack_from(payload, pos)
            pos += 4
        metadata = None
        if mlen >= 0:
            metadata = bytes(payload[pos:pos + mlen]).decode("utf-8")
            pos += mlen
        if flags & _FLAG_TOMBSTONE:
            offsets.pop((topic, partition), None)
        else:
            offsets[(topic, partition)] = OffsetAndMetadata(offset, metadata, commit_ts,
                                                            expire_ts, leader_epoch)
    if pos != len(payload):
        raise ValueError(f"{len(payload) - pos} trailing bytes in record")
    if not offsets:
        del state[group_id]


def replay(data: bytes) -> tuple[OffsetState, int]:
    """Decode a whole file: the state and the length of its valid prefix.

    Stops at the first record that is cut short or fails its CRC (a torn tail).
    """
    if not data.startswith(MAGIC):
        raise OffsetLogError("not a trio-broker offsets file (bad magic)")
    state: OffsetState = {}
    view = memoryview(data)
    pos = len(MAGIC)
    end = len(data)
    while pos < end:
        if end - pos < _HEAD.size:
            break
        length, crc = _HEAD.unpack_from(view, pos)
        if length < 4 or length > MAX_RECORD_BYTES or pos + 4 + length > end:
            break
        payload = view[pos + _HEAD.size:pos + 4 + length]
        if crc32c(payload) != crc:
            break
        try:
            _decode_payload(payload, state)
        except (struct.error, ValueError, UnicodeDecodeError) as exc:
            # The CRC matched, so these bytes were written this way: a format bug, not a tear.
            raise OffsetLogError(f"record at byte {pos} is malformed: {exc}") from exc
        pos += 4 + length
    return state, pos


class OffsetLog(RecordFile[OffsetState]):
    """The commit log file of one broker: recover, append (fsynced), compact, close (the
    durability is ``RecordFile``'s; the coordinator runs calls in a worker thread)."""

    MAGIC = MAGIC
    FILE_NAME = FILE_NAME
    TMP_NAME = TMP_NAME
    WHAT = "offsets file"

    def __init__(self, directory: Path, *, compact_bytes: int = DEFAULT_COMPACT_BYTES) -> None:
        super().__init__(directory, compact_bytes=compact_bytes)

    def replay(self, data: bytes) -> tuple[OffsetState, int]:
        return replay(data)

    def live_records(self, state: OffsetState) -> Iterator[bytes]:
        for group_id, offsets in state.items():
            items = list(offsets.items())
            for i in range(0, len(items), _ENTRIES_PER_RECORD):
                yield encode_record(group_id, items[i:i + _ENTRIES_PER_RECORD])

    def describe(self, state: OffsetState) -> str:
        return (f"{len(state)} groups, "
                f"{sum(len(o) for o in state.values())} committed partitions")

    def not_open(self) -> Exception:
        return OffsetLogError(f"offsets file {self.path} is not open")
