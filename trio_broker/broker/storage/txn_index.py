"""Aborted transactions of one segment (Kafka's ``TransactionIndex``, the ``.txnindex`` file).

Why an index: a ``read_committed`` consumer receives aborted records like any others and drops
them itself, so every fetch must tell it which producers' records in the fetched range belong to
aborted transactions. Finding them by decoding the log would put per-record work on the fetch
path; instead each abort marker adds one entry here, to the segment holding the marker, and a
fetch looks entries up from the segment of its fetch offset on.

File format (big-endian, append-only, 34 bytes per entry, created with the first entry)::

    version i16 (0) | producer id i64 | first offset i64 | last offset i64 | last stable offset i64

``first offset`` is the transaction's first record in this partition, ``last offset`` the abort
marker's offset, and ``last stable offset`` the partition's LSO just after the abort: once an
entry's LSO is past a fetch's upper bound, no later entry can overlap that fetch, so the search
stops there. The file is derived data, rebuilt by recovery from the markers in the log.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left
from pathlib import Path
from typing import NamedTuple

from .files import write_all
from .index import IndexCorruptError

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The aborted transactions whose markers lie in one segment; the file is created with the
    first entry and opened only while written (no descriptor stays open)."""

    entry_size = _ENTRY.size

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entries: list[AbortedTxn] = []
        self._last_offsets: list[int] = []
        #: whether the file exists (loaded or written), so flushes fsync it
        self._exists = False

    def __len__(self) -> int:
        return len(self.entries)

    def _open(self) -> int:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self._exists = True
        return fd

    def load(self) -> None:
        """Read the file if there is one; raises IndexCorruptError if it cannot be trusted."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        self._exists = True
        if len(data) % self.entry_size:
            raise IndexCorruptError(
                f"{self.path.name}: length {len(data)} is not a multiple of {self.entry_size}")
        entries = []
        previous = self.base_offset
        for version, producer_id, first, last, lso in _ENTRY.iter_unpack(data):
            if version != _VERSION or last < previous or first > last or producer_id < 0:
                raise IndexCorruptError(f"{self.path.name}: entry for producer {producer_id} "
                                        f"at offsets {first}..{last} cannot be right")
            previous = last
            entries.append(AbortedTxn(producer_id, first, last, lso))
        self.entries = entries
        self._last_offsets = [e.last_offset for e in entries]

    def append(self, entry: AbortedTxn, *, persist: bool = True) -> None:
        """Add an abort whose marker is at ``entry.last_offset`` (in this segment). Written at
        once: aborts are rare, and the entry must be in the file before the marker is."""
        if persist:
            fd = self._open()
            try:
                write_all(fd, _ENTRY.pack(_VERSION, *entry), len(self.entries) * self.entry_size)
            finally:
                os.close(fd)
        self.entries.append(entry)
        self._last_offsets.append(entry.last_offset)

    def truncate_entries(self, count: int) -> None:
        """Forget entries from ``count`` on (a failed append being rolled back)."""
        if self._exists:
            os.truncate(self.path, count * self.entry_size)
        del self.entries[count:]
        del self._last_offsets[count:]

    def reset(self) -> None:
        """Forget every entry and empty the file (recovery rebuilds it)."""
        self.entries = []
        self._last_offsets = []
        if self._exists or self.path.exists():
            os.truncate(self.path, 0)
            self._exists = True

    def persist_all(self) -> None:
        """Rewrite the file from memory in one write (after a rebuild); no file if empty."""
        if not self.entries and not self._exists:
            return
        fd = self._open()
        try:
            os.ftruncate(fd, 0)
            write_all(fd, b"".join(_ENTRY.pack(_VERSION, *e) for e in self.entries), 0)
        finally:
            os.close(fd)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping [fetch_offset, upper_bound), and whether the search
        is complete (no later segment can hold one that overlaps)."""
        found = []
        for i in range(bisect_left(self._last_offsets, fetch_offset), len(self.entries)):
            entry = self.entries[i]
            if entry.first_offset < upper_bound:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def sync_fd(self) -> int | None:
        """The file opened to fsync (owned by the caller), or None without a file."""
        return self._open() if self._exists else None

    def delete(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


def collect_aborted(indexes: list[TransactionIndex], fetch_offset: int,
                    upper_bound: int) -> list[AbortedTxn]:
    """Kafka's ``collectAbortedTransactions``: search ``indexes`` (the segments from the one
    holding ``fetch_offset`` on, oldest first) until one says the search is complete."""
    out: list[AbortedTxn] = []
    for index in indexes:
        if not index.entries:
            continue
        found, complete = index.collect(fetch_offset, upper_bound)
        out.extend(found)
        if complete:
            break
    return out


__all__ = ["TXN_INDEX_SUFFIX", "AbortedTxn", "TransactionIndex", "collect_aborted"]
