"""The sender task: drains ready batches to their leaders and settles the answers (Kafka's
``Sender``).

Each round: make sure an idempotent producer has an id, take what the accumulator says is ready
for every leader whose connection has a free in-flight slot, encode each batch once (with
compression, the producer id, epoch and sequence), and send one Produce per leader. Answers
come back through a callback from the connection's reader, which completes, retries or fails
each batch without a task per request. A batch failed by a retriable error (or a broken
connection) goes back to the head of its partition's queue in sequence order; while a partition
has such a retry pending it sends one batch at a time, lowest sequence first, so the log
receives the records in order, each once.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import trio

from ....protocol.api_keys import ApiKey
from ....protocol.compression import Compression
from ....protocol.errors import ErrorCode
from ....protocol.records import build_batch
from ...core.errors import KafkaError, describe_code, error_for
from ...core.produce import PartitionResult, parse_produce, produce_request
from ...core.structs import TopicPartition
from ..network import NetworkClient, Wakeup
from .accumulator import RecordAccumulator
from .batch import PartitionQueue, ProducerBatch
from .transaction_manager import TransactionManager
from .transactions import TransactionalState

LOGGER = logging.getLogger(__name__)

#: errors after which the metadata is refreshed before a retry
_STALE_METADATA = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.KAFKA_STORAGE_ERROR,
})


class Sender:
    """The producer's background task (see the module docstring)."""

    def __init__(self, config: dict[str, Any], client: NetworkClient,
                 accumulator: RecordAccumulator, transactions: TransactionManager,
                 metrics: dict[str, int], *, acks: int, compression: Compression) -> None:
        self._client = client
        self._accumulator = accumulator
        self._transactions = transactions
        self._metrics = metrics
        self._acks = acks
        self._compression = compression
        self._request_timeout_ms = config["request.timeout.ms"]
        self._retries = config["retries"]
        self.wakeup = Wakeup()
        self.flushing = 0
        self.closed = False

    async def run(self) -> None:
        while True:
            delay = await self.run_once()
            if delay > 0:
                with trio.move_on_after(delay):
                    await self.wakeup.wait()
            else:
                await trio.lowlevel.checkpoint()

    async def run_once(self) -> float:
        """Send what is ready; return how long to sleep unless woken earlier."""
        accumulator = self._accumulator
        if not accumulator.incomplete:
            return math.inf
        if self._transactions.need_producer_id:
            return await self._init_producer_id()
        txn = self._transactions.transactional
        if txn is not None:
            await self._add_partitions(txn)
        client = self._client
        by_node, next_check, unknown_leader = accumulator.drain(
            client.metadata, trio.current_time(),
            force=self.flushing > 0 or accumulator.closing, can_send=self._can_send,
            on_expired=self._expire)
        if unknown_leader:
            client.request_update()  # the client wakes us when the metadata arrives
        for node_id, batches in by_node.items():
            await self._send_produce(node_id, batches)
        return next_check

    async def _add_partitions(self, txn: TransactionalState) -> None:
        """AddPartitionsToTxn for every partition about to get its first batch of the
        transaction; on failure those batches fail and the transaction must be aborted."""
        accumulator = self._accumulator
        transactions = self._transactions
        while True:  # records for more partitions may arrive while a request is out
            new = {(b.topic, b.partition) for b in accumulator.incomplete} - txn.added
            if not new:
                return
            if txn.v2:  # Produce v12 adds them (KIP-890 part 2)
                txn.added |= new
                return
            try:
                await txn.add_partitions(self._client, transactions.producer_id,
                                         transactions.producer_epoch, new)
            except KafkaError as exc:
                txn.error = exc
                for topic, partition in new:
                    state = accumulator.partitions[topic][partition]
                    while state.queue:
                        accumulator.complete(state.queue.popleft(), error=exc)
                return

    def _can_send(self, node_id: int) -> tuple[bool, float]:
        conn = self._client.ready_connection(node_id)
        if conn is None:  # the client wakes us once it is connected
            return False, self._client.connect_delay(node_id)
        return conn.can_send(), 0.0

    async def _init_producer_id(self) -> float:
        accumulator = self._accumulator
        if any(p.in_flight for parts in accumulator.partitions.values() for p in parts):
            return math.inf  # the response callbacks wake us
        try:
            failure = await self._transactions.init_producer_id(
                self._client, accumulator.partitions.values())
        except KafkaError as exc:  # e.g. an authorization failure: nothing can be sent
            LOGGER.error("InitProducerId failed: %r", exc)
            accumulator.fatal_error = exc
            accumulator.fail_all(exc)
            return math.inf
        if failure is not None:
            accumulator.fail_all(failure)
            return math.inf
        return 0

    def _expire(self, state: PartitionQueue, batch: ProducerBatch) -> None:
        self._transactions.expired(batch)
        self._accumulator.expire(state, batch)

    def _encode(self, batch: ProducerBatch) -> bytes:
        payload = batch.payload
        if payload is None:
            transactions = self._transactions
            state = self._accumulator.partitions[batch.topic][batch.partition]
            sequence = batch.base_sequence = transactions.assign_sequence(state, batch)
            payload = batch.payload = build_batch(
                batch.records, timestamps=batch.timestamps, compression=self._compression,
                producer_id=transactions.producer_id,
                producer_epoch=transactions.producer_epoch, base_sequence=sequence,
                is_transactional=transactions.transactional is not None)
        return payload

    async def _send_produce(self, node_id: int, batches: list[ProducerBatch]) -> None:
        entries = []
        for batch in batches:
            batch.attempts += 1
            entries.append((batch.topic, batch.partition, self._encode(batch)))
        acks, timeout_ms = self._acks, self._request_timeout_ms
        txn = self._transactions.transactional
        transactional_id = None if txn is None else txn.transactional_id

        def body(version: int) -> Any:
            return produce_request(version, entries, acks=acks, timeout_ms=timeout_ms,
                                   transactional_id=transactional_id)

        conn = self._client.ready_connection(node_id)
        self._metrics["request-total"] += 1
        self._metrics["batch-send-total"] += len(batches)
        try:
            if conn is None:
                raise error_for(ErrorCode.NETWORK_EXCEPTION, f"node {node_id} disconnected")
            if acks == 0:
                await conn.send(ApiKey.Produce, body, expect_response=False)
                for batch in batches:
                    self._accumulator.partitions[batch.topic][batch.partition].in_flight -= 1
                    self._accumulator.complete(batch)
                return
            conn.send_nowait(ApiKey.Produce, body,
                             callback=lambda request: self._on_response(batches, request),
                             version=None if txn is None else txn.version(ApiKey.Produce))
        except KafkaError as exc:
            self._on_failure(batches, exc)

    def _on_response(self, batches: list[ProducerBatch], request: Any) -> None:
        if request.error is not None:
            self._on_failure(batches, request.error)
            return
        results = parse_produce(request.response)
        accumulator = self._accumulator
        for batch in batches:
            state = accumulator.partitions[batch.topic][batch.partition]
            state.in_flight -= 1
            part: PartitionResult | None = results.get(TopicPartition(batch.topic,
                                                                      batch.partition))
            if part is None:
                self._retry_or_fail(state, batch, error_for(
                    ErrorCode.UNKNOWN_SERVER_ERROR, "the produce response omitted the partition"))
                continue
            code = part.error
            if code == ErrorCode.NONE:
                accumulator.complete(batch, part.base_offset, part.log_append_time)
            elif code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                accumulator.complete(batch)
            else:
                self._retry_or_fail(state, batch, error_for(
                    code, f"{describe_code(code)} producing to {batch.topic}-{batch.partition}"))
        self.wakeup.set()

    def _on_failure(self, batches: list[ProducerBatch], error: BaseException) -> None:
        self._client.request_update()  # as Java does after a disconnect: leaders may have moved
        for batch in batches:
            state = self._accumulator.partitions[batch.topic][batch.partition]
            state.in_flight -= 1
            self._retry_or_fail(state, batch, error)
        self.wakeup.set()

    def _retry_or_fail(self, state: PartitionQueue, batch: ProducerBatch,
                       error: BaseException) -> None:
        code = getattr(error, "code", None)
        now = trio.current_time()
        retriable = self._transactions.retriable(state, code,
                                                 bool(getattr(error, "retriable", False)))
        if code in _STALE_METADATA:
            self._client.request_update()
        if (retriable and not self.closed and batch.attempts <= self._retries
                and now < batch.deadline):
            batch.retry_at = now + self._client.retry_backoff.backoff_ms(batch.attempts - 1) / 1000
            self._metrics["record-retry-total"] += len(batch.records)
            self._accumulator.requeue(state, batch)
            LOGGER.debug("retrying %r after %r", batch, error)
            return
        txn = self._transactions.transactional
        if txn is not None and isinstance(error, KafkaError):
            txn.error = error  # the transaction can only be aborted now
        self._accumulator.complete(batch, error=error)


__all__ = ["Sender"]
