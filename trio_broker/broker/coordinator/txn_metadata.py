"""One transactional id's state (Kafka's ``TransactionMetadata``) and its allowed transitions.

Why a table of transitions: every request of the transaction protocol moves a transactional id
from one state to another, and a request arriving in the wrong state must get Kafka's error
without touching the state. ``check_transition`` is the one place that says which moves exist;
the coordinator (``transactions.py``) asks it before writing anything durable.

States (Kafka's ``TransactionState``)::

    Empty ──AddPartitions/AddOffsets──> Ongoing ──EndTxn(commit)──> PrepareCommit ──> CompleteCommit
                                          └──EndTxn(abort)──> PrepareAbort ──> CompleteAbort
    Complete* ──InitProducerId──> Empty;  Complete* ──AddPartitions/AddOffsets──> Ongoing
    Ongoing ──InitProducerId by another producer / timeout──> PrepareEpochFence ──> PrepareAbort
    Empty / Complete* ──transactional.id.expiration.ms──> Dead (forgotten)

A record of the state is what the transaction log (``txn_log.py``) stores, as JSON: the state
is small, and the log is written once or twice per transaction, never per produced record.
"""

from __future__ import annotations

import enum
import math
from typing import Any, NamedTuple

import attrs

TopicPartition = tuple[str, int]

#: Kafka's ``RecordBatch.NO_PRODUCER_ID`` / ``NO_PRODUCER_EPOCH``
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: an epoch may not reach Short.MAX_VALUE: one below it, a new producer id is allocated
MAX_EPOCH = 32767 - 1


class TxnState(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_S = TxnState
#: Kafka's ``TransactionState.validPreviousStates``, read the other way: state -> next states
VALID_TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.ONGOING, _S.DEAD, _S.PREPARE_EPOCH_FENCE}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.PREPARE_COMMIT, _S.PREPARE_ABORT,
                           _S.PREPARE_EPOCH_FENCE}),
    _S.PREPARE_COMMIT: frozenset({_S.COMPLETE_COMMIT}),
    _S.PREPARE_ABORT: frozenset({_S.COMPLETE_ABORT}),
    _S.COMPLETE_COMMIT: frozenset({_S.EMPTY, _S.ONGOING, _S.DEAD, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_ABORT: frozenset({_S.EMPTY, _S.ONGOING, _S.DEAD, _S.PREPARE_EPOCH_FENCE}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset(),
}


class IllegalTransition(Exception):
    """A move the state machine does not have: a coordinator bug, never a client's mistake."""


def check_transition(current: TxnState, target: TxnState) -> None:
    if target not in VALID_TRANSITIONS[current]:
        raise IllegalTransition(f"{current.value} -> {target.value}")


class PendingOffset(NamedTuple):
    """A TxnOffsetCommit's offset, visible to OffsetFetch only once the transaction commits."""

    offset: int
    leader_epoch: int
    metadata: str | None


@attrs.define(eq=False)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    #: the epoch before a fence bump (KIP-360 lets that producer recover); -1 otherwise
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: set[TopicPartition] = attrs.field(factory=set)
    #: group id -> partition -> offset, from TxnOffsetCommit; groups added by AddOffsetsToTxn
    offsets: dict[str, dict[TopicPartition, PendingOffset]] = attrs.field(factory=dict)
    start_ms: int = -1
    last_update_ms: int = -1
    #: when an Ongoing transaction times out, on Trio's clock (not stored: set on start and
    #: on load from the stored start time)
    deadline: float = math.inf

    def transition(self, target: TxnState, now_ms: int) -> None:
        check_transition(self.state, target)
        self.state = target
        self.last_update_ms = now_ms

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.transactional_id, "pid": self.producer_id, "epoch": self.producer_epoch,
            "last_epoch": self.last_producer_epoch, "timeout": self.timeout_ms,
            "state": self.state.value, "start": self.start_ms, "update": self.last_update_ms,
            "partitions": sorted([t, p] for t, p in self.partitions),
            "offsets": {g: [[t, p, o.offset, o.leader_epoch, o.metadata]
                            for (t, p), o in sorted(parts.items())]
                        for g, parts in sorted(self.offsets.items())},
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> TransactionMetadata:
        return cls(
            transactional_id=str(doc["id"]), producer_id=int(doc["pid"]),
            producer_epoch=int(doc["epoch"]), timeout_ms=int(doc["timeout"]),
            state=TxnState(doc["state"]), last_producer_epoch=int(doc["last_epoch"]),
            partitions={(str(t), int(p)) for t, p in doc["partitions"]},
            offsets={str(g): {(str(t), int(p)): PendingOffset(int(o), int(e), m)
                              for t, p, o, e, m in parts}
                     for g, parts in doc["offsets"].items()},
            start_ms=int(doc["start"]), last_update_ms=int(doc["update"]))


__all__ = ["MAX_EPOCH", "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID", "VALID_TRANSITIONS",
           "IllegalTransition", "PendingOffset", "TopicPartition", "TransactionMetadata",
           "TxnState", "check_transition"]
