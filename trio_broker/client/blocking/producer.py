"""A blocking producer: record batches in, acknowledged offsets out, each batch once.

Why it takes batches rather than records: its users (the Spark sink, ``trio-broker import``)
encode records column-wise, many batches at a time (``client.core.produce.RecordBlock``); what
they need from a producer is Kafka's delivery semantics, kept here:

- **Idempotence** (on by default, as in Java; off when ``acks`` is not ``all`` unless asked for
  explicitly): one InitProducerId, then each partition numbers its records from 0. A batch is
  sealed with its sequence when first sent and resent byte for byte, so the broker answers a
  batch it already appended as a duplicate, with the original offset.
- **Bounded in flight**: at most ``max.in.flight.requests.per.connection`` Produce requests wait
  on a connection; each carries at most one batch per partition (Kafka's rule since Produce v3)
  and at most ``max.request.size`` bytes, starting from the next partition each time (Kafka's
  drain index: none waits behind the others). ``buffer.memory`` bounds the batches queued.
- **Retries in order**: a retriable error or a lost connection puts the batches concerned back
  at the head of their partitions' queues, in sequence order; until a partition's retried
  batches are acknowledged it sends one batch at a time, so each partition's log receives its
  records in order, each once. ``delivery.timeout.ms`` bounds how long a batch is retried.

Everything runs in the caller's thread: ``send`` sends what it can and waits for answers only
when the in-flight or memory bounds say so; ``flush`` waits for every answer.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.compression import Compression
from ...protocol.errors import ErrorCode
from ..core.backoff import ExponentialBackoff
from ..core.errors import (
    ConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedVersionError,
    describe_code,
    error_for,
)
from ..core.produce import (
    ACKS,
    MIN_PRODUCE_VERSION,
    RecordBlock,
    compression_type,
    init_producer_id_request,
    parse_init_producer_id,
    parse_produce,
    produce_request,
    seal_batch,
)
from ..core.structs import TopicPartition
from .client import BlockingClient
from .cluster import LEADER_ERRORS
from .connection import BrokerConnection

LOGGER = logging.getLogger(__name__)

#: Kafka's producer configs this producer takes, with Kafka's defaults
PRODUCER_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "compression.type": "none",
    "linger.ms": 5,
    "batch.size": 16384,
    "buffer.memory": 33554432,
    "max.in.flight.requests.per.connection": 5,
    "retries": 2147483647,
    "delivery.timeout.ms": 120000,
    "request.timeout.ms": 30000,
    "max.request.size": 1048576,
    "retry.backoff.ms": 100,
    "retry.backoff.max.ms": 1000,
}
_MAX_SEQUENCE = 2**31 - 1


def _int(config: Mapping[str, Any], name: str, minimum: int) -> int:
    value = config[name]
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ConfigError(f"Invalid value {value} for configuration {name}: Not a number of "
                          "type INT") from None
    if number < minimum:
        raise ConfigError(f"Invalid value {value} for configuration {name}: Value must be at "
                          f"least {minimum}")
    return number


@dataclass(frozen=True)
class ProducerSettings:
    """Kafka's producer settings as this producer uses them (``from_config`` checks them)."""

    acks: int = -1
    idempotent: bool = True
    #: whether ``enable.idempotence`` was set: then a conflicting setting is an error
    idempotence_explicit: bool = False
    compression: Compression = Compression.NONE
    linger_ms: int = 5
    batch_size: int = 16384
    buffer_memory: int = 33554432
    max_in_flight: int = 5
    retries: int = 2147483647
    delivery_timeout_ms: int = 120000
    request_timeout_ms: int = 30000
    max_request_size: int = 1048576
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None = None) -> ProducerSettings:
        """Settings from Kafka's producer keys (``acks``, ``compression.type``, ...), checked
        as Kafka checks them; an unknown key is a ``ConfigError`` naming it."""
        given = {str(k): v for k, v in (config or {}).items()}
        unknown = sorted(set(given) - set(PRODUCER_DEFAULTS))
        if unknown:
            raise ConfigError(f"unknown producer config {unknown[0]!r}")
        merged = {**PRODUCER_DEFAULTS, **given}
        acks = ACKS.get(str(merged["acks"]).strip().lower())
        if acks is None:
            raise ConfigError(f"Invalid value {merged['acks']} for configuration acks: String "
                              "must be one of: all, -1, 0, 1")
        explicit = "enable.idempotence" in given
        idempotence = str(merged["enable.idempotence"]).strip().lower()
        if idempotence not in ("true", "false"):
            raise ConfigError(f"Invalid value {merged['enable.idempotence']} for configuration "
                              "enable.idempotence: Expected value to be either true or false")
        max_in_flight = _int(merged, "max.in.flight.requests.per.connection", 1)
        retries = _int(merged, "retries", 0)
        idempotent = idempotence == "true"
        if idempotent:
            conflicts = []
            if acks != -1:
                conflicts.append("Must set acks to all in order to use the idempotent "
                                 "producer. Otherwise we cannot guarantee idempotence.")
            if max_in_flight > 5:
                conflicts.append("Must set max.in.flight.requests.per.connection to at most 5 "
                                 "when using the idempotent producer.")
            if retries == 0:
                conflicts.append("Must set retries to non-zero when using the idempotent "
                                 "producer.")
            if conflicts and explicit:
                raise ConfigError(" ".join(conflicts))
            idempotent = not conflicts
        linger_ms = _int(merged, "linger.ms", 0)
        request_timeout_ms = _int(merged, "request.timeout.ms", 0)
        delivery_timeout_ms = _int(merged, "delivery.timeout.ms", 0)
        if delivery_timeout_ms < linger_ms + request_timeout_ms:
            if "delivery.timeout.ms" in given:
                raise ConfigError("delivery.timeout.ms should be equal to or larger than "
                                  "linger.ms + request.timeout.ms")
            delivery_timeout_ms = linger_ms + request_timeout_ms
        return cls(
            acks=acks, idempotent=idempotent, idempotence_explicit=explicit,
            compression=compression_type(merged["compression.type"]),
            linger_ms=linger_ms, batch_size=_int(merged, "batch.size", 0),
            buffer_memory=_int(merged, "buffer.memory", 0), max_in_flight=max_in_flight,
            retries=retries, delivery_timeout_ms=delivery_timeout_ms,
            request_timeout_ms=request_timeout_ms,
            max_request_size=_int(merged, "max.request.size", 1),
            retry_backoff_ms=_int(merged, "retry.backoff.ms", 0),
            retry_backoff_max_ms=_int(merged, "retry.backoff.max.ms", 0))


