"""The producer's public face: ``send``, ``send_soon``, ``send_nowait``, ``flush``.

Built as Kafka's and aiokafka's producers are: a record accumulator (``accumulator``: batches per
partition, ``buffer.memory``), a sender task (``sender``: drains ready batches to leaders,
retries) and the idempotent-producer bookkeeping (``transaction_manager``). This module wires
them together and owns the waits a caller may see: for the topic's metadata and for memory, each
up to ``max.block.ms``.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

from ....protocol.compression import Compression
from ...core.errors import (
    BufferExhaustedError,
    ConfigError,
    IllegalStateError,
    KafkaTimeoutError,
)
from ...core.produce import ACKS
from ...core.structs import TopicPartition
from ..config import PRODUCER_DEFAULTS, normalize
from ..network import NetworkClient
from .accumulator import RecordAccumulator
from .batch import RecordFuture, RecordMetadata
from .sender import Sender
from .transaction_manager import TransactionManager, idempotence_possible
from .transactions import TransactionalState

_COMPRESSION = {
    "none": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}
Headers = Sequence[tuple[str, bytes | None]] | None


class Producer:
    """A Kafka producer for Trio; make one with ``open_producer``."""

    def __init__(self, config: dict[str, Any], *, explicit_idempotence: bool = False) -> None:
        self.config = config
        acks = config["acks"]
        if acks not in ACKS:
            raise ConfigError(f"config 'acks' must be all, -1, 0 or 1, got {acks!r}")
        codec = str(config["compression.type"]).lower()
        if codec not in _COMPRESSION:
            raise ConfigError(f"config 'compression.type' must be one of "
                              f"{', '.join(_COMPRESSION)}, got {config['compression.type']!r}")
        transactional_id = config["transactional.id"]
        idempotent = idempotence_possible(config, explicit_idempotence or
                                          transactional_id is not None)
        self._max_block_s = config["max.block.ms"] / 1000
        self._metrics = {"record-send-total": 0, "record-retry-total": 0,
                         "record-error-total": 0, "batch-send-total": 0, "request-total": 0}
        self._client = NetworkClient(config, allow_auto_topic_creation=True)
        self._transactions = TransactionManager(idempotent=idempotent,
                                                explicit=explicit_idempotence)
        self._txn: TransactionalState | None = None
        if transactional_id is not None:
            self._txn = TransactionalState(transactional_id, config["transaction.timeout.ms"])
            self._transactions.transactional = self._txn
        self._accumulator = RecordAccumulator(config, self._metrics,
                                              lambda: self._sender.wakeup.set())
        self._accumulator.use_metadata(self._client.metadata)
        self._sender = Sender(config, self._client, self._accumulator, self._transactions,
                              self._metrics, acks=ACKS[acks], compression=_COMPRESSION[codec])

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
        return self._transactions.producer_id

    # --- lifecycle ---------------------------------------------------------------------------

    async def _start(self, nursery: trio.Nursery) -> None:
        self._client.add_listener(self._on_cluster_change)
        self._client.start(nursery)
        nursery.start_soon(self._sender.run)

    def _on_cluster_change(self) -> None:
        """A connection opened or metadata arrived: grow topics that gained partitions, and
        let the sender look at leaders and connections again."""
        self._accumulator.grow(self._client.metadata)
        self._sender.wakeup.set()

    async def _close(self, *, flush: bool) -> None:
        self._accumulator.closing = True
        if flush:
            await self.flush()
        self._sender.closed = True
        self._accumulator.fail_all(IllegalStateError("the producer was closed"))
        self._client.close()

    # --- sending -----------------------------------------------------------------------------

    async def send(self, topic: str, value: bytes | None, key: bytes | None = None,
                   headers: Headers = None, partition: int | None = None,
                   timestamp_ms: int | None = None) -> RecordMetadata:
        """Send one record and wait until the broker acknowledges it."""
        future = await self.send_soon(topic, value, key, headers, partition, timestamp_ms)
        return await future.wait()

    async def send_soon(self, topic: str, value: bytes | None, key: bytes | None = None,
                        headers: Headers = None, partition: int | None = None,
                        timestamp_ms: int | None = None) -> RecordFuture:
        """Queue one record; returns a future as soon as the record is in a batch.

        Waits (up to ``max.block.ms``) only for the topic's metadata and for ``buffer.memory``;
        yields to other tasks each time it starts a new batch.
        """
        self._check_transaction()
        accumulator = self._accumulator
        future = accumulator.append(topic, value, key, headers, partition, timestamp_ms)
        if future is not None:
            if accumulator.yield_needed:
                accumulator.yield_needed = False
                await trio.lowlevel.checkpoint()
            return future
        waiting_for = "buffer.memory to be freed"
        with trio.move_on_after(self._max_block_s):
            while True:
                if topic not in accumulator.partitions:
                    waiting_for = f"topic {topic!r} to appear in metadata"
                    # the caller's max.block.ms is the deadline
                    info = await self._client.wait_for_topic(topic, math.inf)
                    accumulator.add_topic(topic, info.num_partitions)
                elif accumulator.free_memory < accumulator.memory_wanted:
                    waiting_for = "buffer.memory to be freed"
                    await accumulator.memory_freed.wait()
                future = accumulator.append(topic, value, key, headers, partition, timestamp_ms)
                if future is not None:
                    accumulator.yield_needed = False
                    await trio.lowlevel.checkpoint()
                    return future
        raise KafkaTimeoutError(f"gave up waiting for {waiting_for} after max.block.ms "
                                f"({self._max_block_s * 1000:.0f} ms)")

    def send_nowait(self, topic: str, value: bytes | None, key: bytes | None = None,
                    headers: Headers = None, partition: int | None = None,
                    timestamp_ms: int | None = None) -> RecordFuture:
        """``send_soon`` without waiting: raises ``BufferExhaustedError`` when it would wait.

        The topic must already be known (one earlier ``send_soon``/``send`` to it suffices).
        """
        self._check_transaction()
        accumulator = self._accumulator
        future = accumulator.append(topic, value, key, headers, partition, timestamp_ms)
        if future is None:
            if topic not in accumulator.partitions:
                raise BufferExhaustedError(f"topic {topic!r} is not known yet: send to it with "
                                           "send_soon first")
            raise BufferExhaustedError(f"buffer.memory ({accumulator.buffer_memory} bytes) is "
                                       "full")
        accumulator.yield_needed = False
        return future

    async def flush(self) -> None:
        """Send every queued record now and wait until each is acknowledged or failed."""
        pending = list(self._accumulator.incomplete)
        if not pending:
            await trio.lowlevel.checkpoint()
            return
        sender = self._sender
        sender.flushing += 1
        sender.wakeup.set()
        try:
            for batch in pending:
                await batch.wait()
        finally:
            sender.flushing -= 1


    # --- transactions ------------------------------------------------------------------------

    def _check_transaction(self) -> None:
        txn = self._txn
        if txn is not None and not txn.in_transaction:
            raise IllegalStateError("a transactional producer sends inside a transaction: "
                                    "async with producer.transaction(): ...")

    def _require_txn(self) -> TransactionalState:
        if self._txn is None:
            raise IllegalStateError("not a transactional producer (set transactional.id)")
        if self._txn.fenced:
            raise self._txn.error or IllegalStateError("the producer was fenced")
        return self._txn

    async def begin_transaction(self) -> None:
        """Start a transaction (the first one also gets the producer id and epoch, fencing
        any earlier producer with this transactional id)."""
        txn = self._require_txn()
        if txn.in_transaction:
            raise IllegalStateError("a transaction is already open")
        tm = self._transactions
        if tm.producer_id < 0 or txn.error is not None:
            tm.need_producer_id = True
            txn.error = None
            await tm.init_producer_id(self._client, self._accumulator.partitions.values())
        await txn.refresh_version(self._client)
        txn.in_transaction = True

    async def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, int],
                                          group_id: str, *, generation_id: int = -1,
                                          member_id: str = "") -> None:
        """Commit a consumer group's offsets with the transaction (visible once it commits)."""
        txn = self._require_txn()
        if not txn.in_transaction:
            raise IllegalStateError("no transaction is open")
        tm = self._transactions
        await txn.send_offsets(self._client, tm.producer_id, tm.producer_epoch, offsets,
                               group_id, generation_id, member_id)

    async def commit_transaction(self) -> None:
        """Flush every record of the transaction, then commit it; raises (and the transaction
        must be aborted) if a record failed."""
        txn = self._require_txn()
        if not txn.in_transaction:
            raise IllegalStateError("no transaction is open")
        await self.flush()
        if txn.error is not None:
            raise txn.error
        tm = self._transactions
        self._bumped(await txn.end(self._client, tm.producer_id, tm.producer_epoch,
                                   committed=True))
        txn.in_transaction = False

    async def abort_transaction(self) -> None:
        """Wait for the records in flight, then abort the transaction."""
        txn = self._require_txn()
        if not txn.in_transaction:
            raise IllegalStateError("no transaction is open")
        await self.flush()
        tm = self._transactions
        self._bumped(await txn.end(self._client, tm.producer_id, tm.producer_epoch,
                                   committed=False))
        txn.in_transaction = False
        txn.error = None

    def _bumped(self, identity: tuple[int, int] | None) -> None:
        """Go on with the producer id and epoch EndTxn v5 answered (transaction version 2):
        a new epoch numbers every partition's sequences from 0."""
        if identity is not None:
            self._transactions.use_producer_id(*identity,
                                               self._accumulator.partitions.values())

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Producer]:
        """``async with producer.transaction():`` commits on leaving the block, aborts if it
        raises (and re-raises); a fenced producer raises ``ProducerFencedError``."""
        await self.begin_transaction()
        try:
            yield self
            await self.commit_transaction()
        except BaseException:
            txn = self._txn
            if txn is not None and txn.in_transaction and not txn.fenced:
                with trio.CancelScope(shield=True):
                    await self.abort_transaction()
            raise


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


__all__ = ["Producer", "open_producer"]
