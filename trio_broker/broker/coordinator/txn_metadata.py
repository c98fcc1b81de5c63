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
    Empty / Complete* ──EndTxn(abort) v5──> PrepareAbort  (transaction version 2 only)

A record of the state is what the transaction log (``txn_log.py``) stores, as JSON: the state
is small, and the log is written once or twice per transaction, never per produced record.
"""

from __future__ import annotations

import enum
import math
from typing import Any, NamedTuple

import attrs

from ...protocol.errors import ErrorCode

TopicPartition = tuple[str, int]

#: Kafka's ``RecordBatch.NO_PRODUCER_ID`` / ``NO_PRODUCER_EPOCH``
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: an epoch may not reach Short.MAX_VALUE: one below it, a new producer id is allocated
MAX_EPOCH = 32767 - 1

#: Kafka's ``TransactionVersion``: 0 and 1 end a transaction at the producer's epoch; 2
#: (KIP-890 part 2, EndTxn v5) bumps the epoch at every commit and abort
TV_1 = 1
TV_2 = 2


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
    _S.EMPTY: frozenset({_S.EMPTY, _S.ONGOING, _S.DEAD, _S.PREPARE_EPOCH_FENCE,
                         _S.PREPARE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.PREPARE_COMMIT, _S.PREPARE_ABORT,
                           _S.PREPARE_EPOCH_FENCE}),
    _S.PREPARE_COMMIT: frozenset({_S.COMPLETE_COMMIT}),
    _S.PREPARE_ABORT: frozenset({_S.COMPLETE_ABORT}),
    _S.COMPLETE_COMMIT: frozenset({_S.EMPTY, _S.ONGOING, _S.DEAD, _S.PREPARE_EPOCH_FENCE,
                                   _S.PREPARE_ABORT}),
    _S.COMPLETE_ABORT: frozenset({_S.EMPTY, _S.ONGOING, _S.DEAD, _S.PREPARE_EPOCH_FENCE,
                                  _S.PREPARE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset(),
}


class IllegalTransition(Exception):
    """A move the state machine does not have: a coordinator bug, never a client's mistake."""


def check_transition(current: TxnState, target: TxnState) -> None:
    if target not in VALID_TRANSITIONS[current]:
        raise IllegalTransition(f"{current.value} -> {target.value}")


class EndDecision(NamedTuple):
    """What an EndTxn asks of the coordinator: an error, nothing (a retry of an end already
    done), or the prepare state to move to."""

    error: ErrorCode
    target: TxnState | None = None


def decide_end_v2(meta: TransactionMetadata, producer_id: int, producer_epoch: int,
                  committed: bool) -> EndDecision:
    """Kafka's ``endTransaction`` checks for transaction version 2 (EndTxn v5), in its order.

    Why the epoch alone tells a retry: every end bumps the epoch, so the same epoch as the
    coordinator's means the next transaction's end, and the epoch just below means a retry of the
    end that bumped it (or, after an exhausted epoch, the previous producer id at the last epoch).
    """
    retry_on_overflow = (meta.prev_producer_id == producer_id and producer_epoch == MAX_EPOCH
                         and meta.producer_epoch == 0)
    retry_on_bump = meta.producer_epoch == producer_epoch + 1
    state = meta.state
    if state is _S.PREPARE_EPOCH_FENCE:
        return EndDecision(ErrorCode.CONCURRENT_TRANSACTIONS)
    if meta.producer_id != producer_id and not retry_on_overflow:
        return EndDecision(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    if state in (_S.ONGOING, _S.EMPTY):
        valid = producer_epoch == meta.producer_epoch
    elif state.is_prepare:
        valid = retry_on_bump
    else:
        valid = retry_on_bump or retry_on_overflow or producer_epoch == meta.producer_epoch
    if not valid:
        return EndDecision(ErrorCode.PRODUCER_FENCED)
    is_retry = retry_on_bump or retry_on_overflow
    invalid = EndDecision(ErrorCode.INVALID_TXN_STATE)
    if state is _S.ONGOING:
        return EndDecision(ErrorCode.NONE, _S.PREPARE_COMMIT if committed else _S.PREPARE_ABORT)
    if state is _S.COMPLETE_COMMIT:
        if committed:
            return EndDecision(ErrorCode.NONE) if is_retry else invalid
        return invalid if is_retry else EndDecision(ErrorCode.NONE, _S.PREPARE_ABORT)
    if state is _S.COMPLETE_ABORT:
        if committed:
            return invalid
        return EndDecision(ErrorCode.NONE, None if is_retry else _S.PREPARE_ABORT)
    if state.is_prepare:
        same = (state is _S.PREPARE_COMMIT) == committed
        return EndDecision(ErrorCode.CONCURRENT_TRANSACTIONS) if same else invalid
    # Empty: an abort without a partition is allowed (it still bumps the epoch)
    return invalid if committed else EndDecision(ErrorCode.NONE, _S.PREPARE_ABORT)


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
    #: the producer id before an epoch exhaustion gave a new one (a retried EndTxn v5 of the
    #: old id is recognised by it); -1 otherwise
    prev_producer_id: int = NO_PRODUCER_ID
    #: the producer id a prepared transaction version 2 end moves to (its epoch was exhausted)
    next_producer_id: int = NO_PRODUCER_ID
    #: the transaction version of the client's last EndTxn (Kafka's clientTransactionVersion)
    client_transaction_version: int = 0
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
            "prev_pid": self.prev_producer_id, "next_pid": self.next_producer_id,
            "tv": self.client_transaction_version,
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
            prev_producer_id=int(doc.get("prev_pid", NO_PRODUCER_ID)),
            next_producer_id=int(doc.get("next_pid", NO_PRODUCER_ID)),
            client_transaction_version=int(doc.get("tv", 0)),
            partitions={(str(t), int(p)) for t, p in doc["partitions"]},
            offsets={str(g): {(str(t), int(p)): PendingOffset(int(o), int(e), m)
                              for t, p, o, e, m in parts}
                     for g, parts in doc["offsets"].items()},
            start_ms=int(doc["start"]), last_update_ms=int(doc["update"]))


__all__ = ["MAX_EPOCH", "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID", "TV_1", "TV_2", "VALID_TRANSITIONS",
           "EndDecision", "IllegalTransition", "PendingOffset", "TopicPartition",
           "TransactionMetadata", "TxnState", "check_transition", "decide_end_v2"]
