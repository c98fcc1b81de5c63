"""The producer: a record accumulator, a sender task, and the idempotent-producer bookkeeping.

Why it is built like Kafka's (``RecordAccumulator`` + ``Sender`` + ``TransactionManager``):

* ``send_soon`` does as little as it can per record: find the partition, append
  ``(key, value, headers)`` and a timestamp to that partition's open batch, hand back a small
  future. No encoding, no I/O, no await unless a batch fills up (then it yields once so the
  sender can run) or ``buffer.memory`` is exhausted (then it waits, up to ``max.block.ms``).
* The sender task drains batches that are full, older than ``linger.ms``, being flushed or
  retried, one per partition per request, to every leader whose connection has a free in-flight
  slot. Only then is a batch encoded (``build_batch``, with compression and the producer id,
  epoch and sequence), once: a retry resends the very same bytes, so the broker recognises a
  duplicate by its sequence.
* Responses come back through a callback from the connection's reader, which completes, retries
  or fails each batch without a task per request.

Idempotence (on by default, as in Java): one ``InitProducerId`` before the first batch; each
partition numbers its records from 0 for the producer's epoch. A batch failed by a retriable
error (or a broken connection) goes back to the head of its partition's queue in sequence order,
and while a partition has such a retry pending it sends one batch at a time, lowest sequence
first, so the log receives the records in order, each once. A sequence error the producer cannot
explain fails that batch and starts a new producer id (sequences restart at 0).

Batch lifecycle::

    OPEN (accepting records) -> QUEUED (full or lingered) -> IN FLIGHT -> DONE (acked / failed)
                                      ^--------- retriable error --------'
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Generator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

import trio

from ..client_core.errors import (
    BufferExhaustedError,
    ConfigError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedVersionError,
    describe_code,
    error_for,
)
from ..client_core.partitioner import StickyPartitioner, murmur2
from ..protocol.api_keys import ApiKey, request_class
from ..protocol.compression import Compression
from ..protocol.errors import ErrorCode
from ..protocol.records import build_batch
from .config import PRODUCER_DEFAULTS, normalize
from .network import NetworkClient, Wakeup

LOGGER = logging.getLogger(__name__)

#: bytes a record costs in a batch beyond its key and value (length, attributes, deltas, ...)
_RECORD_OVERHEAD = 21
_BATCH_OVERHEAD = 61

_COMPRESSION = {
    "none": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}
_ACKS = {"all": -1, "-1": -1, "0": 0, "1": 1, -1: -1, 0: 0, 1: 1}
_STALE_METADATA = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.KAFKA_STORAGE_ERROR,
})
_MAX_SEQUENCE = 2**31 - 1
_KEY_HASH_CACHE = 65536  # keys whose murmur2 is remembered


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
        self.size = _BATCH_OVERHEAD
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


class _Partition:
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


class Producer:
    """A Kafka producer for Trio; make one with ``open_producer``."""

    def __init__(self, config: dict[str, Any], *, explicit_idempotence: bool = False) -> None:
        self.config = config
        self._explicit_idempotence = explicit_idempotence
        acks = config["acks"]
        if acks not in _ACKS:
            raise ConfigError(f"config 'acks' must be all, -1, 0 or 1, got {acks!r}")
        self._acks = _ACKS[acks]
        codec = str(config["compression.type"]).lower()
        if codec not in _COMPRESSION:
            raise ConfigError(f"config 'compression.type' must be one of "
                              f"{', '.join(_COMPRESSION)}, got {config['compression.type']!r}")
        self._compression = _COMPRESSION[codec]
        if config["transactional.id"] is not None:
            raise ConfigError("transactional producers are not supported (transactional.id)")
        self._idempotent = self._check_idempotence(config, explicit_idempotence)
        self._linger_s = config["linger.ms"] / 1000
        self._batch_size = config["batch.size"]
        self._buffer_memory = config["buffer.memory"]
        self._free_memory = self._buffer_memory
        self._memory_wanted = 0
        self._yield_needed = False
        self._memory_freed = trio.Event()
        self._max_block_s = config["max.block.ms"] / 1000
        self._delivery_timeout_s = config["delivery.timeout.ms"] / 1000
        self._request_timeout_ms = config["request.timeout.ms"]
        self._max_request_size = config["max.request.size"]
        self._retries = config["retries"]
        self._ignore_keys = config["partitioner.ignore.keys"]
        self._max_in_flight = config["max.in.flight.requests.per.connection"]
        self._client = NetworkClient(config, allow_auto_topic_creation=True)
        self._partitions: dict[str, list[_Partition]] = {}
        self._sticky = StickyPartitioner()
        self._key_hashes: dict[bytes, int] = {}
        self._incomplete: set[ProducerBatch] = set()
        self._wakeup = Wakeup()
        self._flushing = 0
        self._closing = False
        self._closed = False
        self._producer_id = -1
        self._producer_epoch = -1
        self._need_producer_id = self._idempotent
        self._fatal_error: KafkaError | None = None
        self._nursery: trio.Nursery | None = None
        self._metrics = {"record-send-total": 0, "record-retry-total": 0,
                         "record-error-total": 0, "batch-send-total": 0, "request-total": 0}
        self._topic_class = request_class(ApiKey.Produce).TopicProduceData  # type: ignore[union-attr]
        self._partition_class = self._topic_class.PartitionProduceData

    @staticmethod
    def _check_idempotence(config: dict[str, Any], explicit: bool) -> bool:
        if not config["enable.idempotence"]:
            return False
        acks = _ACKS.get(config["acks"])
        problems = []
        if acks != -1:
            problems.append("acks=all")
        if config["max.in.flight.requests.per.connection"] > 5:
            problems.append("max.in.flight.requests.per.connection <= 5")
        if config["retries"] < 1:
            problems.append("retries > 0")
        if problems and explicit:
            raise ConfigError(f"enable.idempotence=true needs {', '.join(problems)}")
        return not problems

    @property
    def client(self) -> NetworkClient:
        return self._client

    def metrics(self) -> dict[str, int]:
        """Counters under the Java producer's metric names (records acknowledged, retried,
        failed; batches and Produce requests sent)."""
        return dict(self._metrics)

    @property
    def producer_id(self) -> int:
        """The idempotent producer id (-1 before the first batch, or without idempotence)."""
        return self._producer_id

    # --- lifecycle ---------------------------------------------------------------------------

    async def _start(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self._client.add_listener(self._on_cluster_change)
        self._client.start(nursery)
        nursery.start_soon(self._sender_loop)

    def _on_cluster_change(self) -> None:
        """A connection opened or metadata arrived: grow topics that gained partitions, and
        let the sender look at leaders and connections again."""
        topics = self._client.metadata.topics
        for topic, parts in self._partitions.items():
            info = topics.get(topic)
            if info is not None and info.num_partitions > len(parts):
                parts.extend(_Partition(topic, p) for p in range(len(parts),
                                                                 info.num_partitions))
        self._wakeup.set()

    async def _close(self, *, flush: bool) -> None:
        self._closing = True
        if flush:
            await self.flush()
        self._closed = True
        for batch in list(self._incomplete):
            self._complete(batch, error=IllegalStateError("the producer was closed"))
        self._client.close()

    # --- sending -----------------------------------------------------------------------------

    async def send(self, topic: str, value: bytes | None, key: bytes | None = None,
                   headers: Sequence[tuple[str, bytes | None]] | None = None,
                   partition: int | None = None,
                   timestamp_ms: int | None = None) -> RecordMetadata:
        """Send one record and wait until the broker acknowledges it."""
        future = await self.send_soon(topic, value, key, headers, partition, timestamp_ms)
        return await future.wait()

    async def send_soon(self, topic: str, value: bytes | None, key: bytes | None = None,
                        headers: Sequence[tuple[str, bytes | None]] | None = None,
                        partition: int | None = None,
                        timestamp_ms: int | None = None) -> RecordFuture:
        """Queue one record; returns a future as soon as the record is in a batch.

        Waits (up to ``max.block.ms``) only for the topic's metadata and for ``buffer.memory``;
        yields to other tasks each time it starts a new batch.
        """
        future = self._try_append(topic, value, key, headers, partition, timestamp_ms)
        if future is not None:
            if self._yield_needed:
                self._yield_needed = False
                await trio.lowlevel.checkpoint()
            return future
        waiting_for = "buffer.memory to be freed"
        with trio.move_on_after(self._max_block_s):
            while True:
                if topic not in self._partitions:
                    waiting_for = f"topic {topic!r} to appear in metadata"
                    await self._topic_partitions(topic)
                elif self._free_memory < self._memory_wanted:
                    waiting_for = "buffer.memory to be freed"
                    await self._memory_freed.wait()
                future = self._try_append(topic, value, key, headers, partition, timestamp_ms)
                if future is not None:
                    self._yield_needed = False
                    await trio.lowlevel.checkpoint()
                    return future
        raise KafkaTimeoutError(f"gave up waiting for {waiting_for} after max.block.ms "
                                f"({self._max_block_s * 1000:.0f} ms)")

    def send_nowait(self, topic: str, value: bytes | None, key: bytes | None = None,
                    headers: Sequence[tuple[str, bytes | None]] | None = None,
                    partition: int | None = None,
                    timestamp_ms: int | None = None) -> RecordFuture:
        """``send_soon`` without waiting: raises ``BufferExhaustedError`` when it would wait.

        The topic must already be known (one earlier ``send_soon``/``send`` to it suffices).
        """
        future = self._try_append(topic, value, key, headers, partition, timestamp_ms)
        if future is None:
            if topic not in self._partitions:
                raise BufferExhaustedError(f"topic {topic!r} is not known yet: send to it with "
                                           "send_soon first")
            raise BufferExhaustedError(f"buffer.memory ({self._buffer_memory} bytes) is full")
        self._yield_needed = False
        return future

    def _try_append(self, topic: str, value: bytes | None, key: bytes | None,
                    headers: Sequence[tuple[str, bytes | None]] | None, partition: int | None,
                    timestamp_ms: int | None) -> RecordFuture | None:
        """Append without waiting; None when that needs metadata or memory first."""
        parts = self._partitions.get(topic)
        if parts is None:
            if self._closing:
                raise IllegalStateError("the producer is closed")
            return None
        if self._fatal_error is not None:
            raise self._fatal_error
        size = _RECORD_OVERHEAD
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

    def _sticky_partition(self, topic: str, parts: list[_Partition], size: int) -> int:
        sticky = self._sticky
        partition = sticky._sticky.get(topic)
        if partition is None:
            return sticky.next_partition(topic, self._available(topic), len(parts), None)
        state = parts[partition]
        batch = state.open
        if batch is None or (batch.size + size > self._batch_size and batch.records):
            # KIP-480: a keyless record that needs a new batch moves to a new sticky partition
            return sticky.next_partition(topic, self._available(topic), len(parts), partition)
        return partition

    def _available(self, topic: str) -> list[int]:
        info = self._client.metadata.topics.get(topic)
        return info.available if info is not None else []

    async def _topic_partitions(self, topic: str) -> list[_Partition]:
        info = await self._client.wait_for_topic(topic, math.inf)  # the caller has the deadline
        parts = self._partitions.get(topic)
        if parts is None:
            parts = [_Partition(topic, p) for p in range(info.num_partitions)]
            self._partitions[topic] = parts
        return parts

    def _new_batch(self, state: _Partition, record_size: int) -> ProducerBatch | None:
        """Open a batch for ``state``'s partition, or None when ``buffer.memory`` is short."""
        if self._closing:
            raise IllegalStateError("the producer is closed")
        if record_size + _BATCH_OVERHEAD > self._max_request_size:
            raise error_for(ErrorCode.MESSAGE_TOO_LARGE,
                            f"a record of {record_size} bytes exceeds max.request.size "
                            f"({self._max_request_size})")
        memory = max(self._batch_size, record_size + _BATCH_OVERHEAD)
        if memory > self._buffer_memory:
            raise error_for(ErrorCode.MESSAGE_TOO_LARGE,
                            f"a record of {record_size} bytes exceeds buffer.memory "
                            f"({self._buffer_memory})")
        if state.open is not None:
            state.open = None  # full: the sender takes it from the queue
            self._wakeup.set()
        if self._free_memory < memory:
            self._memory_wanted = memory
            return None
        self._free_memory -= memory
        batch = ProducerBatch(state.topic, state.partition, trio.current_time(),
                              self._delivery_timeout_s, memory)
        state.open = batch
        state.queue.append(batch)
        self._incomplete.add(batch)
        if len(state.queue) == 1:
            self._wakeup.set()  # the sender learns this batch's linger deadline
        self._yield_needed = True
        return batch

    async def flush(self) -> None:
        """Send every queued record now and wait until each is acknowledged or failed."""
        pending = list(self._incomplete)
        if not pending:
            await trio.lowlevel.checkpoint()
            return
        self._flushing += 1
        self._wakeup.set()
        try:
            for batch in pending:
                await batch.wait()
        finally:
            self._flushing -= 1

    # --- the sender --------------------------------------------------------------------------

    async def _sender_loop(self) -> None:
        while True:
            delay = await self._run_once()
            if delay > 0:
                with trio.move_on_after(delay):
                    await self._wakeup.wait()
            else:
                await trio.lowlevel.checkpoint()

    async def _run_once(self) -> float:
        """Send what is ready; return how long to sleep unless woken earlier."""
        if not self._incomplete:
            return math.inf
        if self._need_producer_id:
            if any(p.in_flight for parts in self._partitions.values() for p in parts):
                return math.inf  # the response callbacks wake us
            try:
                await self._init_producer_id()
            except KafkaError as exc:  # e.g. an authorization failure: nothing can be sent
                LOGGER.error("InitProducerId failed: %r", exc)
                self._fatal_error = exc
                for batch in list(self._incomplete):
                    self._complete(batch, error=exc)
                return math.inf
            return 0
        now = trio.current_time()
        client = self._client
        metadata = client.metadata
        linger_s = self._linger_s
        force = self._flushing > 0 or self._closing
        next_check = math.inf
        by_node: dict[int, list[ProducerBatch]] = {}
        node_bytes: dict[int, int] = {}
        unknown_leader = False
        for topic, parts in self._partitions.items():
            info = metadata.topics.get(topic)
            for state in parts:
                queue = state.queue
                if not queue:
                    continue
                batch = queue[0]
                if now >= batch.deadline:
                    self._expire(state, batch)
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
                    conn = client.ready_connection(leader)
                    if conn is None or not conn.can_send():
                        if conn is None:  # the client wakes us once it is connected
                            delay = client.connect_delay(leader)
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
        if unknown_leader:
            client.request_update()  # the client wakes us when the metadata arrives
        for node_id, batches in by_node.items():
            await self._send_produce(node_id, batches)
        return next_check

    def _expire(self, state: _Partition, batch: ProducerBatch) -> None:
        state.queue.popleft()
        if batch is state.open:
            state.open = None
        if batch.base_sequence >= 0:
            state.retrying -= 1
            if self._idempotent:
                self._need_producer_id = True  # the sequence gap can never be filled
        self._complete(batch, error=KafkaTimeoutError(
            f"{len(batch.records)} record(s) for {batch.topic}-{batch.partition} expired: "
            f"not acknowledged within delivery.timeout.ms "
            f"({self._delivery_timeout_s * 1000:.0f} ms)"))

    def _encode(self, batch: ProducerBatch) -> bytes:
        payload = batch.payload
        if payload is None:
            sequence = -1
            if self._idempotent:
                state = self._partitions[batch.topic][batch.partition]
                sequence = state.next_sequence
                state.next_sequence = (sequence + len(batch.records)) & _MAX_SEQUENCE
            batch.base_sequence = sequence
            payload = batch.payload = build_batch(
                batch.records, timestamps=batch.timestamps, compression=self._compression,
                producer_id=self._producer_id, producer_epoch=self._producer_epoch,
                base_sequence=sequence)
        return payload

    async def _send_produce(self, node_id: int, batches: list[ProducerBatch]) -> None:
        topics: dict[str, list[Any]] = {}
        partition_class = self._partition_class
        for batch in batches:
            batch.attempts += 1
            entry = partition_class(index=batch.partition, records=self._encode(batch))
            topics.setdefault(batch.topic, []).append(entry)
        body = {
            "transactional_id": None,
            "acks": self._acks,
            "timeout_ms": self._request_timeout_ms,
            "topic_data": [self._topic_class(name=name, partition_data=data)
                           for name, data in topics.items()],
        }
        conn = self._client.ready_connection(node_id)
        self._metrics["request-total"] += 1
        self._metrics["batch-send-total"] += len(batches)
        try:
            if conn is None:
                raise error_for(ErrorCode.NETWORK_EXCEPTION, f"node {node_id} disconnected")
            if self._acks == 0:
                await conn.send(ApiKey.Produce, body, expect_response=False)
                for batch in batches:
                    self._partitions[batch.topic][batch.partition].in_flight -= 1
                    self._complete(batch)
                return
            conn.send_nowait(ApiKey.Produce, body,
                             callback=lambda request: self._on_response(batches, request))
        except KafkaError as exc:
            self._on_failure(batches, exc)

    def _on_response(self, batches: list[ProducerBatch], request: Any) -> None:
        if request.error is not None:
            self._on_failure(batches, request.error)
            return
        results: dict[tuple[str, int], Any] = {}
        for topic in request.response.responses:
            for part in topic.partition_responses:
                results[(topic.name, part.index)] = part
        for batch in batches:
            state = self._partitions[batch.topic][batch.partition]
            state.in_flight -= 1
            part = results.get((batch.topic, batch.partition))
            if part is None:
                self._retry_or_fail(state, batch, error_for(
                    ErrorCode.UNKNOWN_SERVER_ERROR, "the produce response omitted the partition"))
                continue
            code = part.error_code
            if code == ErrorCode.NONE:
                self._complete(batch, part.base_offset, part.log_append_time_ms)
            elif code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                self._complete(batch)
            else:
                self._retry_or_fail(state, batch, error_for(
                    code, f"{describe_code(code)} producing to {batch.topic}-{batch.partition}"))
        self._wakeup.set()

    def _on_failure(self, batches: list[ProducerBatch], error: BaseException) -> None:
        self._client.request_update()  # as Java does after a disconnect: leaders may have moved
        for batch in batches:
            state = self._partitions[batch.topic][batch.partition]
            state.in_flight -= 1
            self._retry_or_fail(state, batch, error)
        self._wakeup.set()

    def _retry_or_fail(self, state: _Partition, batch: ProducerBatch,
                       error: BaseException) -> None:
        code = getattr(error, "code", None)
        now = trio.current_time()
        retriable = bool(getattr(error, "retriable", False))
        if self._idempotent and code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            # After an earlier batch of this partition failed, later ones see a gap: retry them.
            retriable = state.retrying > 0 or state.in_flight > 0 or any(
                q.base_sequence >= 0 for q in state.queue)
            if not retriable:
                self._need_producer_id = True
        elif code == ErrorCode.UNKNOWN_PRODUCER_ID:
            retriable = True
            self._need_producer_id = True
        elif code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED):
            self._need_producer_id = True
        if code in _STALE_METADATA:
            self._client.request_update()
        if (retriable and not self._closed and batch.attempts <= self._retries
                and now < batch.deadline):
            batch.retry_at = now + self._client.retry_backoff.backoff_ms(batch.attempts - 1) / 1000
            self._metrics["record-retry-total"] += len(batch.records)
            self._requeue(state, batch)
            LOGGER.debug("retrying %r after %r", batch, error)
            return
        self._complete(batch, error=error)

    def _requeue(self, state: _Partition, batch: ProducerBatch) -> None:
        queue = state.queue
        if batch.base_sequence < 0:
            queue.appendleft(batch)
            return
        # retries keep sequence order at the head of the queue
        index = 0
        for index, queued in enumerate(queue):  # noqa: B007
            if queued.base_sequence < 0 or queued.base_sequence > batch.base_sequence:
                break
        else:
            index = len(queue)
        queue.insert(index, batch)
        state.retrying += 1

    def _complete(self, batch: ProducerBatch, base_offset: int = -1, log_append_time: int = -1,
                  *, error: BaseException | None = None) -> None:
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
        self._incomplete.discard(batch)
        self._free_memory += batch.memory
        self._memory_freed.set()
        self._memory_freed = trio.Event()
        batch.records = []  # futures keep only the timestamps alive
        batch.payload = None
        if batch._event is not None:
            batch._event.set()

    async def _init_producer_id(self) -> None:
        """InitProducerId (retrying retriable errors); restart every partition's sequences."""
        client = self._client
        attempts = 0
        while True:
            try:
                conn = await client.connection(client.least_loaded_node())
                response = await conn.request(ApiKey.InitProducerId, {
                    "transactional_id": None, "transaction_timeout_ms": 60000,
                    "producer_id": -1, "producer_epoch": -1})
            except UnsupportedVersionError as exc:
                if self._explicit_idempotence:
                    for batch in list(self._incomplete):
                        self._complete(batch, error=exc)
                    return
                LOGGER.warning("the broker does not support InitProducerId; producing without "
                               "idempotence")
                self._idempotent = False
                self._need_producer_id = False
                return
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                response = None
                error: KafkaError = exc
            else:
                if response.error_code == ErrorCode.NONE:
                    break
                error = error_for(response.error_code)
                if not error.retriable:
                    raise error
            attempts += 1
            LOGGER.info("InitProducerId failed (%r); retrying", error)
            await trio.sleep(client.retry_backoff.backoff_ms(attempts - 1) / 1000)
        self._producer_id = response.producer_id
        self._producer_epoch = response.producer_epoch
        self._need_producer_id = False
        LOGGER.debug("producer id %s epoch %s", self._producer_id, self._producer_epoch)
        for parts in self._partitions.values():
            for state in parts:
                state.next_sequence = 0
                for batch in state.queue:
                    if batch.payload is not None:
                        batch.payload = None
                        batch.base_sequence = -1
                state.retrying = 0


@asynccontextmanager
async def open_producer(bootstrap_servers: str | list[str] | None = None, *,
                        config: Mapping[str, Any] | None = None,
                        **kwargs: Any) -> AsyncIterator[Producer]:
    """A producer whose background tasks live exactly as long as the ``async with`` block.

    Leaving the block normally flushes every queued record first; leaving it by an exception
    (or cancellation) abandons them.
    """
    if bootstrap_servers is not None:
        kwargs["bootstrap_servers"] = bootstrap_servers
    merged = normalize("producer", PRODUCER_DEFAULTS, config, kwargs)
    explicit = any(k.replace("_", ".") == "enable.idempotence"
                   for k in [*(config or {}), *kwargs])
    producer = Producer(merged, explicit_idempotence=explicit and merged["enable.idempotence"])
    async with trio.open_nursery() as nursery:
        await producer._start(nursery)
        try:
            yield producer
        except BaseException:
            await producer._close(flush=False)
            nursery.cancel_scope.cancel()
            raise
        await producer._close(flush=True)
        nursery.cancel_scope.cancel()


