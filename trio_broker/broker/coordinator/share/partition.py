"""One share-partition's delivery state (Kafka's ``SharePartition``): which records of a
partition a share group has handed out, to whom, how often, and which are done.

Why offsets and states, not copies of records: the records stay in the partition's log; a share
group only keeps, for each offset between its start offset (SPSO: everything before it is done)
and its end offset (SPEO: the next offset never acquired), the in-flight state:

- ``AVAILABLE``    may be acquired (a released record, or one whose acquisition lock expired)
- ``ACQUIRED``     handed to one member under a lock that ends at ``deadline``
- ``ACKNOWLEDGED`` accepted: never delivered again
- ``ARCHIVED``     rejected, a gap, or released once too often (``delivery.count.limit``)

The start offset moves over leading ACKNOWLEDGED / ARCHIVED offsets, which are then forgotten.
Acquisition stops while ``max_record_locks`` offsets are in flight (Kafka's
``group.share.partition.max.record.locks``). Plain synchronous code with the time passed in, so
it is tested without Trio and the coordinator decides when it runs.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

import attrs

from ....protocol.batch import BatchHeader, iter_batches
from ....protocol.errors import ErrorCode

__all__ = ["AcknowledgeType", "AcquiredRange", "Acquisition", "RecordState", "SharePartition",
           "SkipFn", "validate_batches"]


class RecordState(enum.IntEnum):
    """Kafka's ``RecordState`` ids (as ``__share_group_state`` stores them)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """ShareFetch / ShareAcknowledge ``acknowledge_types`` values."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    #: KIP-1222 (ShareFetch / ShareAcknowledge v2 with ``IsRenewAck``): the record stays
    #: acquired by the member under a fresh lock, its delivery count unchanged
    RENEW = 4


class AcquiredRange(NamedTuple):
    first_offset: int
    last_offset: int
    delivery_count: int


class Acquisition(NamedTuple):
    """What one acquire handed out: whole batches and the acquired offsets within them."""

    records: bytes
    ranges: list[AcquiredRange]

    @property
    def record_count(self) -> int:
        return sum(r.last_offset - r.first_offset + 1 for r in self.ranges)


@attrs.define
class InFlight:
    state: RecordState
    delivery_count: int = 0
    member_id: str = ""
    #: when the acquisition lock ends (the coordinator's clock, seconds)
    deadline: float = 0.0


_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType if t is not AcknowledgeType.RENEW)
_ACK_TYPES_RENEW = frozenset(int(t) for t in AcknowledgeType)
#: (first_offset, last_offset, acknowledge_types) as a request carries them
AckBatch = tuple[int, int, Sequence[int]]
#: read(offset, max_bytes) -> whole batches from the one holding ``offset`` (b"": none)
ReadFn = Callable[[int, int], bytes]
#: skip(batch header) -> whether the batch's records are never delivered (read_committed:
#: aborted transactional batches and control batches), archived when first reached
SkipFn = Callable[[BatchHeader], bool]
#: new-record reads one acquisition may make over batches it skips, before it answers
#: with nothing and lets the next fetch go on
_MAX_SKIPPING_READS = 16


def validate_batches(batches: Iterable[AckBatch], *,
                     renew: bool = False) -> ErrorCode | None:
    """Kafka's checks of a partition's acknowledgement batches before any is applied:
    first <= last, ascending and not overlapping, one type or one per offset, known types.
    RENEW is a known type only in a request that says it carries renewals (``IsRenewAck``,
    version 2+)."""
    known = _ACK_TYPES_RENEW if renew else _ACK_TYPES
    previous_last = -1
    for first, last, types in batches:
        if first < 0 or last < first or first <= previous_last:
            return ErrorCode.INVALID_REQUEST
        if len(types) not in (1, last - first + 1):
            return ErrorCode.INVALID_REQUEST
        if any(t not in known for t in types):
            return ErrorCode.INVALID_REQUEST
        previous_last = last
    return None


