"""Idempotent-producer bookkeeping: the producer id and epoch, per-partition sequences, and what
a sequence error means (Kafka's ``TransactionManager``, without transactions).

Idempotence (on by default, as in Java): one ``InitProducerId`` before the first batch; each
partition numbers its records from 0 for the producer's epoch, and a batch keeps its sequence
through every retry, so the broker recognises a resent batch as a duplicate. A sequence error
the producer cannot explain (or a batch with a sequence that expired, leaving a gap no later
batch can fill) fails that batch and starts a new producer id, with sequences from 0 again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import trio

from ....protocol.api_keys import ApiKey
from ....protocol.errors import ErrorCode
from ...core.errors import (
    ConfigError,
    KafkaError,
    UnsupportedVersionError,
    error_for,
)
from ...core.produce import ACKS, init_producer_id_request, parse_init_producer_id
from ..network import NetworkClient
from .batch import PartitionQueue, ProducerBatch
from .transactions import TransactionalState

LOGGER = logging.getLogger(__name__)

_MAX_SEQUENCE = 2**31 - 1


def idempotence_possible(config: dict[str, Any], explicit: bool) -> bool:
    """Whether the settings allow idempotence (Java's rules); when ``enable.idempotence`` was
    set explicitly, a conflict is a ``ConfigError``, otherwise idempotence quietly goes off."""
    if not config["enable.idempotence"]:
        return False
    problems = []
    if ACKS.get(config["acks"]) != -1:
        problems.append("acks=all")
    if config["max.in.flight.requests.per.connection"] > 5:
        problems.append("max.in.flight.requests.per.connection <= 5")
    if config["retries"] < 1:
        problems.append("retries > 0")
    if problems and explicit:
        raise ConfigError(f"enable.idempotence=true needs {', '.join(problems)}")
    return not problems


class TransactionManager:
    """Producer id, epoch and sequences of one idempotent producer."""

    def __init__(self, *, idempotent: bool, explicit: bool) -> None:
        self.idempotent = idempotent
        self._explicit = explicit
        self.producer_id = -1
        self.producer_epoch = -1
        #: a producer id must be (re)initialised before the next batch is encoded
        self.need_producer_id = idempotent
        #: set for a producer with a transactional.id (``transactions.py``)
        self.transactional: TransactionalState | None = None

    def assign_sequence(self, state: PartitionQueue, batch: ProducerBatch) -> int:
        """The base sequence of a batch being encoded for the first time (-1 without
        idempotence)."""
        if not self.idempotent:
            return -1
        sequence = state.next_sequence
        state.next_sequence = (sequence + len(batch.records)) & _MAX_SEQUENCE
        return sequence

    def expired(self, batch: ProducerBatch) -> None:
        """A batch with a sequence expired: the gap it leaves can never be filled."""
        if batch.base_sequence >= 0 and self.idempotent:
            self.need_producer_id = True

    def retriable(self, state: PartitionQueue, code: int | None, retriable: bool) -> bool:
        """Whether a batch that failed with ``code`` may be retried, and whether the producer
        needs a new id first."""
        if self.idempotent and code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            # After an earlier batch of this partition failed, later ones see a gap: retry them.
            retriable = state.retrying > 0 or state.in_flight > 0 or any(
                q.base_sequence >= 0 for q in state.queue)
            if not retriable:
                self.need_producer_id = True
        elif code == ErrorCode.UNKNOWN_PRODUCER_ID:
            retriable = True
            self.need_producer_id = True
        elif code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED):
            if self.transactional is not None:  # fenced: no new id can help
                self.transactional.fenced = True
                return False
            self.need_producer_id = True
        if self.transactional is not None and self.need_producer_id:
            self.need_producer_id = False  # only InitProducerId at the next begin may renew it
            return False
        return retriable

    async def init_producer_id(self, client: NetworkClient,
                               partitions: Iterable[list[PartitionQueue]]) -> KafkaError | None:
        """InitProducerId (retrying retriable errors), then every partition's sequences start
        again from 0 and batches not yet sent are re-encoded.

        Returns the error that fails every queued batch when the broker lacks InitProducerId
        and idempotence was asked for explicitly (otherwise idempotence goes off); raises a
        non-retriable error.
        """
        attempts = 0
        while True:
            try:
                code: int
                if self.transactional is not None:  # errors are raised, retriable ones retried
                    code = ErrorCode.NONE
                    producer_id, epoch = await self.transactional.init_producer_id(client)
                else:
                    conn = await client.connection(client.least_loaded_node())
                    code, producer_id, epoch = parse_init_producer_id(
                        await conn.request(ApiKey.InitProducerId, init_producer_id_request))
            except UnsupportedVersionError as exc:
                if self._explicit:
                    return exc
                LOGGER.warning("the broker does not support InitProducerId; producing without "
                               "idempotence")
                self.idempotent = False
                self.need_producer_id = False
                return None
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                error: KafkaError = exc
            else:
                if code == ErrorCode.NONE:
                    break
                error = error_for(code)
                if not error.retriable:
                    raise error
            attempts += 1
            LOGGER.info("InitProducerId failed (%r); retrying", error)
            await trio.sleep(client.retry_backoff.backoff_ms(attempts - 1) / 1000)
        self.use_producer_id(producer_id, epoch, partitions)
        return None

    def use_producer_id(self, producer_id: int, epoch: int,
                        partitions: Iterable[list[PartitionQueue]]) -> None:
        """Go on with ``producer_id`` at ``epoch``: every partition's sequences start again
        from 0 and batches not yet sent are re-encoded."""
        self.producer_id = producer_id
        self.producer_epoch = epoch
        self.need_producer_id = False
        LOGGER.debug("producer id %s epoch %s", producer_id, epoch)
        for parts in partitions:
            for state in parts:
                state.next_sequence = 0
                for batch in state.queue:
                    if batch.payload is not None:
                        batch.payload = None
                        batch.base_sequence = -1
                state.retrying = 0


__all__ = ["TransactionManager", "idempotence_possible"]
