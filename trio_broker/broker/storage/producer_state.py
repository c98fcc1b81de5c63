"""Producer state of one partition (Kafka's ``ProducerStateManager``): idempotence and open
transactions.

Why: an idempotent producer retries a batch when it does not hear back, so the same batch can
arrive twice. For each producer id the log keeps the current epoch and the sequence/offset
metadata of the last five batches (the most a producer has in flight), which is enough to answer
a retry with the original offsets instead of appending it again, and to refuse gaps and zombie
producers. A transactional producer also has an *open transaction* here from its first
transactional batch until a marker (``protocol.control``) ends it; the oldest open transaction's
first offset is the partition's first unstable offset, where ``read_committed`` readers stop.
The state is derived from the log itself (every batch header carries producer id, epoch and
sequences; markers say how transactions ended), so it survives any restart by re-reading
headers; snapshots only make that fast.

Snapshot file ``<offset>.snapshot`` in the partition directory holds the state as of log offset
``<offset>`` (everything before it applied), big-endian::

    magic b"TBPS" | version i16 (2) | crc u32 (CRC-32C of everything after it) | count i32
    per producer: producer_id i64 | epoch i16 | last_update_ms i64 | coordinator_epoch i32
                  | current_txn_first_offset i64 (-1: no open transaction) | batches i8
    per batch:    first_seq i32 | last_seq i32 | first_offset i64 | last_offset i64 | timestamp i64

Version 1 files (no transactions: no coordinator epoch and no open transaction) are still read.
A snapshot whose CRC does not match is ignored and the state is rebuilt from the log instead.
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from pathlib import Path
from typing import NamedTuple

import attrs

from ...protocol.batch import BatchHeader
from ...protocol.crc import crc32c
from ...protocol.errors import InvalidRecordError
from .errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from .files import atomic_write

LOGGER = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOTS_TO_KEEP = 2
_MAX_SEQUENCE = 2**31 - 1

_MAGIC = b"TBPS"
_PREFIX = struct.Struct(">4shI")
_COUNT = struct.Struct(">i")
_ENTRY_V1 = struct.Struct(">qhqb")
_ENTRY = struct.Struct(">qhqiqb")
_BATCH = struct.Struct(">iiqqq")
_VERSION = 2


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    #: the batch's maxTimestamp as stored (the log-append time under LogAppendTime)
    timestamp: int


@attrs.define(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = attrs.field(factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    #: when this producer last appended; drives producer.id.expiration.ms
    last_update_ms: int = -1
    #: the coordinator epoch of the last marker (a lower one is a zombie coordinator)
    coordinator_epoch: int = -1
    #: first offset of this producer's open transaction here, -1 when none is open
    current_txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


class ProducerSnapshot(NamedTuple):
    """What DescribeProducers shows of one producer id."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    #: the maxTimestamp of its last batch, -1 if none is retained
    last_timestamp: int
    coordinator_epoch: int = -1
    #: first offset of its open transaction, -1 if none
    current_txn_start_offset: int = -1


class CompletedTxn(NamedTuple):
    """A transaction a marker ended here (Kafka's ``CompletedTxn``)."""

    producer_id: int
    first_offset: int
    #: the marker's offset
    last_offset: int
    aborted: bool


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (last_seq == _MAX_SEQUENCE and next_seq == 0)


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