@attrs.define
class SharePartition:
    start_offset: int
    #: the next offset never acquired (SPEO)
    end_offset: int
    delivery_count_limit: int
    max_record_locks: int
    #: offset -> state, for offsets in [start_offset, end_offset)
    in_flight: dict[int, InFlight] = attrs.field(factory=dict)
    #: records whose acquisition lock ended before they were acknowledged, since the broker
    #: loaded the share-partition (Kafka's SharePartitionMetrics AcquisitionLockTimeoutPerSec)
    lock_timeouts: int = 0

    # --- acquisition --------------------------------------------------------------------------
    def acquire(self, member_id: str, read: ReadFn, *, max_records: int, max_bytes: int,
                now: float, lock_s: float, skip: SkipFn | None = None) -> Acquisition:
        """Hand records to ``member_id``: released / expired ones first, then new ones from the
        end offset. Whole batches come back, but at most ``max_records`` offsets are acquired
        (a batch may be cut, as Kafka's record-limit acquire mode does): producers batch
        thousands of records together, and whole-batch acquisition would hand them all to
        the first member that asks. New batches ``skip`` names are archived, not sent."""
        self.expire_locks(now)
        deadline = now + lock_s
        available = sorted(o for o, r in self.in_flight.items()
                           if r.state is RecordState.AVAILABLE)
        if available:
            data = read(available[0], max_bytes)
            last = _last_offset(data)
            if last is None and skip is not None:
                # read_committed, released records past the last stable offset (acquired
                # under read_uncommitted): they wait for their transaction's end
                return Acquisition(b"", [])
            if last is None:  # the log no longer holds them (retention): done
                for offset in available:
                    self.in_flight[offset].state = RecordState.ARCHIVED
                self._advance()
                return Acquisition(b"", [])
            if skip is not None:  # their transaction aborted since: never delivered again
                for _, header in iter_batches(data):
                    if skip(header):
                        for offset in range(header.base_offset,
                                            header.base_offset + header.last_offset_delta + 1):
                            record = self.in_flight.get(offset)
                            if record is not None and record.state is RecordState.AVAILABLE:
                                record.state = RecordState.ARCHIVED
                available = [o for o in available
                             if self.in_flight[o].state is RecordState.AVAILABLE]
                self._advance()
            chosen = [o for o in available if o <= last][:max(max_records, 1)]
            return Acquisition(data, self._lock(chosen, member_id, deadline))
        for _ in range(_MAX_SKIPPING_READS):
            room = self.max_record_locks - (self.end_offset - self.start_offset)
            if room <= 0:
                break
            data = read(self.end_offset, max_bytes)
            if not data:
                break
            kept, offsets, skipped = self._new_batches(data, min(max(max_records, 1), room),
                                                       skip)
            for offset in skipped:
                self.in_flight[offset] = InFlight(RecordState.ARCHIVED)
            for offset in offsets:
                self.in_flight[offset] = InFlight(RecordState.AVAILABLE)
            self.end_offset = max(offsets[-1:] + skipped[-1:], default=self.end_offset - 1) + 1
            if offsets:
                ranges = self._lock(offsets, member_id, deadline)
                self._advance()
                return Acquisition(kept, ranges)
            if not skipped:
                break
            self._advance()
        return Acquisition(b"", [])

    def _new_batches(self, data: bytes, limit: int,
                     skip: SkipFn | None) -> tuple[bytes, list[int], list[int]]:
        """The batches from the end offset on: (batches to send, offsets to acquire (at most
        ``limit``), offsets of the batches skipped up to there)."""
        kept = bytearray()
        offsets: list[int] = []
        skipped: list[int] = []
        for pos, header in iter_batches(data):
            last = header.base_offset + header.last_offset_delta
            if last < self.end_offset:
                continue
            first = max(header.base_offset, self.end_offset)
            if skip is not None and skip(header):
                skipped.extend(range(first, last + 1))
                continue
            kept += data[pos:pos + header.size]
            offsets.extend(range(first, min(last, first + limit - len(offsets) - 1) + 1))
            if len(offsets) >= limit:
                break
        return bytes(kept), offsets, skipped

    def _lock(self, offsets: list[int], member_id: str, deadline: float) -> list[AcquiredRange]:
        ranges: list[AcquiredRange] = []
        for offset in offsets:
            record = self.in_flight[offset]
            record.state = RecordState.ACQUIRED
            record.delivery_count += 1
            record.member_id = member_id
            record.deadline = deadline
            prev = ranges[-1] if ranges else None
            if (prev is not None and prev.last_offset == offset - 1
                    and prev.delivery_count == record.delivery_count):
                ranges[-1] = prev._replace(last_offset=offset)
            else:
                ranges.append(AcquiredRange(offset, offset, record.delivery_count))
        return ranges

    def expire_locks(self, now: float) -> int:
        """Release every record whose acquisition lock ended; how many."""
        expired = [r for r in self.in_flight.values()
                   if r.state is RecordState.ACQUIRED and r.deadline <= now]
        for record in expired:
            self._release(record)
        if expired:
            self.lock_timeouts += len(expired)
            self._advance()
        return len(expired)

    def next_deadline(self) -> float | None:
        """When the first acquisition lock held now ends (None: none held)."""
        return min((r.deadline for r in self.in_flight.values()
                    if r.state is RecordState.ACQUIRED), default=None)

    def release_member(self, member_id: str) -> int:
        """A member left: its acquired records become available again (Kafka does not count
        this against the delivery count limit differently from a release)."""
        held = [r for r in self.in_flight.values()
                if r.state is RecordState.ACQUIRED and r.member_id == member_id]
        for record in held:
            self._release(record)
        if held:
            self._advance()
        return len(held)

    # --- acknowledgement ----------------------------------------------------------------------
    def acknowledge(self, member_id: str, batches: Sequence[AckBatch], *, renew: bool = False,
                    now: float = 0.0, lock_s: float = 0.0) -> ErrorCode | None:
        """Apply a partition's acknowledgement batches, all or none: a record not acquired by
        ``member_id`` (or whose lock expired) is INVALID_RECORD_STATE, the state unchanged.
        With ``renew`` (the request's ``IsRenewAck``) a RENEW restarts the record's acquisition
        lock at ``now`` for ``lock_s``."""
        error = validate_batches(batches, renew=renew)
        if error is not None:
            return error
        for first, last, _ in batches:
            for offset in range(first, last + 1):
                record = self.in_flight.get(offset)
                if (record is None or record.state is not RecordState.ACQUIRED
                        or record.member_id != member_id):
                    return ErrorCode.INVALID_RECORD_STATE
        for first, last, types in batches:
            for offset in range(first, last + 1):
                kind = types[0] if len(types) == 1 else types[offset - first]
                record = self.in_flight[offset]
                if kind == AcknowledgeType.ACCEPT:
                    record.state = RecordState.ACKNOWLEDGED
                elif kind == AcknowledgeType.RENEW:
                    record.deadline = now + lock_s
                    continue
                elif kind == AcknowledgeType.RELEASE:
                    self._release(record)
                else:  # reject, gap
                    record.state = RecordState.ARCHIVED
                record.member_id = ""
        self._advance()
        return None

    def _release(self, record: InFlight) -> None:
        record.member_id = ""
        record.state = (RecordState.ARCHIVED if record.delivery_count >= self.delivery_count_limit
                        else RecordState.AVAILABLE)

    def _advance(self) -> None:
        while self.start_offset < self.end_offset:
            record = self.in_flight.get(self.start_offset)
            if record is not None and record.state not in (RecordState.ACKNOWLEDGED,
                                                           RecordState.ARCHIVED):
                break
            self.in_flight.pop(self.start_offset, None)
            self.start_offset += 1

    def delivery_complete_count(self) -> int:
        """Offsets after the start offset whose delivery is over (KIP-1226's lag leaves them
        out)."""
        return sum(1 for r in self.in_flight.values()
                   if r.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED))

    def skip_to(self, log_start_offset: int) -> None:
        """Records before the log's start offset are gone (retention, DeleteRecords): done."""
        if log_start_offset > self.start_offset:
            for offset in [o for o in self.in_flight if o < log_start_offset]:
                del self.in_flight[offset]
            self.start_offset = log_start_offset
            self.end_offset = max(self.end_offset, log_start_offset)


def _last_offset(data: bytes) -> int | None:
    last = None
    for _, header in iter_batches(data):
        last = header.base_offset + header.last_offset_delta
    return last
