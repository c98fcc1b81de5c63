"""What the consumer asked for and what it has handed out (Kafka's ``SubscriptionState``).

Why positions are tracked the way Java's consumer tracks them: a record counts as processed once
the application asks for more (the next ``getmany`` or the next step of ``async for``), or calls
``commit()``. Three maps per partition keep that apart::

    returned   the position after the last record ``getmany`` returned (not processed yet)
    consumed   the position after the last processed record: what ``commit()`` stores
    committed  what this consumer last committed (auto-commit skips partitions unchanged since)

``async for`` hands records out one at a time from ``iter_records``; the one handed out last
(``last_yielded``) becomes processed when the next one is asked for.

Per partition (``PartitionState``)::

    position       next offset the application will see
    fetch_offset   where the next Fetch starts: the end of what is buffered or in flight
    epoch          bumped by every seek/reset/revocation; a response or buffered chunk from an
                   older epoch is dropped, so a seek never returns records from before it
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any, Protocol

from ...core.errors import IllegalStateError, KafkaError
from ...core.structs import ConsumerRecord, OffsetAndMetadata, TopicPartition


class ConsumerRebalanceListener(Protocol):
    """Called by the group task around every rebalance (eager: all partitions are revoked)."""

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None: ...

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None: ...


class PartitionState:
    """What the consumer knows about one assigned partition."""

    __slots__ = ("buffered", "epoch", "error", "fetch_offset", "high_watermark", "in_flight",
                 "last_stable_offset", "log_start_offset", "paused", "position", "request_entry",
                 "reset", "tp")

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.position: int | None = None
        self.fetch_offset: int | None = None
        #: None, "committed" (look up the group's offset), "earliest" or "latest"
        self.reset: str | None = "committed"
        self.epoch = 0
        self.paused = False
        self.buffered = 0
        self.in_flight = False
        self.high_watermark: int | None = None
        self.last_stable_offset: int | None = None
        self.log_start_offset: int | None = None
        self.error: KafkaError | None = None
        #: this partition's entry in Fetch requests, built once, its fetch_offset moved
        self.request_entry: Any = None

    def seek(self, offset: int) -> None:
        self.position = self.fetch_offset = offset
        self.reset = None
        self.epoch += 1
        self.error = None

    def request_reset(self, strategy: str) -> None:
        self.position = self.fetch_offset = None
        self.reset = strategy
        self.epoch += 1

    @property
    def fetching(self) -> bool:
        """Whether this partition takes part in Fetch requests at all right now."""
        return self.position is not None and not self.paused and self.error is None


class SubscriptionState:
    """The subscription or manual assignment, the assigned partitions' states, and positions."""

    def __init__(self) -> None:
        self.subscription: set[str] | None = None
        self.manual = False
        self.listener: ConsumerRebalanceListener | None = None
        #: the assignment: one state per assigned partition
        self.states: dict[TopicPartition, PartitionState] = {}
        self.consumed: dict[TopicPartition, int] = {}
        self.returned: dict[TopicPartition, int] = {}
        self.committed: dict[TopicPartition, int] = {}
        self.iter_records: deque[ConsumerRecord] = deque()
        self.last_yielded: ConsumerRecord | None = None

    def state(self, tp: TopicPartition) -> PartitionState:
        state = self.states.get(TopicPartition(*tp))
        if state is None:
            raise IllegalStateError(f"{tp} is not assigned to this consumer")
        return state

    def set_assignment(self, partitions: set[TopicPartition]) -> None:
        """Keep state for ``partitions`` only (a dropped partition's epoch moves on, so its
        buffered data and answers in flight are ignored), and forget what was handed out of
        partitions no longer assigned."""
        for tp in list(self.states):
            if tp not in partitions:
                self.states.pop(tp).epoch += 1
        for tp in partitions:
            if tp not in self.states:
                self.states[tp] = PartitionState(tp)
        for tp in list(self.consumed):
            if tp not in partitions:
                del self.consumed[tp]
        self.returned = {tp: o for tp, o in self.returned.items() if tp in partitions}
        self.iter_records = deque(r for r in self.iter_records
                                  if (r.topic, r.partition) in partitions)

    def forget_handed_out(self, tp: TopicPartition) -> None:
        """After a seek: records of ``tp`` returned or queued for ``async for`` no longer count.
        """
        self.returned.pop(tp, None)
        if self.iter_records:
            self.iter_records = deque(r for r in self.iter_records
                                      if (r.topic, r.partition) != tp)

    def mark_returned(self, records: dict[TopicPartition, list[ConsumerRecord]]) -> None:
        for tp, recs in records.items():
            self.returned[tp] = recs[-1].offset + 1

    def mark_yielded_consumed(self) -> None:
        record = self.last_yielded
        if record is not None:
            self.consumed[TopicPartition(record.topic, record.partition)] = record.offset + 1
            self.last_yielded = None

    def mark_consumed(self) -> None:
        """Everything handed out so far counts as processed."""
        if self.returned:
            self.consumed.update(self.returned)
            self.returned = {}
        self.mark_yielded_consumed()

    def next_position(self, state: PartitionState) -> int | None:
        """The offset of the next record ``tp`` will hand out (queued ones first)."""
        for record in self.iter_records:
            if (record.topic, record.partition) == state.tp:
                return record.offset
        return state.position

    def consumed_offsets(self, partitions: Iterable[TopicPartition],
                         ) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata(self.consumed[tp], "") for tp in partitions
                if tp in self.consumed}

    def uncommitted(self, partitions: set[TopicPartition],
                    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Processed positions of ``partitions`` that moved since this consumer committed."""
        return {tp: OffsetAndMetadata(o, "") for tp, o in self.consumed.items()
                if tp in partitions and self.committed.get(tp) != o}

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self.states.items() if s.paused}


__all__ = ["ConsumerRebalanceListener", "PartitionState", "SubscriptionState"]