class _Batch:
    __slots__ = ("attempts", "block", "deadline", "order", "payload", "retried", "retry_at",
                 "sequence", "tp")

    def __init__(self, tp: TopicPartition, block: RecordBlock, order: int,
                 deadline: float) -> None:
        self.tp = tp
        self.block = block
        self.order = order  # position in its partition: the sequence before one is assigned
        self.deadline = deadline
        self.payload: bytearray | None = None  # sealed on first send, resent as it is
        self.sequence = -1
        self.attempts = 0
        self.retry_at = 0.0
        self.retried = False


class _Partition:
    __slots__ = ("in_flight", "next_order", "next_sequence", "queue", "retrying")

    def __init__(self) -> None:
        self.queue: deque[_Batch] = deque()
        self.in_flight = 0
        self.next_sequence = 0
        self.next_order = 0
        #: batches put back after a failure and not acknowledged since
        self.retrying = 0

    def requeue(self, batch: _Batch) -> None:
        """Back into the queue before every batch that came after it."""
        index = next((i for i, queued in enumerate(self.queue) if queued.order > batch.order),
                     len(self.queue))
        self.queue.insert(index, batch)


class _Request:
    __slots__ = ("batches", "conn", "number", "request")

    def __init__(self, number: int, conn: BrokerConnection, request: Any,
                 batches: list[_Batch]) -> None:
        self.number = number
        self.conn = conn
        self.request = request
        self.batches = batches


