"""The record accumulator: per-partition queues of batches, the memory they hold, and which
batches are ready to go (Kafka's ``RecordAccumulator``).

Why ``append`` does so little: it is the producer's per-record hot path. It finds the partition
(murmur2 of the key, remembered for recent keys, or the sticky partition for keyless records),
appends ``(key, value[, headers])`` and a timestamp to that partition's open batch and hands back
a small future. No encoding, no I/O, no await; the caller waits only when a new batch needs
memory that ``buffer.memory`` does not have.

``drain`` gives the sender, per leader, the batches that are full, older than ``linger.ms``,
being flushed or retried: one per partition per request, up to ``max.request.size``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import trio

from ....protocol.errors import ErrorCode
from ...core.errors import IllegalStateError, KafkaTimeoutError, error_for
from ...core.metadata import ClusterMetadata
from ...core.partitioner import StickyPartitioner, murmur2
from .batch import BATCH_OVERHEAD, RECORD_OVERHEAD, PartitionQueue, ProducerBatch, RecordFuture

LOGGER = logging.getLogger(__name__)

_KEY_HASH_CACHE = 65536  # keys whose murmur2 is remembered
Headers = Sequence[tuple[str, bytes | None]] | None
#: node id -> the open connection's ``can_send`` (or None without one) and the connect delay
ConnectionCheck = Callable[[int], tuple[bool, float]]


class RecordAccumulator:
    """Batches per partition, memory accounting, and the drain for the sender."""

    def __init__(self, config: dict[str, Any], metrics: dict[str, int],
                 wake_sender: Callable[[], None]) -> None:
        self._linger_s = config["linger.ms"] / 1000
        self._batch_size = config["batch.size"]
        self.buffer_memory = config["buffer.memory"]
        self._delivery_timeout_s = config["delivery.timeout.ms"] / 1000
        self._max_request_size = config["max.request.size"]
        self._ignore_keys = config["partitioner.ignore.keys"]
        self._metrics = metrics
        self._wake_sender = wake_sender
        self.partitions: dict[str, list[PartitionQueue]] = {}
        self.incomplete: set[ProducerBatch] = set()
        self.free_memory = self.buffer_memory
        self.memory_wanted = 0
        self.memory_freed = trio.Event()
        #: a new batch was opened since the caller last yielded to other tasks
        self.yield_needed = False
        self.closing = False
        #: set by the sender when nothing can be sent any more (InitProducerId refused)
        self.fatal_error: BaseException | None = None
        self._sticky = StickyPartitioner()
        self._key_hashes: dict[bytes, int] = {}
        self._available: Callable[[str], list[int]] = lambda topic: []

    # --- topics ------------------------------------------------------------------------------

    def use_metadata(self, metadata: ClusterMetadata) -> None:
        """Where the sticky partitioner finds which partitions have a leader."""
        def available(topic: str) -> list[int]:
            info = metadata.topics.get(topic)
            return info.available if info is not None else []

        self._available = available

    def add_topic(self, topic: str, num_partitions: int) -> None:
        if topic not in self.partitions:
            self.partitions[topic] = [PartitionQueue(topic, p) for p in range(num_partitions)]

    def grow(self, metadata: ClusterMetadata) -> None:
        """Topics that gained partitions get queues for them."""
        for topic, parts in self.partitions.items():
            info = metadata.topics.get(topic)
            if info is not None and info.num_partitions > len(parts):
                parts.extend(PartitionQueue(topic, p)
                             for p in range(len(parts), info.num_partitions))

    # --- appending ---------------------------------------------------------------------------

    def append(self, topic: str, value: bytes | None, key: bytes | None, headers: Headers,
               partition: int | None, timestamp_ms: int | None) -> RecordFuture | None:
        """Append without waiting; None when that needs the topic's metadata or memory first."""
        parts = self.partitions.get(topic)
        if parts is None:
            if self.closing:
                raise IllegalStateError("the producer is closed")
            return None
        if self.fatal_error is not None:
            raise self.fatal_error
        size = RECORD_OVERHEAD
        if value is not None:
            size += len(value)
        if key is not None:
            size += len(key)
        if headers:
            for header_key, header_value in headers:
                size += len(header_key) + 2
                if header_value is not None:
                    size += len(header_value)
        if partition is None:
            if key is None or self._ignore_keys:
                partition = self._sticky_partition(topic, parts, size)
            else:
                hashes = self._key_hashes  # keys repeat: hashing one costs more than the rest
                positive = hashes.get(key) if type(key) is bytes else None
                if positive is None:
                    positive = murmur2(key) & 0x7FFFFFFF
                    if type(key) is bytes:
                        if len(hashes) >= _KEY_HASH_CACHE:
                            hashes.clear()
                        hashes[key] = positive
                partition = positive % len(parts)
        elif not 0 <= partition < len(parts):
            raise error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            f"topic {topic!r} has no partition {partition} "
                            f"({len(parts)} partitions)")
        state = parts[partition]
        batch = state.open
        if batch is None or (batch.size + size > self._batch_size and batch.records):
            batch = self._new_batch(state, size)
            if batch is None:
                return None
        batch.size += size
        records = batch.records
        records.append((key, value, headers) if headers else (key, value))
        batch.timestamps.append(int(time.time() * 1000) if timestamp_ms is None
                                else timestamp_ms)
        return RecordFuture(batch, len(records) - 1)

    def _sticky_partition(self, topic: str, parts: list[PartitionQueue], size: int) -> int:
        sticky = self._sticky
        partition = sticky.sticky.get(topic)
        if partition is None:
            return sticky.next_partition(topic, self._available(topic), len(parts), None)
        state = parts[partition]
        batch = state.open
        if batch is None or (batch.size + size > self._batch_size and batch.records):
            # KIP-480: a keyless record that needs a new batch moves to a new sticky partition
            return sticky.next_partition(topic, self._available(topic), len(parts), partition)
        return partition

    def _new_batch(self, state: PartitionQueue, record_size: int) -> ProducerBatch | None:
        """Open a batch for ``state``'s partition, or None when ``buffer.memory`` is short."""
        if self.closing:
            raise IllegalStateError("the producer is closed")
        if record_size + BATCH_OVERHEAD > self._max_request_size:
            raise error_for(ErrorCode.MESSAGE_TOO_LARGE,
                            f"a record of {record_size} bytes exceeds max.request.size "
                            f"({self._max_request_size})")
        memory = max(self._batch_size, record_size + BATCH_OVERHEAD)
        if memory > self.buffer_memory:
            raise error_for(ErrorCode.MESSAGE_TOO_LARGE,
                            f"a record of {record_size} bytes exceeds buffer.memory "
                            f"({self.buffer_memory})")
        if state.open is not None:
            state.open = None  # full: the sender takes it from the queue
            self._wake_sender()
        if self.free_memory < memory:
            self.memory_wanted = memory
            return None
        self.free_memory -= memory
        batch = ProducerBatch(state.topic, state.partition, trio.current_time(),
                              self._delivery_timeout_s, memory)
        state.open = batch
        state.queue.append(batch)
        self.incomplete.add(batch)
        if len(state.queue) == 1:
            self._wake_sender()  # the sender learns this batch's linger deadline
        self.yield_needed = True
        return batch

    # --- completing --------------------------------------------------------------------------

    def complete(self, batch: ProducerBatch, base_offset: int = -1, log_append_time: int = -1,
                 *, error: BaseException | None = None) -> None:
        """Settle every future of ``batch`` and give its memory back."""
        if batch.done:
            return
        batch.done = True
        batch.base_offset = base_offset
        batch.log_append_time = log_append_time
        batch.error = error
        self._metrics["record-error-total" if error else "record-send-total"] += len(
            batch.records)
        if error is not None:
            LOGGER.warning("%d record(s) for %s-%s failed: %r", len(batch.records), batch.topic,
                           batch.partition, error)
        self.incomplete.discard(batch)
        self.free_memory += batch.memory
        self.memory_freed.set()
        self.memory_freed = trio.Event()
        batch.records = []  # futures keep only the timestamps alive
        batch.payload = None
        if batch._event is not None:
            batch._event.set()

    def fail_all(self, error: BaseException) -> None:
        for batch in list(self.incomplete):
            self.complete(batch, error=error)

    def requeue(self, state: PartitionQueue, batch: ProducerBatch) -> None:
        """Put a batch to retry back at the head of its queue, in sequence order."""
        queue = state.queue
        if batch.base_sequence < 0:
            queue.appendleft(batch)
            return
        index = 0
        for index, queued in enumerate(queue):  # noqa: B007
            if queued.base_sequence < 0 or queued.base_sequence > batch.base_sequence:
                break
        else:
            index = len(queue)
        queue.insert(index, batch)
        state.retrying += 1

    # --- draining ----------------------------------------------------------------------------

    def drain(self, metadata: ClusterMetadata, now: float, *, force: bool,
              can_send: ConnectionCheck, on_expired: Callable[[PartitionQueue, ProducerBatch],
                                                              None],
              ) -> tuple[dict[int, list[ProducerBatch]], float, bool]:
        """Take the batches ready for each leader that can take a request now.

        Returns (leader -> batches, seconds until something else may be ready, whether a
        partition with queued batches has no known leader). ``force`` (flush, close) ignores
        ``linger.ms``. An expired batch is handed to ``on_expired``.
        """
        linger_s = self._linger_s
        next_check = float("inf")
        by_node: dict[int, list[ProducerBatch]] = {}
        node_bytes: dict[int, int] = {}
        unknown_leader = False
        for topic, parts in self.partitions.items():
            info = metadata.topics.get(topic)
            for state in parts:
                queue = state.queue
                if not queue:
                    continue
                batch = queue[0]
                if now >= batch.deadline:
                    on_expired(state, batch)
                    next_check = 0
                    continue
                if batch.base_sequence >= 0 and state.in_flight:
                    continue  # a retry waits until nothing of this partition is in flight
                if batch.retry_at > now:
                    next_check = min(next_check, batch.retry_at - now)
                    continue
                full = len(queue) > 1 or batch is not state.open
                if not (full or force or batch.attempts):
                    ready_at = batch.created + linger_s
                    if ready_at > now:
                        next_check = min(next_check, ready_at - now)
                        continue
                leader = info.leader(state.partition) if info is not None else -1
                if leader < 0:
                    unknown_leader = True
                    continue
                node_batches = by_node.get(leader)
                if node_batches is None:
                    ready, delay = can_send(leader)
                    if not ready:
                        if delay > 0:
                            next_check = min(next_check, delay)
                        continue
                    node_batches = by_node[leader] = []
                    node_bytes[leader] = 0
                if node_bytes[leader] + batch.size > self._max_request_size and node_batches:
                    next_check = 0
                    continue
                node_bytes[leader] += batch.size
                node_batches.append(batch)
                queue.popleft()
                if batch is state.open:
                    state.open = None
                if batch.base_sequence >= 0:
                    state.retrying -= 1
                state.in_flight += 1
        return by_node, next_check, unknown_leader

    def expire(self, state: PartitionQueue, batch: ProducerBatch) -> None:
        """Fail the head batch of ``state``: it was not acknowledged in time."""
        state.queue.popleft()
        if batch is state.open:
            state.open = None
        if batch.base_sequence >= 0:
            state.retrying -= 1
        self.complete(batch, error=KafkaTimeoutError(
            f"{len(batch.records)} record(s) for {batch.topic}-{batch.partition} expired: "
            f"not acknowledged within delivery.timeout.ms "
            f"({self._delivery_timeout_s * 1000:.0f} ms)"))


__all__ = ["RecordAccumulator"]
