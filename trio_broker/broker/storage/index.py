"""Sparse offset and time indexes of one segment (Kafka's ``OffsetIndex`` and ``TimeIndex``).

Why sparse: a fetch needs the file position of an offset, and a ListOffsets request the offset of
a timestamp. One entry every ``index.interval.bytes`` bounds the header scan that finishes the
lookup to a few KiB, while the index stays small enough to keep entirely in memory.

File formats (big-endian, append-only, no preallocation, so the file length is the entry count):

    <base>.index      8 bytes per entry: relative offset i32 (offset - segment base), position i32
    <base>.timeindex 12 bytes per entry: timestamp i64, relative offset i32

An offset entry points at the first byte of a batch whose base offset is the entry's offset.
A time entry (T, O) says: every record before the batch starting at offset O has a timestamp <= T
(T is the largest timestamp seen so far, O the base offset of the batch that carried it), so
entries are appended only when T grows.

Index files are derived data: when one looks wrong (length not a multiple of the entry size,
entries not increasing, a position beyond the log file), the segment rebuilds it from the log.

Why no descriptor is kept open: the entries live in memory, so the file is only ever written, and
only needs to be complete where the log is known durable. New entries are written when the
segment is flushed (before the fsync that moves the recovery point past them), rolled or closed,
by opening the file for that write alone, as Kafka's memory-mapped indexes reach the disk only on
a flush. A crash loses nothing: segments above the recovery point are rebuilt from the log. A
partition therefore holds one descriptor (its active segment's log file) instead of three, which
is what lets 10,000 partitions fit a 20,000-descriptor limit.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

from .files import write_all

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class IndexCorruptError(Exception):
    """An index file cannot be trusted; the caller rebuilds it from the log."""


class _IndexFile:
    """The file behind an in-memory index: ``_persisted`` entries of it are in the file."""

    entry_size: int
    path: Path
    _persisted: int

    def __len__(self) -> int:
        raise NotImplementedError

    def _start(self, create: bool) -> None:
        """A new segment's index file is created empty (as Kafka's); an existing one is read
        by ``load``."""
        self._persisted = 0
        if create:
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644))

    def _encode(self, start: int) -> bytes:
        raise NotImplementedError

    @property
    def pending(self) -> int:
        """Entries in memory not yet written to the file."""
        return len(self) - self._persisted

    def _read(self) -> bytes:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return b""  # an index lost in a crash: the tail scan or a rebuild covers for it
        try:
            return _read_whole(fd)
        finally:
            os.close(fd)

    def open_written(self) -> int:
        """Write the pending entries and return the file, open, for the caller to fsync and
        close (``LogSegment.sync_fds``)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if self.pending:
                write_all(fd, self._encode(self._persisted), self._persisted * self.entry_size)
                self._persisted = len(self)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def write_pending(self) -> None:
        """Write the entries not yet in the file (no fsync)."""
        if self.pending:
            os.close(self.open_written())

    def _truncate_file(self, count: int) -> None:
        if count < self._persisted:
            os.truncate(self.path, count * self.entry_size)
            self._persisted = count

    def persist_all(self) -> None:
        """Rewrite the file from memory in one write (after a rebuild)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, 0)
            write_all(fd, self._encode(0), 0)
        finally:
            os.close(fd)
        self._persisted = len(self)

    def close(self) -> None:
        """Write what is pending; nothing stays open."""
        self.write_pending()


class OffsetIndex(_IndexFile):
    entry_size = _OFFSET_ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int, *,
                 create: bool = True) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.entry_size)
        self.relative_offsets = array("i")
        self.positions = array("i")
        self._start(create)

    def __len__(self) -> int:
        return len(self.positions)

    @property
    def is_full(self) -> bool:
        return len(self.positions) >= self.max_entries

    def load(self, log_size: int) -> None:
        """Read the file into memory, raising IndexCorruptError if it cannot be trusted."""
        data = self._read()
        if len(data) % self.entry_size:
            raise IndexCorruptError(f"{self.path.name}: length {len(data)} is not a multiple of 8")
        pairs = array("i", data)
        if sys.byteorder == "little":
            pairs.byteswap()
        offsets, positions = pairs[0::2], pairs[1::2]
        for previous, current in ((offsets, offsets[1:]), (positions, positions[1:])):
            if any(b <= a for a, b in zip(previous, current)):
                raise IndexCorruptError(f"{self.path.name}: entries are not increasing")
        if offsets and (offsets[0] < 0 or positions[0] < 0 or positions[-1] >= log_size):
            raise IndexCorruptError(
                f"{self.path.name}: entries point outside the {log_size}-byte log file"
            )
        self.relative_offsets, self.positions = offsets, positions
        self._persisted = len(positions)

    def append(self, offset: int, position: int) -> None:
        """Add an entry in memory; the file gets it at the next flush, roll or close."""
        self.relative_offsets.append(offset - self.base_offset)
        self.positions.append(position)

    def lookup(self, offset: int) -> int:
        """File position of the last indexed batch starting at or before ``offset`` (else 0)."""
        i = bisect_right(self.relative_offsets, offset - self.base_offset) - 1
        return self.positions[i] if i >= 0 else 0

    def entry_at_or_before_position(self, position: int) -> tuple[int, int]:
        """(position, offset) of the last indexed batch starting at or before ``position``;
        (0, base offset) without one."""
        i = bisect_right(self.positions, position) - 1
        if i < 0:
            return 0, self.base_offset
        return self.positions[i], self.base_offset + self.relative_offsets[i]

    @property
    def last_position(self) -> int:
        return self.positions[-1] if self.positions else 0

    def truncate_entries(self, count: int) -> None:
        self._truncate_file(count)
        del self.relative_offsets[count:]
        del self.positions[count:]

    def reset(self) -> None:
        self.relative_offsets = array("i")
        self.positions = array("i")

    def _encode(self, start: int) -> bytes:
        """Entries from ``start`` as the file holds them (big-endian offset, position pairs),
        interleaved by two strided copies: a segment roll encodes up to ~260,000 entries on
        the event loop, which a Python loop per entry would hold many times longer
        (docs/benchmarks.md, "How cost grows")."""
        relative, positions = self.relative_offsets[start:], self.positions[start:]
        pairs = array("i", bytes(8 * len(positions)))
        pairs[0::2] = relative
        pairs[1::2] = positions
        if sys.byteorder == "little":
            pairs.byteswap()
        return pairs.tobytes()


class TimeIndex(_IndexFile):
    entry_size = _TIME_ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int, *,
                 create: bool = True) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.entry_size)
        self.timestamps = array("q")
        self.relative_offsets = array("i")
        self._start(create)

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def is_full(self) -> bool:
        return len(self.timestamps) >= self.max_entries

    @property
    def last_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def load(self, next_relative_offset: int | None = None) -> None:
        data = self._read()
        if len(data) % self.entry_size:
            raise IndexCorruptError(f"{self.path.name}: length {len(data)} is not a multiple of 12")
        timestamps = array("q")
        offsets = array("i")
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            if timestamps and (ts <= timestamps[-1] or rel < offsets[-1]):
                raise IndexCorruptError(f"{self.path.name}: entries are not increasing")
            timestamps.append(ts)
            offsets.append(rel)
        if offsets and (
            offsets[0] < 0
            or (next_relative_offset is not None and offsets[-1] >= next_relative_offset)
        ):
            raise IndexCorruptError(f"{self.path.name}: entries point outside the segment")
        self.timestamps, self.relative_offsets = timestamps, offsets
        self._persisted = len(timestamps)

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Add an entry in memory if ``timestamp`` is newer than the last one."""
        if self.timestamps and timestamp <= self.timestamps[-1]:
            return False
        self.timestamps.append(timestamp)
        self.relative_offsets.append(offset - self.base_offset)
        return True

    def lookup_before(self, timestamp: int) -> int:
        """Offset of the last entry with a timestamp strictly below ``timestamp`` (else base).

        Every record before that entry's batch is older than ``timestamp``, so a scan for the
        first record at or after it can start there.
        """
        i = bisect_left(self.timestamps, timestamp) - 1
        return self.base_offset + (self.relative_offsets[i] if i >= 0 else 0)

    def truncate_entries(self, count: int) -> None:
        self._truncate_file(count)
        del self.timestamps[count:]
        del self.relative_offsets[count:]

    def reset(self) -> None:
        self.timestamps = array("q")
        self.relative_offsets = array("i")

    def _encode(self, start: int) -> bytes:
        """Entries from ``start`` as the file holds them (big-endian 8-byte timestamp, 4-byte
        offset): each byte column copied into place by a strided slice (12 copies, not a
        ``pack`` per entry, as the roll encodes them on the event loop: docs/benchmarks.md,
        "How cost grows")."""
        timestamps, offsets = self.timestamps[start:], self.relative_offsets[start:]
        if sys.byteorder == "little":
            timestamps.byteswap()
            offsets.byteswap()
        ts_bytes, offset_bytes = timestamps.tobytes(), offsets.tobytes()
        out = bytearray(self.entry_size * len(timestamps))
        for k in range(8):
            out[k::12] = ts_bytes[k::8]
        for k in range(4):
            out[8 + k::12] = offset_bytes[k::4]
        return bytes(out)


def _read_whole(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    chunks = []
    position = 0
    while position < size:
        chunk = os.pread(fd, size - position, position)
        if not chunk:
            break
        chunks.append(chunk)
        position += len(chunk)
    return b"".join(chunks)