#: ``on_delivery(tp, base_offset, block)`` after each acknowledged batch (offset -1: not known,
#: as with ``acks=0``)
DeliveryCallback = Callable[[TopicPartition, int, RecordBlock], None]


class BlockingProducer:
    """Sends ``RecordBlock``s to partition leaders through a ``BlockingClient`` (which it does
    not close). Errors that retries cannot clear are raised from ``send`` or ``flush`` as the
    client core's ``KafkaError`` for the code, naming the partition."""

    def __init__(self, client: BlockingClient, settings: ProducerSettings | None = None, *,
                 on_delivery: DeliveryCallback | None = None) -> None:
        self.client = client
        self.settings = settings = settings or ProducerSettings()
        self._on_delivery = on_delivery
        self._backoff = ExponentialBackoff(settings.retry_backoff_ms,
                                           settings.retry_backoff_max_ms)
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._in_flight: dict[tuple[str, int], deque[_Request]] = {}
        self._requests = 0
        self._drain_index = -1
        self._queued_bytes = 0
        self.idempotent = settings.idempotent
        self.producer_id = -1
        self.producer_epoch = -1

    # --- public ------------------------------------------------------------------------------

    def send(self, tp: TopicPartition, block: RecordBlock) -> None:
        """Queue one batch for ``tp`` and send what the in-flight bounds allow."""
        self.send_all(((tp, block),))

    def send_all(self, batches: Iterable[tuple[TopicPartition, RecordBlock]]) -> None:
        """Queue batches (each for its partition, in order) and then send what the in-flight
        bounds allow: batches queued together for partitions of one leader leave in one
        request, as Kafka's sender drains every ready partition of a node at once."""
        batches = list(batches)
        limit = self.settings.max_request_size
        for _, block in batches:  # all or none: nothing is queued when one is too large
            if block.size > limit:
                raise error_for(ErrorCode.MESSAGE_TOO_LARGE,
                                f"The message is {block.size} bytes when serialized which is "
                                f"larger than {limit}, which is the value of the "
                                "max.request.size configuration.")
        deadline = time.monotonic() + self.settings.delivery_timeout_ms / 1000
        for tp, block in batches:
            tp = TopicPartition(*tp)
            state = self._partitions.get(tp)
            if state is None:
                state = self._partitions[tp] = _Partition()
            state.queue.append(_Batch(tp, block, state.next_order, deadline))
            state.next_order += 1
            self._queued_bytes += block.size
        self._collect_arrived()
        self._send_ready()
        while self._queued_bytes > self.settings.buffer_memory:  # buffer.memory: wait
            self._wait_once()
            self._send_ready()

    def flush(self) -> None:
        """Send everything queued and wait until every batch is acknowledged."""
        while self._queued_bytes or any(self._in_flight.values()):
            self._send_ready()
            if self._queued_bytes or any(self._in_flight.values()):
                self._wait_once()

    @property
    def pending(self) -> bool:
        """Whether batches are queued or waiting for an answer."""
        return bool(self._queued_bytes or any(self._in_flight.values()))

    # --- sending -----------------------------------------------------------------------------

    def _init_producer_id(self) -> None:
        def ask() -> tuple[int, int, int]:
            conn = self.client.any_connection()
            return parse_init_producer_id(conn.request(ApiKey.InitProducerId,
                                                       init_producer_id_request))

        attempt = 0
        while True:
            try:
                code, producer_id, epoch = self.client.retrying("InitProducerId", ask)
            except UnsupportedVersionError:
                if self.settings.idempotence_explicit:
                    raise
                LOGGER.warning("the broker does not support InitProducerId; producing without "
                               "idempotence")
                self.idempotent = False
                return
            if code == ErrorCode.NONE:
                break
            error = error_for(code, f"InitProducerId failed: {describe_code(code)}")
            if not error.retriable or attempt >= self.client.retries:
                raise error
            time.sleep(self._backoff.backoff_ms(attempt) / 1000)
            attempt += 1
        self.producer_id, self.producer_epoch = producer_id, epoch
        LOGGER.debug("producer id %d epoch %d", producer_id, epoch)

    def _seal(self, batch: _Batch, state: _Partition) -> bytearray:
        if batch.payload is None:
            if self.idempotent:
                batch.sequence = state.next_sequence
                state.next_sequence = (batch.sequence + batch.block.num_records) & _MAX_SEQUENCE
            batch.payload = seal_batch(batch.block, compression=self.settings.compression,
                                       producer_id=self.producer_id,
                                       producer_epoch=self.producer_epoch,
                                       base_sequence=batch.sequence)
        return batch.payload

    def _ready_by_leader(self, now: float) -> dict[tuple[str, int], tuple[BrokerConnection,
                                                                       list[TopicPartition]]]:
        ready: dict[tuple[str, int], tuple[BrokerConnection, list[TopicPartition]]] = {}
        for tp, state in self._partitions.items():
            if not state.queue or state.queue[0].retry_at > now:
                continue
            if state.retrying and state.in_flight:
                continue  # a retried partition sends one batch at a time
            try:
                conn = self.client.leader(tp)
            except KafkaError as exc:
                if not (exc.retriable or isinstance(exc, KafkaConnectionError)):
                    raise
                self._retry_later(state.queue[0], exc, count_attempt=False)
                continue
            ready.setdefault((conn.host, conn.port), (conn, []))[1].append(tp)
        return ready

    def _send_ready(self) -> None:
        """Send a request to every leader with ready batches and a free in-flight slot."""
        if self.idempotent and self.producer_id < 0 and self._queued_bytes:
            self._init_producer_id()
        now = time.monotonic()
        limit = self.settings.max_request_size
        for key, (conn, tps) in self._ready_by_leader(now).items():
            queue = self._in_flight.setdefault(key, deque())
            while len(queue) < self.settings.max_in_flight and not conn.closed:
                batches: list[_Batch] = []
                size = 0
                # each request starts from the next partition, so that when max.request.size
                # leaves some out, the same ones do not always wait (Kafka's drain index)
                self._drain_index = start = (self._drain_index + 1) % len(tps)
                for tp in tps[start:] + tps[:start]:
                    state = self._partitions[tp]
                    if not state.queue or state.queue[0].retry_at > now or (
                            state.retrying and state.in_flight):
                        continue
                    head = state.queue[0]
                    if batches and size + head.block.size > limit:
                        continue
                    state.queue.popleft()
                    state.in_flight += 1
                    self._queued_bytes -= head.block.size
                    batches.append(head)
                    size += head.block.size
                if not batches:
                    break
                self._send_request(key, conn, batches)

    def _send_request(self, key: tuple[str, int], conn: BrokerConnection,
                      batches: list[_Batch]) -> None:
        entries = []
        for batch in batches:
            batch.attempts += 1
            entries.append((batch.tp.topic, batch.tp.partition,
                            self._seal(batch, self._partitions[batch.tp])))
        needed = MIN_PRODUCE_VERSION.get(self.settings.compression, 3)
        acks = self.settings.acks
        try:
            version = conn.version_for(ApiKey.Produce)
            if version < needed:
                raise UnsupportedVersionError(
                    f"{conn.where} speaks Produce up to v{version}; "
                    f"{self.settings.compression.name.lower()} batches need v{needed}")
            body = produce_request(version, entries, acks=acks,
                                   timeout_ms=self.settings.request_timeout_ms)
            request = conn.send(ApiKey.Produce, body, version=version,
                                expect_response=acks != 0)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            self._connection_lost(key, exc, also=batches)
            return
        if acks == 0:
            for batch in batches:
                self._delivered(batch, -1)
            return
        self._requests += 1
        self._in_flight[key].append(_Request(self._requests, conn, request, batches))

    # --- answers -----------------------------------------------------------------------------

    def _collect_arrived(self) -> None:
        """Settle the answers that have already arrived, without waiting for any, so their
        in-flight slots take the next batches."""
        for key, queue in list(self._in_flight.items()):
            while queue and queue[0].conn.readable():
                self._settle(key, queue[0])

    def _wait_once(self) -> None:
        """Read the oldest answer in flight, or sleep until the next retry is due."""
        oldest: tuple[tuple[str, int], _Request] | None = None
        for key, queue in self._in_flight.items():
            if queue and (oldest is None or queue[0].number < oldest[1].number):
                oldest = (key, queue[0])
        if oldest is None:
            due = [s.queue[0].retry_at for s in self._partitions.values() if s.queue]
            pause = min(due, default=0.0) - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            return
        self._settle(*oldest)

    def _settle(self, key: tuple[str, int], request: _Request) -> None:
        """Read ``request``'s answer (the oldest on its connection) and act on it."""
        timeout_s = self.settings.request_timeout_ms / 1000
        try:
            response = request.conn.receive(request.request, timeout_s=timeout_s)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            self._connection_lost(key, exc)
            return
        self._in_flight[key].popleft()
        results = parse_produce(response)
        for batch in request.batches:
            state = self._partitions[batch.tp]
            state.in_flight -= 1
            found = results.get(batch.tp)
            code = ErrorCode.UNKNOWN_SERVER_ERROR if found is None else found.error
            if code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                assert found is not None
                self._delivered(batch, found.base_offset
                                if code == ErrorCode.NONE else -1)
                continue
            error = error_for(code, f"{describe_code(code)} producing to {batch.tp}")
            retriable = error.retriable
            if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
                # after an earlier batch of the partition failed, later ones see a gap
                retriable = state.retrying > 0
            if code in LEADER_ERRORS:
                self.client.invalidate_leaders()
            if not retriable:
                raise error
            self._retry_later(batch, error)
            state.requeue(batch)
            self._queued_bytes += batch.block.size

    def _connection_lost(self, key: tuple[str, int], exc: KafkaError,
                         also: list[_Batch] | None = None) -> None:
        """Every request in flight on the connection is lost: its batches go back, in order."""
        lost = [b for r in self._in_flight.pop(key, deque()) for b in r.batches] + (also or [])
        self.client.invalidate_leaders()
        LOGGER.info("lost the connection while producing (%s); resending %d batches", exc,
                    len(lost))
        for batch in sorted(lost, key=lambda b: b.order):
            state = self._partitions[batch.tp]
            state.in_flight -= 1
            self._retry_later(batch, exc)
            state.requeue(batch)
            self._queued_bytes += batch.block.size

    def _retry_later(self, batch: _Batch, error: KafkaError, *,
                     count_attempt: bool = True) -> None:
        now = time.monotonic()
        if now >= batch.deadline or (count_attempt and batch.attempts > self.settings.retries):
            raise KafkaTimeoutError(
                f"Expiring {batch.block.num_records} record(s) for {batch.tp}: "
                f"{self.settings.delivery_timeout_ms} ms has passed since batch creation or "
                f"the retries ran out; last error: {error}") from None
        batch.retry_at = now + self._backoff.backoff_ms(max(batch.attempts - 1, 0)) / 1000
        if not batch.retried:
            batch.retried = True
            self._partitions[batch.tp].retrying += 1

    def _delivered(self, batch: _Batch, base_offset: int) -> None:
        state = self._partitions[batch.tp]
        if self.settings.acks == 0:
            state.in_flight -= 1
        if batch.retried:
            state.retrying -= 1
        if self._on_delivery is not None:
            self._on_delivery(batch.tp, base_offset, batch.block)


__all__ = ["PRODUCER_DEFAULTS", "BlockingProducer", "DeliveryCallback", "ProducerSettings"]
