"""The transaction coordinator (Kafka's ``TransactionCoordinator`` with its state manager).

Why it writes before it answers: a transaction's fate must survive a crash at any point. Every
state change is first written to the transaction log (``txn_log.py``, fsynced) and only then
applied in memory and answered; the markers that end a transaction in its partitions are written
after the PrepareCommit/PrepareAbort record is durable, so a crash between the two is finished on
the next start (``run`` completes every prepared transaction before it serves). Requests for one
transactional id are serialized by a per-id lock; writes to the log by one lock for the file.

Timers (in the broker's nursery, on Trio's clock): every
``transaction.abort.timed.out.transaction.cleanup.interval.ms`` an Ongoing transaction older than
its timeout is aborted with a bumped epoch (its producer is fenced, as in Kafka), and a prepared
transaction whose markers could not be written is retried; every
``transaction.remove.expired.transaction.cleanup.interval.ms`` ids idle for
``transactional.id.expiration.ms`` are forgotten.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import NamedTuple, Protocol

import attrs
import trio

from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from ..offload import run_io
from ..storage import LogManager, StorageError
from .coordinator import GroupCoordinator
from .internal_topics import (
    TRANSACTION_TOPIC,
    CoordinatorRecord,
    InternalTopics,
    transaction_log_key,
    transaction_log_value,
)
from .offsets import CommitRequest
from .txn_log import TXN_DIR_NAME, TransactionLog
from .txn_markers import COORDINATOR_EPOCH, commit_offsets, write_markers
from .txn_metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_1,
    TV_2,
    PendingOffset,
    TopicPartition,
    TransactionMetadata,
    TxnState,
    decide_end_v2,
)

LOGGER = logging.getLogger(__name__)
_S = TxnState


class ProducerIdSource(Protocol):
    def allocate(self) -> int: ...


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _copy(meta: TransactionMetadata) -> TransactionMetadata:
    return attrs.evolve(meta, partitions=set(meta.partitions),
                        offsets={g: dict(p) for g, p in meta.offsets.items()})


class TxnOffset(NamedTuple):
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


class TransactionCoordinator:
    def __init__(self, config: BrokerConfig, state_dir: Path, *, logs: LogManager,
                 groups: GroupCoordinator, producer_ids: ProducerIdSource,
                 wall_clock_ms: Callable[[], int] = _wall_ms) -> None:
        self.config = config
        self.logs = logs
        self.groups = groups
        self.producer_ids = producer_ids
        self.now_ms = wall_clock_ms
        self.txn_log = TransactionLog(Path(state_dir) / TXN_DIR_NAME)
        #: where Kafka's transaction log records go too (None: nowhere)
        self.internal_topics: InternalTopics | None = None
        self.transactions: dict[str, TransactionMetadata] = {}
        #: called with the partitions that got a marker (the broker wakes parked fetches)
        self.on_markers: Callable[[Iterable[TopicPartition]], None] = lambda tps: None
        self.loaded = False
        self._read = False
        #: what ``read_log`` found, for ``load`` to take
        self._read_states: dict[str, TransactionMetadata] | None = None
        self._locks: dict[str, trio.Lock] = {}
        self._write_lock = trio.Lock()
        #: set (and replaced) at every state change: wakes the timers of an idle coordinator
        self._changed = trio.Event()
        self.max_timeout_ms = config.transaction_max_timeout_ms
        self.abort_interval_ms = config.transaction_abort_timed_out_transaction_cleanup_interval_ms
        self.expire_interval_ms = config.transaction_remove_expired_transaction_cleanup_interval_ms
        self.id_expiration_ms = config.transactional_id_expiration_ms

    # --- lifecycle --------------------------------------------------------------------------

    def read_log(self) -> None:
        """Open the transaction log now, blocking (the broker's start does it in the worker
        thread that loads the logs); ``load`` then takes what it held."""
        self._read_states = self.txn_log.open()

    async def load(self) -> None:
        """Read the transaction log back (in a worker thread, unless ``read_log`` did).
        ``serve`` calls it before any timer of the broker exists; ``run`` calls it if nobody
        did."""
        if not self._read:
            states, self._read_states = self._read_states, None
            self.transactions = (states if states is not None
                                 else await run_io(self.txn_log.open))
            self._read = True
            wall, now = self.now_ms(), trio.current_time()
            for meta in self.transactions.values():
                if meta.state is _S.ONGOING:  # what is left of its timeout, on Trio's clock
                    meta.deadline = now + max(0, meta.start_ms + meta.timeout_ms - wall) / 1000

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Load the log, finish every prepared transaction, then run the timers."""
        await self.load()
        for meta in list(self.transactions.values()):
            if meta.state.is_prepare:
                LOGGER.info("completing %s of transactional id %r left by the last run",
                            meta.state.value, meta.transactional_id)
                async with self._lock(meta.transactional_id):
                    await self._complete(meta)
        self.loaded = True
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._every, self.abort_interval_ms, self.abort_timed_out,
                                   self._any_open)
                nursery.start_soon(self._every, self.expire_interval_ms, self.expire_ids,
                                   lambda: bool(self.transactions))
                task_status.started()
        finally:
            self.loaded = False

    def close(self) -> None:
        self.loaded = False
        self.txn_log.close()

    def _any_open(self) -> bool:
        return any(m.state is _S.ONGOING or m.state.is_prepare
                   for m in self.transactions.values())

    async def _every(self, interval_ms: int, job: Callable[[], Awaitable[int]],
                     needed: Callable[[], bool]) -> None:
        """Run ``job`` every interval while ``needed()``; otherwise sleep until a state change
        (an idle broker keeps no timer, so a test's autojump clock has nothing to jump to)."""
        while True:
            while not needed():
                await self._changed.wait()
            await trio.sleep(interval_ms / 1000)
            await job()

    def _lock(self, transactional_id: str) -> trio.Lock:
        lock = self._locks.get(transactional_id)
        if lock is None:
            lock = self._locks[transactional_id] = trio.Lock()
        return lock

    # --- requests ---------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int, *,
                               expected_id: int = NO_PRODUCER_ID,
                               expected_epoch: int = NO_PRODUCER_EPOCH,
                               ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch) for a transactional producer starting (or restarting)."""
        if not self.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        async with self._lock(transactional_id):
            meta = self.transactions.get(transactional_id)
            now = self.now_ms()
            if meta is None:
                pid = await self._allocate()
                if pid is None:
                    return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
                new = TransactionMetadata(transactional_id, pid, 0, timeout_ms, _S.EMPTY,
                                          last_update_ms=now)
                if not await self._durable(new):
                    return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
                return ErrorCode.NONE, pid, 0
            if expected_id != NO_PRODUCER_ID and not (
                    expected_id == meta.producer_id
                    and expected_epoch in (meta.producer_epoch, meta.last_producer_epoch)):
                return ErrorCode.PRODUCER_FENCED, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            if meta.state.is_prepare and not await self._complete(meta):
                return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            meta = self.transactions[transactional_id]
            if meta.state is _S.ONGOING:
                # a new instance of the producer: fence the old one and abort what it left
                if not await self._fence_and_abort(meta):
                    return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
                meta = self.transactions[transactional_id]
            new = _copy(meta)
            if meta.producer_epoch >= MAX_EPOCH:
                pid = await self._allocate()
                if pid is None:
                    return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
                new.producer_id, new.producer_epoch = pid, 0
            else:
                new.producer_epoch += 1
            new.last_producer_epoch = NO_PRODUCER_EPOCH
            new.timeout_ms = timeout_ms
            new.transition(_S.EMPTY, now)
            if not await self._durable(new):
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            return ErrorCode.NONE, new.producer_id, new.producer_epoch

    def _check_producer(self, meta: TransactionMetadata | None, producer_id: int,
                        producer_epoch: int) -> ErrorCode:
        if not self.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch != meta.producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if meta.state.is_prepare or meta.state is _S.PREPARE_EPOCH_FENCE:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.NONE

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition], *, verify_only: bool = False,
                             ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn: an error per partition (all the same unless some are unknown)."""
        wanted = set(partitions)
        async with self._lock(transactional_id):
            meta = self.transactions.get(transactional_id)
            error = self._check_producer(meta, producer_id, producer_epoch)
            if error:
                return dict.fromkeys(wanted, error)
            assert meta is not None
            if verify_only:
                ongoing = meta.state is _S.ONGOING
                return {tp: ErrorCode.NONE if ongoing and tp in meta.partitions
                        else ErrorCode.INVALID_TXN_STATE for tp in wanted}
            unknown = {tp for tp in wanted if self.logs.get_log(*tp) is None}
            if unknown:
                return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                        else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted}
            if meta.state is _S.ONGOING and wanted <= meta.partitions:
                return dict.fromkeys(wanted, ErrorCode.NONE)
            new = self._ongoing(meta)
            new.partitions |= wanted
            ok = await self._durable(new)
            return dict.fromkeys(wanted, ErrorCode.NONE if ok
                                 else ErrorCode.COORDINATOR_NOT_AVAILABLE)

    def _ongoing(self, meta: TransactionMetadata) -> TransactionMetadata:
        new = _copy(meta)
        now = self.now_ms()
        if meta.state is not _S.ONGOING:
            new.start_ms = now
            new.deadline = trio.current_time() + meta.timeout_ms / 1000
        new.transition(_S.ONGOING, now)
        return new

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> ErrorCode:
        """AddOffsetsToTxn: the group's offsets become part of the transaction."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        async with self._lock(transactional_id):
            meta = self.transactions.get(transactional_id)
            error = self._check_producer(meta, producer_id, producer_epoch)
            if error:
                return error
            assert meta is not None
            if meta.state is _S.ONGOING and group_id in meta.offsets:
                return ErrorCode.NONE
            new = self._ongoing(meta)
            new.offsets.setdefault(group_id, {})
            return ErrorCode.NONE if await self._durable(new) else \
                ErrorCode.COORDINATOR_NOT_AVAILABLE

    async def txn_offset_commit(self, transactional_id: str, group_id: str, producer_id: int,
                                producer_epoch: int, offsets: list[TxnOffset], *,
                                generation_id: int = -1, member_id: str = "",
                                group_instance_id: str | None = None, add_group: bool = False,
                                ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: offsets kept with the transaction until it ends (durably). With
        ``add_group`` (TxnOffsetCommit v5, transaction version 2) the group joins the
        transaction here, as AddOffsetsToTxn would have added it."""
        tps = [(o.topic, o.partition) for o in offsets]
        async with self._lock(transactional_id):
            meta = self.transactions.get(transactional_id)
            error = self._check_producer(meta, producer_id, producer_epoch)
            joins = False
            if not error:
                assert meta is not None
                if meta.state is not _S.ONGOING or group_id not in meta.offsets:
                    joins = add_group
                    error = ErrorCode.NONE if add_group else ErrorCode.INVALID_TXN_STATE
            if not error:
                error = self.groups.offsets.validate_txn_commit(CommitRequest(
                    group_id, generation_id, member_id, group_instance_id))
            if error:
                return dict.fromkeys(tps, error)
            assert meta is not None
            max_meta = self.config.offset_metadata_max_bytes
            results: dict[TopicPartition, ErrorCode] = {}
            new = self._ongoing(meta) if joins else _copy(meta)
            pending = new.offsets.setdefault(group_id, {})
            for o in offsets:
                tp = (o.topic, o.partition)
                if o.metadata is not None and len(o.metadata.encode()) > max_meta:
                    results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    pending[tp] = PendingOffset(o.offset, o.leader_epoch, o.metadata)
                    results[tp] = ErrorCode.NONE
            new.last_update_ms = self.now_ms()
            if not await self._durable(new):
                return dict.fromkeys(tps, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return results

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      committed: bool, *, transaction_version: int = TV_1,
                      ) -> tuple[ErrorCode, int, int]:
        """EndTxn: decide durably, then write the markers and (commit) the offsets. Returns the
        error and the producer id and epoch the producer goes on with: under transaction
        version 2 (EndTxn v5) every end bumps the epoch, or moves an exhausted epoch to a new
        producer id."""
        async with self._lock(transactional_id):
            meta = self.transactions.get(transactional_id)
            if transaction_version >= TV_2:
                return await self._end_v2(meta, producer_id, producer_epoch, committed)
            error = self._check_producer(meta, producer_id, producer_epoch)
            if error:
                return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            assert meta is not None
            done = ErrorCode.NONE, meta.producer_id, meta.producer_epoch
            if meta.state is _S.ONGOING:
                new = _copy(meta)
                new.client_transaction_version = TV_1
                new.transition(_S.PREPARE_COMMIT if committed else _S.PREPARE_ABORT,
                               self.now_ms())
                if not await self._durable(new):
                    return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
                await self._complete(new)  # a failure is retried by the timer: decided is done
                return done
            if meta.state is _S.COMPLETE_COMMIT and committed:
                return done  # a retry of the EndTxn that completed it
            if meta.state is _S.COMPLETE_ABORT and not committed:
                return done
            return ErrorCode.INVALID_TXN_STATE, NO_PRODUCER_ID, NO_PRODUCER_EPOCH

    async def _end_v2(self, meta: TransactionMetadata | None, producer_id: int,
                      producer_epoch: int, committed: bool) -> tuple[ErrorCode, int, int]:
        failed = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if not self.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, *failed
        if meta is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, *failed
        error, target = decide_end_v2(meta, producer_id, producer_epoch, committed)
        if error:
            return error, *failed
        if target is None:  # a retry of the end already done: what it answered
            return ErrorCode.NONE, meta.producer_id, meta.producer_epoch
        new = _copy(meta)
        now = self.now_ms()
        if meta.producer_epoch >= MAX_EPOCH:
            # the markers take the last epoch; the producer goes on with a new id at epoch 0
            pid = await self._allocate()
            if pid is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, *failed
            new.next_producer_id = pid
        new.last_producer_epoch = meta.producer_epoch
        new.producer_epoch = meta.producer_epoch + 1
        new.client_transaction_version = TV_2
        if meta.state is not _S.ONGOING:  # an abort with no partition: it starts now
            new.start_ms = now
        new.transition(target, now)
        if not await self._durable(new):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, *failed
        await self._complete(new)  # a failure is retried by the timer: decided is done
        if new.next_producer_id != NO_PRODUCER_ID:
            return ErrorCode.NONE, new.next_producer_id, 0
        return ErrorCode.NONE, new.producer_id, new.producer_epoch

    def verify_produce(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       tp: TopicPartition) -> ErrorCode:
        """Whether a transactional batch belongs to an ongoing transaction that holds ``tp``
        (Kafka's partition verification, KIP-890): a zombie's late write is refused here."""
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch != meta.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if meta.state is not _S.ONGOING or tp not in meta.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    def pending_offsets(self, group_id: str) -> set[TopicPartition]:
        """Partitions of ``group_id`` whose offsets open transactions hold."""
        return {tp for m in self.transactions.values()
                if m.state is _S.ONGOING or m.state.is_prepare
                for tp in m.offsets.get(group_id, ())}

    # --- timers -----------------------------------------------------------------------------

    async def abort_timed_out(self) -> int:
        """Abort every Ongoing transaction past its timeout; retry unfinished prepared ones."""
        aborted = 0
        for tid, meta in list(self.transactions.items()):
            expired = meta.state is _S.ONGOING and trio.current_time() >= meta.deadline
            if not (expired or meta.state.is_prepare):
                continue
            async with self._lock(tid):
                meta = self.transactions.get(tid)  # type: ignore[assignment]
                if meta is None:
                    continue
                if meta.state.is_prepare:
                    await self._complete(meta)
                elif meta.state is _S.ONGOING and trio.current_time() >= meta.deadline:
                    LOGGER.info("aborting transaction of %r: older than its timeout of %d ms",
                                tid, meta.timeout_ms)
                    if await self._fence_and_abort(meta):
                        aborted += 1
        return aborted

    async def expire_ids(self) -> int:
        """Forget transactional ids idle for transactional.id.expiration.ms."""
        expired = 0
        now = self.now_ms()
        for tid, meta in list(self.transactions.items()):
            if meta.state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT) and \
                    now - meta.last_update_ms >= self.id_expiration_ms:
                async with self._lock(tid):
                    current = self.transactions.get(tid)
                    if current is not meta:
                        continue
                    new = _copy(meta)
                    new.transition(_S.DEAD, now)
                    if await self._durable(new):
                        self._locks.pop(tid, None)
                        expired += 1
        return expired

    # --- completion -------------------------------------------------------------------------

    async def _fence_and_abort(self, meta: TransactionMetadata) -> bool:
        """Bump the epoch (fencing the producer) and abort its transaction with the new one."""
        new = _copy(meta)
        now = self.now_ms()
        new.last_producer_epoch = meta.producer_epoch
        new.producer_epoch = min(meta.producer_epoch + 1, MAX_EPOCH)
        new.transition(_S.PREPARE_EPOCH_FENCE, now)
        new.transition(_S.PREPARE_ABORT, now)
        if not await self._durable(new):
            return False
        return await self._complete(new)

    async def _complete(self, meta: TransactionMetadata) -> bool:
        """Write the markers (and a commit's offsets), then record CompleteCommit/Abort.
        False leaves the transaction prepared, for the timer to retry."""
        committed = meta.state is _S.PREPARE_COMMIT
        if not await write_markers(self.logs, meta, committed, self.now_ms(), self.on_markers):
            return False
        if committed and not await commit_offsets(self.groups, meta):
            return False
        new = _copy(meta)
        new.transition(_S.COMPLETE_COMMIT if committed else _S.COMPLETE_ABORT, self.now_ms())
        if meta.next_producer_id != NO_PRODUCER_ID:  # an exhausted epoch's new producer id
            new.prev_producer_id = meta.producer_id
            new.producer_id, new.producer_epoch = meta.next_producer_id, 0
            new.next_producer_id = NO_PRODUCER_ID
        new.partitions = set()
        new.offsets = {}
        new.start_ms = -1
        return await self._durable(new)

    async def _allocate(self) -> int | None:
        try:
            return await run_io(self.producer_ids.allocate)
        except (OSError, StorageError) as exc:
            LOGGER.error("allocating a producer id failed: %s", exc)
            return None

    async def _durable(self, new: TransactionMetadata) -> bool:
        """Write ``new`` (fsynced), then make it the id's state; False if the disk failed."""
        async with self._write_lock:
            if self.internal_topics is not None:
                await self.internal_topics.prepare(TRANSACTION_TOPIC)
            try:
                await run_io(self.txn_log.append, [new])
            except OSError as exc:
                LOGGER.error("writing the transaction log failed: %s", exc)
                return False
            if new.state is _S.DEAD:
                self.transactions.pop(new.transactional_id, None)
            else:
                self.transactions[new.transactional_id] = new
            self._changed.set()
            self._changed = trio.Event()
            if self.internal_topics is not None:
                self.internal_topics.append_if_exists(
                    TRANSACTION_TOPIC, {new.transactional_id: [kafka_record(new)]})
            if self.txn_log.should_compact():
                live = list(self.transactions.values())
                try:
                    await run_io(self.txn_log.compact, live)
                except OSError as exc:
                    LOGGER.error("compacting the transaction log failed: %s", exc)
            return True


def kafka_record(meta: TransactionMetadata) -> CoordinatorRecord:
    """Kafka's TransactionLogKey/Value of a state; a tombstone for a forgotten id."""
    key = transaction_log_key(meta.transactional_id)
    if meta.state is _S.DEAD:
        return key, None
    return key, transaction_log_value(meta.producer_id, meta.producer_epoch, meta.timeout_ms,
                                      meta.state.value, meta.partitions, meta.last_update_ms,
                                      meta.start_ms)


__all__ = ["COORDINATOR_EPOCH", "TransactionCoordinator", "TxnOffset"]
