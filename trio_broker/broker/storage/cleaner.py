"""Compacting one partition log (Kafka's ``Cleaner``): keep the latest value of every key.

Why it is built this way:

- It runs in a worker thread and never holds the log's lock while it reads or writes: it works
  on the log's inactive segments, which are never appended to, and takes the lock only for the
  swap at the end (``Log.replace_segments``). The active segment is never cleaned.
- Two passes, as in Kafka. The *offset map* (``build_offset_map``) reads the dirty section
  (from the cleaner checkpoint to the first uncleanable offset) and remembers the last offset of
  every key, bounded by ``log.cleaner.dedupe.buffer.size`` (24 bytes per entry, as Kafka counts
  it; the map stops at a segment boundary when full, and the next pass goes on from there). Like
  Kafka's ``SkimpyOffsetMap`` it holds a 16-byte MD5 digest of each key, never the key itself, so
  an entry's size does not grow with the key: a key of at most 16 bytes stands for itself (no
  hashing cost; it can equal a longer key's digest only with MD5's collision odds). Then
  every segment from the log start to the map's end is rewritten (``clean_segments``), merged
  into groups of at most ``segment.bytes``: a record stays if no later offset holds its key.
- Offsets are kept. A batch keeps its base offset, last offset delta, producer id, epoch, base
  sequence, timestamps and codec; only its records and CRC change, so compacted logs have gaps
  that every reader already skips. A batch all of whose records go is dropped, unless it is the
  newest batch of its producer (its sequence state must survive a reload): then it stays empty.
- Tombstones (null values) stay ``delete.retention.ms`` after their batch was first cleaned,
  then go (KIP-534): the first cleaning that keeps a batch holding a tombstone rewrites it with
  Kafka's *delete horizon* (attribute bit 6 set, the base timestamp = cleaning time +
  ``delete.retention.ms``, each record's timestamp delta re-based so record timestamps stay), and
  a later cleaning past that horizon drops its tombstones. Each batch carries its own time, so
  merging segments never shortens a tombstone's stay. Records without a key go, as Kafka's
  cleaner drops them.
- Transactions, by Kafka's rules (``TxnTracker``): the dirty section ends at the last stable
  offset, so every transaction in it is finished. Batches of aborted transactions (known from the
  aborted-transaction indexes) are removed and never enter the offset map, so an aborted value
  never replaces a committed one; committed transactional records are compacted like any other.
  A commit or abort marker stays while any batch of its transaction remains; after that it gets
  a delete horizon at its next cleaning and goes once the horizon has passed (as tombstones).
- Crash safety: a group is written as an ordinary segment into ``.cleaning-<base>/`` inside the
  partition directory and fsynced, then committed by renaming that directory to
  ``.swap-<base>-<end>/``; the log completes the swap (``segment_swap.py``, which recovery also
  runs after a crash), so the cleaner never touches the segments the log serves.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import attrs

from ...protocol.batch import BATCH_HEADER_SIZE, BatchHeader, finish_batch, read_batch_header
from ...protocol.compression import Compression, compress, decompress
from ...protocol.records import read_varint, write_varint
from .config import LogConfig
from .files import fsync_dir, fsync_fd, replace
from .segment import LogSegment
from .segment_swap import CLEANING_PREFIX, remove_dir, swap_dir_name
from .txn_index import AbortedTxn

LOGGER = logging.getLogger(__name__)

#: Kafka sizes the offset map at 24 bytes an entry (a 16-byte hash and an 8-byte offset)
OFFSET_MAP_ENTRY_BYTES = 24
_MAX_INFLATED = 256 * 1024 * 1024
_MAX_RELATIVE_OFFSET = 2**31 - 1


@attrs.define
class CleanerStats:
    """What one cleaning did (metrics and logs)."""

    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_removed: int = 0
    segments_cleaned: int = 0
    #: the earliest delete horizon among the batches kept (None: no batch kept has one), so a
    #: log with nothing dirty is cleaned again once its first tombstones may go
    earliest_horizon: int | None = None


class Throttler:
    """``log.cleaner.io.max.bytes.per.second`` (Kafka's ``Throttler``): one for all cleaner
    threads. After each batch it compares the bytes done in the current period with the desired
    rate and sleeps the calling thread (holding the others) until the period's rate is down to
    it, so a cleaning never runs ahead by more than a batch; a period ends after
    ``check_interval_s`` (an idle cleaner earns no burst). The rate may change while cleanings
    run (dynamic broker config)."""

    def __init__(self, bytes_per_second: float, check_interval_s: float = 0.3) -> None:
        self.bytes_per_second = bytes_per_second
        self.check_interval_s = check_interval_s
        self._lock = threading.Lock()
        self._period_start = time.monotonic()
        self._bytes = 0

    def maybe_throttle(self, nbytes: int) -> None:
        # Performance: hand the GIL over after every batch, so the event loop thread (and the
        # request handlers) wait for at most one batch of cleaning, not a 5 ms switch interval.
        time.sleep(0)
        rate = self.bytes_per_second
        if rate <= 0 or rate >= sys.float_info.max:  # Kafka's default: Double.MAX_VALUE
            return
        with self._lock:
            self._bytes += nbytes
            now = time.monotonic()
            due = self._bytes / rate - (now - self._period_start)
            if due > 0:
                time.sleep(due)
                now = time.monotonic()
            if now - self._period_start >= self.check_interval_s:
                self._period_start = now
                self._bytes = 0


def iter_records(data: bytes, count: int) -> Iterator[tuple[int, int, int, bytes | None, bool]]:
    """(start, end, offset delta, key, is tombstone) of each record in a records block."""
    pos = 0
    for _ in range(count):
        length, body = read_varint(data, pos)
        end = body + length
        p = body + 1  # attributes
        _, p = read_varint(data, p)  # timestamp delta
        offset_delta, p = read_varint(data, p)
        key_len, p = read_varint(data, p)
        key = None
        if key_len >= 0:
            key = data[p:p + key_len]
            p += key_len
        value_len, p = read_varint(data, p)
        yield pos, end, offset_delta, key, value_len < 0
        pos = end


#: KIP-534: the batch's base timestamp is its delete horizon (set by the cleaner)
DELETE_HORIZON_BIT = 0x40


def delete_horizon(header: BatchHeader) -> int | None:
    """When the batch's tombstones (or its marker) may go, if a cleaning has set it."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON_BIT else None


def _rebased(block: bytes, starts: Sequence[tuple[int, int]], old_base: int,
             new_base: int) -> bytes:
    """The records ``block[start:end]`` with timestamp deltas moved from ``old_base`` to
    ``new_base`` (the record timestamps stay)."""
    out = bytearray()
    shift = old_base - new_base
    for start, _end in starts:
        length, body = read_varint(block, start)
        end = body + length
        delta, rest = read_varint(block, body + 1)
        record = bytearray(block[body:body + 1])
        write_varint(record, delta + shift)
        record += block[rest:end]
        write_varint(out, len(record))
        out += record
    return bytes(out)


#: keys up to this size are their own map key; longer ones are replaced by their MD5 digest
MAP_KEY_BYTES = 16


def map_key(key: bytes) -> bytes:
    """The offset map's key for a record key (at most ``MAP_KEY_BYTES`` long)."""
    if len(key) <= MAP_KEY_BYTES:
        return key
    return hashlib.md5(key, usedforsecurity=False).digest()


def _records_block(raw: bytes, header: BatchHeader) -> bytes:
    payload = raw[BATCH_HEADER_SIZE:header.size]
    if header.compression == Compression.NONE:
        return payload
    return decompress(header.compression, payload, max_output=_MAX_INFLATED)


def _batches(segment: LogSegment) -> Iterator[tuple[BatchHeader, bytes]]:
    for pos, header in segment.scan():
        yield header, os.pread(segment.fd, header.size, pos)


class TxnTracker:
    """Which batches belong to aborted transactions, and which transactions kept data, while
    batches are read in offset order (Kafka's ``CleanedTransactionMetadata``)."""

    def __init__(self, aborted: Sequence[AbortedTxn]) -> None:
        self._pending = deque(sorted(aborted, key=lambda a: a.first_offset))
        self._aborting: set[int] = set()
        #: producer id -> whether its current transaction kept a batch
        self._kept: dict[int, bool] = {}

    def is_aborted(self, header: BatchHeader) -> bool:
        """For a data batch: whether an aborted transaction holds it."""
        pending = self._pending
        while pending and pending[0].first_offset <= header.base_offset:
            self._aborting.add(pending.popleft().producer_id)
        return header.is_transactional and header.producer_id in self._aborting

    def end(self, header: BatchHeader) -> bool:
        """For a control batch: whether its transaction kept any batch."""
        self.is_aborted(header)
        self._aborting.discard(header.producer_id)
        return self._kept.pop(header.producer_id, False)

    def kept(self, header: BatchHeader) -> None:
        if header.is_transactional and not header.is_control:
            self._kept[header.producer_id] = True


def build_offset_map(segments: Sequence[LogSegment], start: int, end: int, capacity: int,
                     throttler: Throttler, stats: CleanerStats,
                     aborted: Sequence[AbortedTxn] = ()) -> tuple[dict[bytes, int], int]:
    """Key -> last offset over the dirty segments in [start, end); returns the map and the
    offset it covers up to (a segment boundary; below ``end`` when the map filled up)."""
    offsets: dict[bytes, int] = {}
    txns = TxnTracker(aborted)
    for i, segment in enumerate(segments):
        if segment.base_offset >= end:
            break
        if segment.next_offset <= start:
            continue
        if offsets and len(offsets) + (segment.next_offset - segment.base_offset) > capacity:
            return offsets, segment.base_offset
        for header, raw in _batches(segment):
            stats.bytes_read += header.size
            throttler.maybe_throttle(header.size)
            if header.is_control:
                txns.end(header)
                continue
            if txns.is_aborted(header) or header.last_offset < start:
                continue
            base = header.base_offset
            for _s, _e, delta, key, _t in iter_records(_records_block(raw, header),
                                                       header.records_count):
                if key is not None and base + delta >= start:
                    offsets[key if len(key) <= MAP_KEY_BYTES else map_key(key)] = base + delta
        if i + 1 < len(segments) and segments[i + 1].base_offset >= end:
            break
    last = next((s for s in segments if s.base_offset >= end), None)
    return offsets, end if last is None else min(end, last.base_offset)


def filter_batch(header: BatchHeader, raw: bytes, offsets: Mapping[bytes, int], *,
                 now_ms: int, delete_retention_ms: int, keep_empty: bool,
                 stats: CleanerStats) -> bytes | None:
    """The data batch with superseded records (and tombstones past the batch's delete horizon,
    and keyless records) removed, and a delete horizon set if it keeps a tombstone without one;
    the same bytes if nothing changes, None if it goes entirely."""
    block = _records_block(raw, header)
    kept: list[tuple[int, int]] = []
    base = header.base_offset
    horizon = delete_horizon(header)
    tombstones_expired = horizon is not None and now_ms >= horizon
    has_tombstone = False
    total = 0
    for start, end, delta, key, tombstone in iter_records(block, header.records_count):
        total += 1
        if key is None:
            continue
        latest = offsets.get(key if len(key) <= MAP_KEY_BYTES else map_key(key))
        if latest is not None and base + delta < latest:
            continue
        if tombstone:
            if tombstones_expired:
                continue
            has_tombstone = True
        kept.append((start, end))
    stats.records_read += total
    stats.records_removed += total - len(kept)
    set_horizon = has_tombstone and horizon is None
    if len(kept) == total and not set_horizon:
        return raw
    if not kept and not keep_empty:
        return None
    attributes, base_timestamp = header.attributes, header.base_timestamp
    if set_horizon:
        attributes |= DELETE_HORIZON_BIT
        base_timestamp = now_ms + delete_retention_ms
        joined = _rebased(block, kept, header.base_timestamp, base_timestamp)
    else:
        joined = b"".join(block[start:end] for start, end in kept)
    body = bytearray(BATCH_HEADER_SIZE)
    body += compress(header.compression, joined) if kept else b""
    finish_batch(body, attributes=attributes, records_count=len(kept),
                 base_timestamp=base_timestamp, max_timestamp=header.max_timestamp,
                 base_offset=base, producer_id=header.producer_id,
                 producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
                 partition_leader_epoch=header.partition_leader_epoch,
                 last_offset_delta=header.last_offset_delta)
    return bytes(body)


def _marker(header: BatchHeader, raw: bytes, *, had_data: bool, keep_empty: bool, now_ms: int,
            delete_retention_ms: int) -> bytes | None:
    """A commit/abort marker stays while its transaction kept data; then it gets a delete
    horizon, and goes once that has passed (unless it is its producer's newest batch)."""
    horizon = delete_horizon(header)
    if had_data or (horizon is not None and now_ms < horizon):
        return raw
    if horizon is not None:
        return raw if keep_empty else None
    block = _records_block(raw, header)
    starts = [(start, end) for start, end, *_ in iter_records(block, header.records_count)]
    new_base = now_ms + delete_retention_ms
    body = bytearray(BATCH_HEADER_SIZE)
    body += compress(header.compression,
                     _rebased(block, starts, header.base_timestamp, new_base))
    finish_batch(body, attributes=header.attributes | DELETE_HORIZON_BIT,
                 records_count=header.records_count, base_timestamp=new_base,
                 max_timestamp=header.max_timestamp, base_offset=header.base_offset,
                 producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                 base_sequence=header.base_sequence,
                 partition_leader_epoch=header.partition_leader_epoch,
                 last_offset_delta=header.last_offset_delta)
    return bytes(body)


def _emptied(header: BatchHeader) -> bytes:
    """The batch with no records left (its producer's sequence state must survive)."""
    body = bytearray(BATCH_HEADER_SIZE)
    finish_batch(body, attributes=header.attributes, records_count=0,
                 base_timestamp=header.base_timestamp, max_timestamp=header.max_timestamp,
                 base_offset=header.base_offset, producer_id=header.producer_id,
                 producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
                 partition_leader_epoch=header.partition_leader_epoch,
                 last_offset_delta=header.last_offset_delta)
    return bytes(body)


def group_segments(segments: Sequence[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    """Consecutive segments merged while their sizes fit ``segment.bytes`` (Kafka's
    ``groupSegmentsBySize``) and their offsets fit one index."""
    groups: list[list[LogSegment]] = []
    for segment in segments:
        if groups:
            group = groups[-1]
            size = sum(s.size for s in group) + segment.size
            if size <= max_bytes and (
                    segment.next_offset - group[0].base_offset <= _MAX_RELATIVE_OFFSET):
                group.append(segment)
                continue
        groups.append([segment])
    return groups


def _mtime_ms(segment: LogSegment) -> int:
    return os.fstat(segment.fd).st_mtime_ns // 1_000_000


def clean_group(directory: Path, group: Sequence[LogSegment], end: int, config: LogConfig,
                offsets: Mapping[bytes, int], *, now_ms: int,
                producer_last: Mapping[int, int], throttler: Throttler,
                stats: CleanerStats, txns: TxnTracker | None = None) -> Path:
    """Write the cleaned form of ``group`` (ending at offset ``end``) and commit it as a swap
    directory; returns that directory for ``Log.replace_segments``."""
    base = group[0].base_offset
    work = directory / f"{CLEANING_PREFIX}{base:020d}"
    if work.exists():
        remove_dir(work)
    work.mkdir()
    out = LogSegment(work, base, config)
    modified = _mtime_ms(group[-1])  # Kafka keeps the last source's modification time
    retention = config.delete_retention_ms
    txns = txns or TxnTracker(())
    try:
        for source in group:
            for entry in source.txn_index.entries:
                out.txn_index.append(entry)
            for header, raw in _batches(source):
                stats.bytes_read += header.size
                throttler.maybe_throttle(header.size)
                keep_empty = producer_last.get(header.producer_id) == header.last_offset
                batch: bytes | None
                if header.is_control:
                    had_data = txns.end(header)
                    batch = _marker(header, raw, had_data=had_data, keep_empty=keep_empty,
                                    now_ms=now_ms, delete_retention_ms=retention)
                elif txns.is_aborted(header):
                    stats.records_read += header.records_count
                    stats.records_removed += header.records_count
                    batch = _emptied(header) if keep_empty else None
                else:
                    batch = filter_batch(header, raw, offsets, now_ms=now_ms,
                                         delete_retention_ms=retention, keep_empty=keep_empty,
                                         stats=stats)
                if batch is None:
                    continue
                kept_header = header if batch is raw else read_batch_header(batch)
                if batch is raw or kept_header.records_count:
                    txns.kept(header)
                horizon = delete_horizon(kept_header)
                # a horizon passed already dropped what it could: only later ones call the
                # cleaner back (else a kept flagged batch would be cleaned again and again)
                if horizon is not None and horizon > now_ms and (
                        stats.earliest_horizon is None or horizon < stats.earliest_horizon):
                    stats.earliest_horizon = horizon
                out.append(batch, header.base_offset, header.next_offset, header.max_timestamp,
                           now_ms)
                stats.bytes_written += len(batch)
                throttler.maybe_throttle(len(batch))
        out.on_become_inactive()
        for fd in out.sync_fds():
            try:
                fsync_fd(fd)
            finally:
                os.close(fd)
    finally:
        out.close()
    os.utime(out.log_path, ns=(modified * 1_000_000, modified * 1_000_000))
    fsync_dir(work)
    swap = directory / swap_dir_name(base, end)
    replace(work, swap)  # the commit point
    fsync_dir(directory)
    stats.segments_cleaned += len(group)
    return swap


__all__ = ["DELETE_HORIZON_BIT", "CleanerStats", "Throttler", "TxnTracker", "build_offset_map",
           "clean_group", "delete_horizon", "filter_batch", "group_segments", "iter_records",
           "map_key"]