class ProducerStateManager:
    def __init__(
        self,
        directory: Path,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.directory = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        #: producer id -> first offset of its open transaction
        self.ongoing: dict[int, int] = {}
        self._first_unstable: int | None = None

    def last_offsets(self) -> dict[int, int]:
        """Producer id -> the last offset of its newest batch (the cleaner keeps that batch)."""
        return {pid: e.batches[-1].last_offset for pid, e in self.producers.items() if e.batches}

    def active_producers(self) -> list[ProducerSnapshot]:
        """Every producer id with state here (DescribeProducers), oldest id first."""
        return [ProducerSnapshot(e.producer_id, e.producer_epoch, e.last_seq,
                                 e.batches[-1].timestamp if e.batches else -1,
                                 e.coordinator_epoch, e.current_txn_first_offset)
                for _, e in sorted(self.producers.items())]

    # --- open transactions ------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction, None when none is open."""
        return self._first_unstable

    def has_ongoing(self, producer_id: int) -> bool:
        return producer_id in self.ongoing

    def _txn_started(self, entry: ProducerStateEntry, first_offset: int) -> None:
        entry.current_txn_first_offset = first_offset
        self.ongoing[entry.producer_id] = first_offset
        if self._first_unstable is None or first_offset < self._first_unstable:
            self._first_unstable = first_offset

    def _txn_ended(self, producer_id: int) -> None:
        first = self.ongoing.pop(producer_id, None)
        if first is not None and first == self._first_unstable:
            self._first_unstable = min(self.ongoing.values(), default=None)

    def _rebuild_ongoing(self) -> None:
        self.ongoing = {pid: e.current_txn_first_offset for pid, e in self.producers.items()
                        if e.current_txn_first_offset >= 0}
        self._first_unstable = min(self.ongoing.values(), default=None)

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Refuse a marker from a fenced producer epoch or a zombie coordinator (Kafka's
        ``appendEndTxnMarker`` checks), before it is written."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"marker for producer {producer_id} has epoch {producer_epoch}, older than the "
                f"current epoch {entry.producer_epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker for producer {producer_id} has coordinator epoch {coordinator_epoch}, "
                f"older than {entry.coordinator_epoch}")

    def apply_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                     offset: int, now_ms: int, *, committed: bool) -> CompletedTxn | None:
        """Record a marker written at ``offset``; the transaction it ended, if one was open
        (a marker for a partition that got no records ends nothing)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id, producer_epoch)
        elif entry.producer_epoch != producer_epoch:
            entry.producer_epoch = producer_epoch
            entry.batches.clear()  # a new epoch numbers its sequences from 0
        completed = None
        if entry.current_txn_first_offset >= 0:
            completed = CompletedTxn(producer_id, entry.current_txn_first_offset, offset,
                                     not committed)
            entry.current_txn_first_offset = -1
            self._txn_ended(producer_id)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_update_ms = now_ms
        return completed

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is ended: the oldest other open transaction's start, or
        the offset after the marker (an aborted-transaction index entry records it)."""
        return self._first_unstable if self._first_unstable is not None else (
            completed.last_offset + 1)

    # --- checks and updates -------------------------------------------------------------

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate an incoming batch before it gets offsets (kafka-protocol.md §7).

        Returns the retained metadata when the batch is a duplicate of one already in the log,
        None when it may be appended; raises for everything Kafka refuses.
        """
        producer_id = header.producer_id
        if producer_id < 0:
            return None
        if header.base_sequence < 0:
            raise InvalidRecordError(
                f"producer id {producer_id} sent a batch without a base sequence"
            )
        entry = self.producers.get(producer_id)
        if entry is None:
            return None  # new or expired producer: any sequence is accepted, as in Kafka
        epoch = header.producer_epoch
        if epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"producer {producer_id} has epoch {epoch}, older than the current "
                f"epoch {entry.producer_epoch}"
            )
        if epoch == entry.producer_epoch:
            duplicate = entry.find_duplicate(header.base_sequence, header.last_sequence)
            if duplicate is not None:
                return duplicate
            if not _in_sequence(entry.last_seq, header.base_sequence):
                raise OutOfOrderSequenceError(
                    f"producer {producer_id} epoch {epoch}: expected sequence "
                    f"{_next_sequence(entry.last_seq)}, got {header.base_sequence}"
                )
        elif header.base_sequence != 0:
            raise OutOfOrderSequenceError(
                f"producer {producer_id} started epoch {epoch} at sequence "
                f"{header.base_sequence}; a new epoch starts at 0"
            )
        if entry.current_txn_first_offset >= 0 and not header.is_transactional:
            raise InvalidTxnStateError(
                f"producer {producer_id} sent a non-transactional batch inside its open "
                "transaction"
            )
        return None

    def update(
        self,
        header: BatchHeader,
        first_offset: int,
        last_offset: int,
        timestamp: int,
        now_ms: int,
    ) -> None:
        """Record an appended (or, on load, re-read) batch."""
        producer_id = header.producer_id
        if producer_id < 0:
            return
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = ProducerStateEntry(producer_id, header.producer_epoch)
            self.producers[producer_id] = entry
        elif entry.producer_epoch != header.producer_epoch:
            entry.producer_epoch = header.producer_epoch  # an open transaction carries over
            entry.batches.clear()
        entry.batches.append(
            BatchMetadata(
                header.base_sequence, header.last_sequence, first_offset, last_offset, timestamp
            )
        )
        entry.last_update_ms = now_ms
        if header.is_transactional and entry.current_txn_first_offset < 0:
            self._txn_started(entry, first_offset)

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle for producer.id.expiration.ms (never one with an open
        transaction); returns how many."""
        expired = [
            pid
            for pid, entry in self.producers.items()
            if now_ms - entry.last_update_ms >= self.producer_id_expiration_ms
            and entry.current_txn_first_offset < 0
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def truncate_head(self, log_start_offset: int) -> None:
        """Drop producers whose last batch was removed by retention."""
        gone = [
            pid
            for pid, entry in self.producers.items()
            if entry.batches and entry.batches[-1].last_offset < log_start_offset
        ]
        for pid in gone:
            del self.producers[pid]
            self._txn_ended(pid)

    # --- snapshots ----------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        offsets = []
        for path in self.directory.glob("*" + SNAPSHOT_SUFFIX):
            stem = path.name[: -len(SNAPSHOT_SUFFIX)]
            if stem.isdigit():
                offsets.append(int(stem))
        return sorted(offsets)

    def take_snapshot(self, offset: int, *, durable: bool) -> None:
        """Write the state as of ``offset`` and keep only the newest few snapshots."""
        body = bytearray(_COUNT.pack(len(self.producers)))
        for entry in self.producers.values():
            body += _ENTRY.pack(
                entry.producer_id, entry.producer_epoch, entry.last_update_ms,
                entry.coordinator_epoch, entry.current_txn_first_offset, len(entry.batches)
            )
            for batch in entry.batches:
                body += _BATCH.pack(
                    batch.first_seq,
                    batch.last_seq,
                    batch.first_offset,
                    batch.last_offset,
                    batch.timestamp,
                )
        data = _PREFIX.pack(_MAGIC, _VERSION, crc32c(body)) + body
        atomic_write(self.directory / snapshot_file_name(offset), data, durable=durable)
        for old in self.snapshot_offsets()[:-_SNAPSHOTS_TO_KEEP]:
            self._delete_snapshot(old)

    def load_latest_snapshot(self, log_end_offset: int) -> int | None:
        """Load the newest valid snapshot at or below ``log_end_offset``; return its offset.

        Snapshots beyond the log end (the log was truncated by recovery) describe batches that
        no longer exist and are deleted.
        """
        for offset in reversed(self.snapshot_offsets()):
            if offset > log_end_offset:
                self._delete_snapshot(offset)
                continue
            path = self.directory / snapshot_file_name(offset)
            try:
                self.producers = _parse_snapshot(path.read_bytes())
            except (OSError, ValueError, struct.error) as exc:
                LOGGER.warning("Ignoring unreadable producer state snapshot %s: %s", path, exc)
                self._delete_snapshot(offset)
                continue
            self._rebuild_ongoing()
            return offset
        self.producers = {}
        self._rebuild_ongoing()
        return None

    def _delete_snapshot(self, offset: int) -> None:
        try:
            (self.directory / snapshot_file_name(offset)).unlink()
        except FileNotFoundError:
            pass


def _next_sequence(last_seq: int) -> int:
    return 0 if last_seq == _MAX_SEQUENCE else last_seq + 1


def _parse_snapshot(data: bytes) -> dict[int, ProducerStateEntry]:
    magic, version, crc = _PREFIX.unpack_from(data, 0)
    if magic != _MAGIC or version not in (1, _VERSION):
        raise ValueError(f"not a producer snapshot (magic {magic!r}, v{version})")
    body = memoryview(data)[_PREFIX.size :]
    if crc32c(body) != crc:
        raise ValueError("CRC mismatch")
    (count,) = _COUNT.unpack_from(body, 0)
    pos = _COUNT.size
    producers: dict[int, ProducerStateEntry] = {}
    for _ in range(count):
        if version == 1:
            producer_id, epoch, last_update_ms, batches = _ENTRY_V1.unpack_from(body, pos)
            coordinator_epoch, txn_first = -1, -1
            pos += _ENTRY_V1.size
        else:
            (producer_id, epoch, last_update_ms, coordinator_epoch, txn_first,
             batches) = _ENTRY.unpack_from(body, pos)
            pos += _ENTRY.size
        entry = ProducerStateEntry(producer_id, epoch, last_update_ms=last_update_ms,
                                   coordinator_epoch=coordinator_epoch,
                                   current_txn_first_offset=txn_first)
        for _ in range(batches):
            entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
            pos += _BATCH.size
        producers[producer_id] = entry
    if pos != len(body):
        raise ValueError(f"{len(body) - pos} unexpected trailing bytes")
    return producers
