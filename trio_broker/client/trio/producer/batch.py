"""Producer batches and the futures of the records in them.

Batch lifecycle::

    OPEN (accepting records) -> QUEUED (full or lingered) -> IN FLIGHT -> DONE (acked / failed)
                                      ^--------- retriable error --------'

A record costs a slot in its batch's lists and a two-slot future; the batch is encoded once,
when the sender first takes it, and a retry resends the very same bytes.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Generator
from typing import Any, NamedTuple

import trio

from ...core.errors import IllegalStateError

#: bytes a record costs in a batch beyond its key and value (length, attributes, deltas, ...)
RECORD_OVERHEAD = 21
BATCH_OVERHEAD = 61


class RecordMetadata(NamedTuple):
    """Where an acknowledged record landed (offset -1 when the broker does not say: acks=0)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ProducerBatch:
    """Records for one partition, sent and acknowledged together."""

    __slots__ = ("_event", "attempts", "base_offset", "base_sequence", "created", "deadline",
                 "done", "error", "log_append_time", "memory", "partition", "payload", "records",
                 "retry_at", "size", "timestamps", "topic")

    def __init__(self, topic: str, partition: int, now: float, delivery_timeout_s: float,
                 memory: int) -> None:
        self.topic = topic
        self.partition = partition
        self.records: list[tuple[Any, ...]] = []
        self.timestamps: list[int] = []
        self.size = BATCH_OVERHEAD
        self.created = now
        self.deadline = now + delivery_timeout_s
        self.memory = memory
        self.attempts = 0
        self.retry_at = -math.inf
        self.base_sequence = -1
        self.payload: bytes | None = None
        self.done = False
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self._event: trio.Event | None = None

    def __repr__(self) -> str:
        return (f"<ProducerBatch {self.topic}-{self.partition} records={len(self.records)} "
                f"seq={self.base_sequence} attempts={self.attempts}>")

    async def wait(self) -> None:
        if not self.done:
            if self._event is None:
                self._event = trio.Event()
            await self._event.wait()
        else:
            await trio.lowlevel.checkpoint()


class RecordFuture:
    """The outcome of one ``send_soon``: ``await future`` gives its ``RecordMetadata``."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: ProducerBatch, index: int) -> None:
        self._batch = batch
        self._index = index

    def done(self) -> bool:
        return self._batch.done

    def result(self) -> RecordMetadata:
        """The metadata of a completed send; raises its error, or ``IllegalStateError``."""
        batch = self._batch
        if not batch.done:
            raise IllegalStateError("the record is not acknowledged yet")
        if batch.error is not None:
            raise batch.error
        base = batch.base_offset
        timestamp = (batch.log_append_time if batch.log_append_time >= 0
                     else batch.timestamps[self._index])
        return RecordMetadata(batch.topic, batch.partition,
                              base + self._index if base >= 0 else -1, timestamp)

    def exception(self) -> BaseException | None:
        return self._batch.error if self._batch.done else None

    async def wait(self) -> RecordMetadata:
        await self._batch.wait()
        return self.result()

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        return self.wait().__await__()


class PartitionQueue:
    """Producer state of one partition: queued batches, the open one, idempotence counters."""

    __slots__ = ("in_flight", "next_sequence", "open", "partition", "queue", "retrying",
                 "topic")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.queue: deque[ProducerBatch] = deque()
        self.open: ProducerBatch | None = None
        self.in_flight = 0
        self.next_sequence = 0
        self.retrying = 0  # queued batches that already carry a sequence


__all__ = ["BATCH_OVERHEAD", "RECORD_OVERHEAD", "PartitionQueue", "ProducerBatch", "RecordFuture",
           "RecordMetadata"]
