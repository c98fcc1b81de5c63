"""A partition log (Kafka's ``UnifiedLog`` on one broker): ordered segments in one directory.

Why it is built this way:

- Append never decodes records. The caller has run ``validate_batch``; the log checks producer
  state, writes the next offset into the batch header, optionally stamps LogAppendTime, and
  writes the batch with one positional write. A failed write is rolled back before the error is
  raised, so the end offset only moves when the whole batch is in the file.
- Durability is the caller's decision: the log says when its flush policy wants an fsync
  (``needs_flush``) and ``flush`` can run in a worker thread while the event loop keeps
  appending. One ``threading.Lock`` guards the segment list and every fd; the log's
  ``LogFlusher`` (``durability.py``) keeps the recovery point and fsyncs *duplicates* of the fds
  taken under the lock, so a concurrent roll, retention delete or close can never leave it
  syncing a closed (or reused) descriptor, and the slow fsync itself runs without the lock.
- Recovery trusts nothing it does not have to: ``LogLoader`` (``loader.py``) opens the
  segments, re-reads and CRC-checks everything after the recovery point, and cuts a torn tail
  back to the last whole batch before the log takes over.

Offsets: ``log_start_offset`` is the first offset still stored, ``log_end_offset`` the next offset
to assign (also the high watermark on a single broker), ``last_stable_offset`` the first offset of
the oldest open transaction (the high watermark when none is open): ``read_committed`` readers
stop there. ``append_marker`` ends a transaction with a control batch; an abort also becomes an
entry of the segment's aborted-transaction index (``txn_index.py``), which fetches consult.

Leader epochs: ``become_leader(epoch)`` starts an epoch at the log end offset (recorded durably in
the partition's ``leader-epoch-checkpoint``, ``leader_epoch.py``); every batch appended after it
is stamped with it. Until then (a log opened by hand) batches carry -1, as Kafka writes when it
has no epoch.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_right
from pathlib import Path

from ...protocol.batch import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    read_batch_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from ...protocol.compression import Buffer
from ...protocol.control import build_marker_batch
from ...protocol.errors import CorruptRecordError
from .config import LogConfig
from .durability import LogFlusher
from .errors import KafkaStorageError, OffsetOutOfRangeError
from .files import wall_ms
from .info import FetchDataInfo, LogAppendInfo, parse_partition_dir
from .leader_epoch import LeaderEpochCache
from .loader import LogLoader, new_log
from .lookups import TimestampAndOffset, legacy_offsets_before, offset_by_timestamp
from .producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ProducerSnapshot,
    ProducerStateManager,
)
from .retention import segments_to_delete
from .segment import LOG_SUFFIX, LogSegment
from .segment_swap import complete_swap, remove_dir
from .txn_index import AbortedTxn, collect_aborted

LOGGER = logging.getLogger(__name__)


class Log:
    def __init__(self, directory: Path, config: LogConfig, *, recovery_point: int = 0,
                 clean_shutdown: bool = False,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 now_ms: int | None = None, new: bool = False) -> None:
        parsed = parse_partition_dir(directory.name)
        if parsed is None:
            raise ValueError(f"{directory.name!r} is not a <topic>-<partition> directory name")
        self.topic, self.partition = parsed
        self.directory = directory
        self.config = config
        self._lock = threading.Lock()
        self._segments: list[LogSegment] = []
        self._base_offsets: list[int] = []
        self._closed = False
        self._producer_state = ProducerStateManager(
            directory, producer_id_expiration_ms=producer_id_expiration_ms)
        if new:  # a new partition: its directory just made, empty (nothing to scan or read)
            loaded = new_log(directory, config)
        else:
            directory.mkdir(parents=True, exist_ok=True)
            loaded = LogLoader(directory, config, self._producer_state).load(
                recovery_point, clean_shutdown, wall_ms() if now_ms is None else now_ms)
        self._segments = loaded.segments
        self._base_offsets = loaded.base_offsets
        self._log_start_offset = loaded.log_start_offset
        self._next_offset = loaded.next_offset
        try:
            self._epochs = LeaderEpochCache(directory, new=new)
            self._epochs.truncate_from_end(self._next_offset)
            self._epochs.truncate_from_start(self._log_start_offset)
        except BaseException:
            for segment in self._segments:
                segment.close()
            raise
        self._flusher = LogFlusher(directory, self.name, self._epochs,
                                   recovery_point=loaded.recovery_point,
                                   dir_changed=loaded.created_segment)
        #: the epoch stamped on appended batches; -1 until ``become_leader``
        self._leader_epoch = -1

    def __repr__(self) -> str:
        return (f"Log({self.name}, start={self._log_start_offset}, end={self._next_offset}, "
                f"segments={len(self._segments)})")

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def _add_segment(self, segment: LogSegment) -> None:
        self._segments.append(segment)
        self._base_offsets.append(segment.base_offset)

    # --- state --------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def high_watermark(self) -> int:
        return self._next_offset

    @property
    def last_stable_offset(self) -> int:
        """Where ``read_committed`` readers stop (Fetch, ListOffsets): the first offset of the
        oldest open transaction, or the high watermark when none is open."""
        first_unstable = self._producer_state.first_unstable_offset
        return self._next_offset if first_unstable is None else first_unstable

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        """Whether ``producer_id`` has a transaction open in this partition."""
        return self._producer_state.has_ongoing(producer_id)

    @property
    def leader_epoch(self) -> int:
        """The current leader epoch (-1 before ``become_leader``)."""
        return self._leader_epoch

    @property
    def epochs(self) -> LeaderEpochCache:
        return self._epochs

    def become_leader(self, epoch: int, *, durable: bool = True) -> None:
        """Start leader epoch ``epoch`` at the log end offset (Kafka's ``makeLeader``), durably
        (``durable=False``: a new partition's first, see ``durability.py``); else raises."""
        with self._lock:
            self._ensure_open()
            try:
                self._epochs.assign(epoch, self._next_offset, durable=durable)
            except OSError as exc:
                raise KafkaStorageError(f"recording leader epoch {epoch} of {self.name} "
                                        f"failed: {exc}") from exc
            self._leader_epoch = epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch and Fetch's diverging-epoch check."""
        with self._lock:
            return self._epochs.end_offset_for(epoch, self._next_offset)

    @property
    def recovery_point(self) -> int:
        """Every offset below this is known to be on stable storage (fsynced)."""
        return self._flusher.recovery_point

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return sum(segment.size for segment in self._segments)

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producer_state

    def active_producers(self) -> list[ProducerSnapshot]:
        with self._lock:
            return self._producer_state.active_producers()

    @property
    def closed(self) -> bool:
        return self._closed

    def segment_base_offsets(self) -> list[int]:
        with self._lock:
            return list(self._base_offsets)

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            for segment in self._segments:
                segment.index_interval_bytes = config.index_interval_bytes

    def _ensure_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self.name} is closed")

    # --- append -------------------------------------------------------------------------

    def append(self, batch: Buffer, header: BatchHeader, *, now_ms: int,
               leader_epoch: int | None = None) -> LogAppendInfo:
        """Append one validated batch, assigning its offsets in place.

        A ``bytes`` batch (as decoded from a request) is not copied: only its 61-byte header is,
        rewritten, and written together with the untouched rest (one ``pwritev``).

        ``leader_epoch`` defaults to the log's current epoch.

        Raises InvalidRecordError / InvalidProducerEpochError / OutOfOrderSequenceError for
        producer-state violations (nothing written) and KafkaStorageError if the disk fails
        (nothing written, end offset unchanged)."""
        size = len(batch)
        with self._lock:
            self._ensure_open()
            if leader_epoch is None:
                leader_epoch = self._leader_epoch
            config = self.config
            if header.producer_id >= 0:
                duplicate = self._producer_state.check(header)
                if duplicate is not None:
                    return LogAppendInfo(
                        duplicate.first_offset, duplicate.last_offset,
                        duplicate.timestamp if config.log_append_time else -1,
                        self._log_start_offset, 0, duplicate=True)
            first, last, append_time, max_timestamp = self._write(batch, header, now_ms,
                                                                  leader_epoch)
            if header.producer_id >= 0:  # no state to keep for a producer without an id
                self._producer_state.update(header, first, last, max_timestamp, now_ms)
            return LogAppendInfo(first, last, append_time, self._log_start_offset, size)

    def append_marker(self, producer_id: int, producer_epoch: int, *, committed: bool,
                      coordinator_epoch: int, now_ms: int) -> LogAppendInfo:
        """End ``producer_id``'s transaction here with a commit or abort marker.

        An abort that ends an open transaction is first added to the aborted-transaction index
        of the segment the marker goes to, so no reader can see the marker without it. Raises
        InvalidProducerEpochError / TransactionCoordinatorFencedError for a fenced marker and
        KafkaStorageError if the disk fails (nothing written).
        """
        batch = bytearray(build_marker_batch(
            producer_id=producer_id, producer_epoch=producer_epoch, committed=committed,
            coordinator_epoch=coordinator_epoch, timestamp_ms=now_ms))
        header = read_batch_header(batch)
        state = self._producer_state
        with self._lock:
            self._ensure_open()
            state.check_marker(producer_id, producer_epoch, coordinator_epoch)
            aborted = None
            if not committed and state.has_ongoing(producer_id):
                marker_offset = self._next_offset
                others = [o for p, o in state.ongoing.items() if p != producer_id]
                aborted = AbortedTxn(producer_id, state.ongoing[producer_id], marker_offset,
                                     min(others, default=marker_offset + 1))
            first, _, append_time, _ = self._write(batch, header, now_ms, self._leader_epoch,
                                                   aborted=aborted)
            state.apply_marker(producer_id, producer_epoch, coordinator_epoch, first, now_ms,
                               committed=committed)
            return LogAppendInfo(first, first, append_time, self._log_start_offset, len(batch))

    def _write(self, batch: Buffer, header: BatchHeader, now_ms: int,
               leader_epoch: int, *, aborted: AbortedTxn | None = None,
               ) -> tuple[int, int, int, int]:
        """Write one batch at the log end: (first offset, last offset, log-append time or -1,
        max timestamp). ``aborted`` goes to the receiving segment's transaction index first.
        Caller holds the lock."""
        size = len(batch)
        log_append_time = self.config.log_append_time  # a property: read once
        first = self._next_offset
        last = first + header.last_offset_delta
        if log_append_time and not isinstance(batch, bytearray):
            batch = bytearray(batch)  # the new timestamp changes the CRC of it all
        data: bytearray | tuple[bytearray, memoryview]
        if isinstance(batch, bytearray):
            data = head = batch
        else:
            # Performance: the fields a broker rewrites all sit in the header, so copy
            # just that instead of the whole batch (up to max.message.bytes).
            head = bytearray(batch[:BATCH_HEADER_SIZE])
            data = (head, memoryview(batch)[BATCH_HEADER_SIZE:])
        set_base_offset(head, 0, first)
        set_partition_leader_epoch(head, 0, leader_epoch)
        if log_append_time:
            set_log_append_time(head, 0, now_ms)
            append_time = max_timestamp = now_ms
        else:
            append_time = -1
            max_timestamp = header.max_timestamp
        try:
            segment = self._maybe_roll(size, last, now_ms)
            if aborted is None:
                segment.append(data, first, last + 1, max_timestamp, now_ms)
            else:
                entries = len(segment.txn_index)
                segment.txn_index.append(aborted)
                try:
                    segment.append(data, first, last + 1, max_timestamp, now_ms)
                except OSError:
                    segment.txn_index.truncate_entries(entries)
                    raise
        except OSError as exc:
            raise KafkaStorageError(f"appending {size} bytes to {self.name} failed: {exc}") \
                from exc
        self._next_offset = last + 1
        if leader_epoch >= 0 and leader_epoch != self._epochs.latest_epoch:
            self._assign_epoch(leader_epoch, first)
        return first, last, append_time, max_timestamp

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        try:
            self._epochs.assign(epoch, start_offset)
        except OSError as exc:  # the batch is written; the next start re-derives the epoch
            LOGGER.error("Recording leader epoch %d of %s failed: %s", epoch, self.name, exc)

    def _maybe_roll(self, size: int, last_offset: int, now_ms: int) -> LogSegment:
        segment = self._segments[-1]
        if segment.size == 0:
            return segment
        config = self.config
        if (segment.size + size > config.segment_bytes
                or (segment.rolling_base_timestamp is not None
                    and now_ms - segment.rolling_base_timestamp > config.segment_ms)
                or segment.indexes_full
                or not segment.can_hold_offsets(last_offset)):
            return self._roll()
        return segment

    def _roll(self) -> LogSegment:
        old = self._segments[-1]
        old.on_become_inactive()
        segment = LogSegment(self.directory, self._next_offset, self.config)
        self._add_segment(segment)
        self._flusher.dir_changed()
        try:
            self._producer_state.take_snapshot(self._next_offset, durable=False)
        except OSError as exc:  # only an optimisation for the next load
            LOGGER.warning("Could not write a producer snapshot for %s: %s", self.name, exc)
        LOGGER.debug("Rolled %s: new segment at offset %d", self.name, self._next_offset)
        return segment

    # --- durability ---------------------------------------------------------------------

    def defer_parent_dir_sync(self) -> None:
        """This log's directory was just created: its entry in the log dir is fsynced with the
        log's first flush or clean close, not before the creation is answered (Kafka's
        ``LogManager.createLogDirectory`` does not sync the parent either). A crash before that
        loses the directory, which the next start recreates empty: only records no flush had
        made durable are lost, as with any unflushed append."""
        with self._lock:
            self._flusher.defer_parent_dir_sync()

    def needs_flush(self) -> bool:
        """True when flush.messages / flush.ms or a rolled segment calls for an fsync."""
        if self._closed:
            return False
        # the segment list may be replaced concurrently: the flusher reads one snapshot of it
        return self._flusher.needs_flush(self._segments, self._next_offset, self.config)

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync data below ``up_to_offset`` (default: everything) and advance the recovery point.

        Safe to call from a worker thread while another thread appends, rolls or deletes.
        """
        with self._lock:
            if self._closed:
                return
            end = self._next_offset
            target = end if up_to_offset is None else min(up_to_offset, end)
            pending = self._flusher.prepare(self._segments, target)
        pending.fsync()
        with self._lock:
            self._flusher.complete(pending)

    def close(self, *, flush: bool = True) -> None:
        """Close the files; with ``flush`` first make everything durable for a clean restart.

        Raises KafkaStorageError if that could not be done (the files are closed regardless),
        in which case the directory must not be marked as cleanly shut down.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            error: OSError | None = None
            try:
                if flush:
                    self._segments[-1].on_become_inactive()
                    self._producer_state.take_snapshot(self._next_offset, durable=True)
                    self._flusher.sync_all(self._segments, self._next_offset)
            except OSError as exc:
                error = exc
            finally:
                for segment in self._segments:
                    try:
                        segment.close()
                    except OSError as exc:
                        error = error or exc
            if error is not None:
                raise KafkaStorageError(f"closing {self.name} failed: {error}") from error

    # --- read ---------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool = True,
             committed: bool = False, region_min: int | None = None) -> FetchDataInfo:
        """Whole batches from the one containing ``offset``, within ``max_bytes``.

        With ``min_one_batch`` (KIP-74) the first batch is returned even when it is larger than
        ``max_bytes``, so a consumer can always make progress. Data comes from one segment.
        ``committed`` (``read_committed``) stops at the last stable offset and lists the aborted
        transactions overlapping what is returned. A read of ``region_min`` bytes or more comes
        as a ``FileRegion`` of the segment file (for ``sendfile``), which the caller closes."""
        with self._lock:
            self._ensure_open()
            start = self._log_start_offset
            end = self._next_offset
            lso = self.last_stable_offset
            if offset < start or offset > end:
                raise OffsetOutOfRangeError(
                    f"offset {offset} is outside [{start}, {end}] for {self.name}")
            first = max(0, bisect_right(self._base_offsets, offset) - 1)
            limit = lso if committed else None
            aborted: list[AbortedTxn] | None = [] if committed else None
            try:
                if offset < (lso if committed else end):
                    for i in range(first, len(self._segments)):
                        seg = self._segments[i]
                        result = seg.read(offset, max_bytes, min_one_batch, limit, region_min)
                        if result is None:
                            continue
                        if committed and result[0]:
                            aborted = collect_aborted(
                                [s.txn_index for s in self._segments[i:]], offset, result[2])
                        return FetchDataInfo(result[0], result[1], end, start, lso, aborted)
            except (OSError, CorruptRecordError) as exc:
                raise KafkaStorageError(f"reading {self.name} at {offset} failed: {exc}") from exc
            return FetchDataInfo(b"", offset, end, start, lso, aborted)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with a timestamp >= ``timestamp``, if any."""
        found = self.fetch_offset_by_timestamp(timestamp)
        return None if found is None else (found.offset, found.timestamp)

    def fetch_offset_by_timestamp(self, target: int) -> TimestampAndOffset | None:
        """ListOffsets v1+ for a time or a special timestamp (``lookups.py``)."""
        with self._lock:
            self._ensure_open()
            try:
                return offset_by_timestamp(self._segments, self._epochs, target,
                                           log_start=self._log_start_offset,
                                           log_end=self._next_offset)
            except (OSError, CorruptRecordError) as exc:
                raise KafkaStorageError(f"timestamp lookup in {self.name} failed: {exc}") from exc

    def legacy_offsets_before(self, timestamp: int, max_num_offsets: int,
                              now_ms: int) -> list[int]:
        """ListOffsets v0: offsets of segments last written at or before ``timestamp``."""
        with self._lock:
            self._ensure_open()
            try:
                return legacy_offsets_before(self._segments, timestamp, max_num_offsets,
                                             log_start=self._log_start_offset,
                                             log_end=self._next_offset, now_ms=now_ms)
            except OSError as exc:
                raise KafkaStorageError(f"offset lookup in {self.name} failed: {exc}") from exc

    # --- retention ----------------------------------------------------------------------

    def delete_old_segments(self, now_ms: int) -> int:
        """Apply retention.ms and retention.bytes (``retention.py``); return the number of
        segments deleted. If the active segment qualifies it is rolled first."""
        with self._lock:
            self._ensure_open()
            doomed = segments_to_delete(self._segments, self.config, now_ms,
                                        self._log_start_offset)
            if not doomed:
                return 0
            try:
                if doomed[-1] is self._segments[-1]:
                    self._roll()
            except OSError as exc:
                raise KafkaStorageError(f"retention on {self.name} failed: {exc}") from exc
            gone: list[LogSegment] = []
            try:
                for segment in doomed:
                    gone.append(segment)  # closed even if unlinking fails below
                    segment.delete()
            except OSError as exc:
                raise KafkaStorageError(f"retention on {self.name} failed: {exc}") from exc
            finally:
                self._segments = [s for s in self._segments if s not in gone]
                self._base_offsets = [s.base_offset for s in self._segments]
                self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
                self._producer_state.truncate_head(self._log_start_offset)
                self._epochs.truncate_from_start(self._log_start_offset)
            LOGGER.info("Deleted %d segment(s) of %s; log start offset is now %d",
                        len(doomed), self.name, self._log_start_offset)
            return len(doomed)

    def advance_log_start_offset(self, offset: int) -> int:
        """DeleteRecords (``maybeIncrementLogStartOffset``): records below ``offset`` are gone
        for readers at once, whole segments at the next retention pass; returns the start."""
        with self._lock:
            self._ensure_open()
            if offset < 0 or offset > self._next_offset:  # above the high watermark
                raise OffsetOutOfRangeError(f"offset {offset} is past the end of {self.name}")
            if offset > self._log_start_offset:
                self._log_start_offset = offset
                self._producer_state.truncate_head(offset)
                self._epochs.truncate_from_start(offset)
            return self._log_start_offset

    def cleaner_view(self) -> tuple[list[LogSegment], int, int, dict[int, int], list[AbortedTxn]]:
        """(inactive segments, log start, LSO, producer id -> its last offset, aborted txns)."""
        with self._lock:
            self._ensure_open()
            last = self._producer_state.last_offsets()
            aborted = [e for s in self._segments for e in s.txn_index.entries]
            return (list(self._segments[:-1]), self._log_start_offset, self.last_stable_offset,
                    last, aborted)

    def replace_segments(self, old: list[LogSegment], swap: Path) -> bool:
        """Swap in the segment committed in ``swap`` for ``old`` (False if they changed)."""
        with self._lock:
            if self._closed:
                return False  # the swap is committed: the next load completes it
            if any(not any(s is o for s in self._segments) for o in old):
                remove_dir(swap)
                return False
            base, config = complete_swap(self.directory, swap), self.config
            for segment in old:
                segment.close(write_indexes=False)  # their files were replaced
            first = self._segments.index(old[0])
            self._segments[first:first + len(old)] = [LogSegment(self.directory, base, config)]
            self._segments[first].load_trusted()
            self._base_offsets = [s.base_offset for s in self._segments]
            self._flusher.dir_changed()
            return True

    def remove_expired_producers(self, now_ms: int) -> int:
        with self._lock:
            return self._producer_state.remove_expired(now_ms)


__all__ = ["LOG_SUFFIX", "FetchDataInfo", "Log", "LogAppendInfo", "parse_partition_dir"]
