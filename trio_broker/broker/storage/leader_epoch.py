"""Leader epochs of one partition (Kafka's ``LeaderEpochFileCache``): epoch -> its first offset.

Why: a consumer that has read up to some offset under leader epoch E asks, after a leader change
or a restart, where E ended (OffsetForLeaderEpoch, Fetch's diverging-epoch check). If the log
was truncated below that point, the client truncates too, instead of silently skipping records.
The cache answers that from a short list of (epoch, start offset) entries, strictly increasing in
both; every batch appended under an epoch carries it in ``partitionLeaderEpoch``.

The file is Kafka's ``leader-epoch-checkpoint`` in the partition directory: a version line
``0``, the entry count, then ``<epoch> <start offset>`` per line. A new epoch is written durably
before it is used (``assign``), as Kafka does; truncations are written without an fsync (a stale
file after a crash holds extra entries that the next load truncates again).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import NamedTuple

from .files import atomic_write, write_new

LOGGER = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
#: Kafka's "no epoch" / "no offset" answers (``OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH*``)
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """The epoch entries of one partition, oldest first. Not thread safe: ``Log`` locks."""

    def __init__(self, directory: Path, *, new: bool = False) -> None:
        """``new``: the partition directory was just made, so there is no file to read."""
        self.path = directory / LEADER_EPOCH_CHECKPOINT
        self._entries: list[EpochEntry] = []
        #: the file was written without an fsync by ``assign(durable=False)``: the log's next
        #: flush or clean close syncs it
        self.unsynced = False
        #: how many times the file was written (a flush clears ``unsynced`` only for the
        #: version it synced)
        self.version = 0
        #: no file exists yet (a new partition's): the first write makes it directly, as no
        #: reader can see it half written before the partition is answered
        self._no_file = new
        if new:
            return
        try:
            entries = _read(self.path)
        except (OSError, ValueError) as exc:
            LOGGER.warning("Ignoring the unreadable leader epoch checkpoint %s: %s", self.path, exc)
            entries = []
        for entry in entries:
            self._assign(entry)

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def assign(self, epoch: int, start_offset: int, *, durable: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; written durably if it changed
        anything. Entries at or after it (by epoch or offset) are replaced, as in Kafka.
        ``durable=False`` (a new partition's first epoch) leaves the fsync to the log's first
        flush: ``durability.py`` says why that is as safe."""
        if not self._assign(EpochEntry(epoch, start_offset)):
            return False
        self._write(durable=durable, raise_errors=True)
        self.unsynced = not durable
        return True

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"invalid leader epoch entry {entry}")
        latest = self._entries[-1] if self._entries else None
        if latest is not None and entry.epoch == latest.epoch and \
                entry.start_offset >= latest.start_offset:
            return False
        dropped = []
        while self._entries and (self._entries[-1].epoch >= entry.epoch
                                 or self._entries[-1].start_offset >= entry.start_offset):
            dropped.append(self._entries.pop())
        if len(dropped) > 1 or (dropped and dropped[0].start_offset != entry.start_offset):
            # (an epoch under which nothing was written is replaced silently, as in Kafka)
            LOGGER.warning("Leader epoch entry %s replaced the conflicting entries %s in %s",
                           entry, dropped, self.path)
        self._entries.append(entry)
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as Kafka's ``endOffsetFor``: the largest known epoch <= the
        requested one and the start offset of the next epoch, or the log end offset for the
        latest epoch; (-1, -1) for an undefined or a too-new epoch."""
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        higher = next((e for e in self._entries if e.epoch > requested_epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = None
        for entry in self._entries:
            if entry.epoch > requested_epoch:
                break
            floor = entry
        if floor is None:  # older than anything kept: the first kept epoch's start
            return requested_epoch, higher.start_offset
        return floor.epoch, higher.start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch under which ``offset`` was written, if the cache covers it."""
        found = None
        for entry in self._entries:
            if entry.start_offset == offset:
                return entry.epoch
            if entry.start_offset > offset:
                return found
            found = entry.epoch
        return found

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at or after ``end_offset`` (the log was cut back to it)."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
        self._write(durable=False, raise_errors=False)

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop epochs wholly before ``start_offset``; the last of them now starts there."""
        removed = [e for e in self._entries if e.start_offset <= start_offset]
        if not removed:
            return
        kept = [e for e in self._entries if e.start_offset > start_offset]
        self._entries = [EpochEntry(removed[-1].epoch, start_offset), *kept]
        if removed == [self._entries[0]]:
            return  # already started exactly there
        self._write(durable=False, raise_errors=False)

    def _write(self, *, durable: bool, raise_errors: bool) -> None:
        """Replace the file; a failed truncation is only logged (the next load redoes it from
        the log), a failed new epoch raises OSError (it must be on disk before it is used)."""
        lines = ["0", str(len(self._entries))]
        lines += [f"{e.epoch} {e.start_offset}" for e in self._entries]
        self.version += 1
        data = ("\n".join(lines) + "\n").encode()
        try:
            if self._no_file and not durable:
                write_new(self.path, data)
                self._no_file = False
            else:
                atomic_write(self.path, data, durable=durable)
        except OSError as exc:
            if raise_errors:
                raise
            LOGGER.warning("Rewriting %s failed: %s", self.path, exc)


def _read(path: Path) -> list[EpochEntry]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    lines = text.split("\n")
    if len(lines) < 2 or lines[0].strip() != "0":
        raise ValueError("unknown leader epoch checkpoint version")
    count = int(lines[1])
    entries = []
    for line in lines[2:2 + count]:
        epoch, offset = line.split()
        entries.append(EpochEntry(int(epoch), int(offset)))
    if len(entries) != count:
        raise ValueError(f"expected {count} entries, found {len(entries)}")
    return entries
