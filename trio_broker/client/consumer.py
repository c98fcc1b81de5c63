"""The consumer: subscription or manual assignment, positions, commits, and the public API.

Why positions and commits are tracked the way Java's consumer tracks them: a record counts as
processed once the application asks for more (the next ``getmany`` or the next step of
``async for``), or calls ``commit()``. Auto-commit (``enable.auto.commit``, every
``auto.commit.interval.ms``) stores only processed positions, so a crash between taking records
and handling them replays them rather than losing them (at-least-once).

Background tasks, all in the nursery of ``open_consumer``: the fetcher (pipelined Fetch
requests), the offset initialiser (committed offsets, ``auto.offset.reset``, seeks to the
beginning or end), the metadata updater, and with a group the group task, the heartbeat task and
the auto-commit task. Leaving the ``async with`` block commits (with auto-commit on), leaves the
group and stops them all.

Only ``isolation.level=read_uncommitted`` is supported: transaction markers are skipped, records
of aborted transactions are returned like any others.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Protocol

import trio
import trio.lowlevel

from ..client_core.errors import (
    ConfigError,
    IllegalStateError,
    KafkaError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
)
from ..protocol.api_keys import ApiKey, request_class
from .config import CONSUMER_DEFAULTS, normalize
from .fetcher import ConsumerRecord, Fetcher, PartitionState
from .group import CoordinatorLookup, GroupMember, commit_offsets, fetch_committed
from .metadata import TopicPartition
from .network import NetworkClient, Wakeup
from .offsets import EARLIEST, LATEST, OffsetAndTimestamp, list_offsets

LOGGER = logging.getLogger(__name__)

_RESETS = {"earliest": EARLIEST, "latest": LATEST}


class ConsumerRebalanceListener(Protocol):
    """Called by the group task around every rebalance (eager: all partitions are revoked)."""

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None: ...

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None: ...


class OffsetAndMetadata(tuple):  # type: ignore[type-arg]
    """A committed offset with its metadata string."""

    __slots__ = ()

    def __new__(cls, offset: int, metadata: str | None = "") -> OffsetAndMetadata:
        return tuple.__new__(cls, (offset, metadata))

    @property
    def offset(self) -> int:
        return int(self[0])

    @property
    def metadata(self) -> str | None:
        return self[1]  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"OffsetAndMetadata(offset={self[0]}, metadata={self[1]!r})"


class Consumer:
    """A Kafka consumer for Trio; make one with ``open_consumer``."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        if config["isolation.level"] != "read_uncommitted":
            raise ConfigError("only isolation.level=read_uncommitted is supported")
        if config["group.instance.id"] is not None:
            raise ConfigError("static membership (group.instance.id) is not supported")
        reset = config["auto.offset.reset"]
        if reset not in ("earliest", "latest", "none"):
            raise ConfigError(f"auto.offset.reset must be earliest, latest or none, "
                              f"got {reset!r}")
        self._reset_policy: str = reset
        self._client = NetworkClient(config,
                                     allow_auto_topic_creation=config["allow.auto.create.topics"])
        self._fetcher = Fetcher(self._client, config, self._on_out_of_range)
        self._group_id: str | None = config["group.id"]
        self._coordinator = (CoordinatorLookup(self._client, self._group_id)
                             if self._group_id else None)
        self._member: GroupMember | None = None
        if self._coordinator is not None:
            self._member = GroupMember(self._client, config, self._coordinator,
                                       on_revoke=self._on_revoke, on_assign=self._on_assign,
                                       on_fatal=lambda: self._fetcher.data_ready.set())
        self._api_timeout_s = config["default.api.timeout.ms"] / 1000
        self._max_poll_records = config["max.poll.records"]
        self._auto_commit = bool(config["enable.auto.commit"]) and self._group_id is not None
        self._subscription: set[str] | None = None
        self._manual = False
        self._listener: ConsumerRebalanceListener | None = None
        self._offsets_wakeup = Wakeup()
        self._positions_changed = trio.Event()
        self._consumed: dict[TopicPartition, int] = {}
        self._returned: dict[TopicPartition, int] = {}
        self._committed_by_auto: dict[TopicPartition, int] = {}
        self._iter_records: deque[ConsumerRecord] = deque()
        self._last_yielded: ConsumerRecord | None = None
        self._errors: list[KafkaError] = []
        self._closed = False

    @property
    def client(self) -> NetworkClient:
        return self._client

    # --- lifecycle ---------------------------------------------------------------------------

    async def _start(self, nursery: trio.Nursery) -> None:
        self._client.start(nursery)
        nursery.start_soon(self._fetcher.run)
        nursery.start_soon(self._offsets_loop)
        if self._member is not None:
            nursery.start_soon(self._member.run)
            nursery.start_soon(self._member.heartbeat_loop)
            if self._auto_commit:
                nursery.start_soon(self._auto_commit_loop)

    async def _close(self) -> None:
        self._closed = True
        if self._member is not None:
            if self._auto_commit and self._member.stable:
                self._mark_consumed()
                try:
                    await self._commit_consumed(set(self._member.assignment))
                except KafkaError as exc:
                    LOGGER.warning("final commit failed: %r", exc)
            await self._member.leave()
        self._client.close()

    # --- subscription and assignment ---------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | str,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        """Join the consumer group (``group.id``) for ``topics``; the group assigns partitions.
        """
        if self._member is None:
            raise IllegalStateError("subscribe() needs a group.id; use assign() without one")
        if self._manual:
            raise IllegalStateError("subscribe() after assign(): call unsubscribe() first")
        names = {topics} if isinstance(topics, str) else set(topics)
        if not names:
            raise ValueError("subscribe() needs at least one topic")
        self._subscription = names
        self._listener = listener
        self._client.set_topics(names)
        self._member.subscribe(names)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly ``partitions``, without group membership."""
        if self._subscription is not None:
            raise IllegalStateError("assign() after subscribe(): call unsubscribe() first")
        wanted = {TopicPartition(*tp) for tp in partitions}
        self._manual = True
        self._client.set_topics({tp.topic for tp in wanted})
        self._set_assignment(wanted)

    async def unsubscribe(self) -> None:
        """Drop the subscription (leaving the group) or the manual assignment."""
        if self._member is not None and self._subscription is not None:
            self._member.subscribe(())
            if self._member.assignment:
                revoked, self._member.assignment = self._member.assignment, set()
                await self._on_revoke(revoked)
            await self._member.leave()
        else:
            await trio.lowlevel.checkpoint()
        self._subscription = None
        self._manual = False
        self._set_assignment(set())

    def subscription(self) -> set[str]:
        return set(self._subscription or ())

    def assignment(self) -> set[TopicPartition]:
        return set(self._fetcher.states)

    def _set_assignment(self, partitions: set[TopicPartition]) -> None:
        self._fetcher.set_assignment(partitions)
        for tp in list(self._consumed):
            if tp not in partitions:
                del self._consumed[tp]
        self._returned = {tp: o for tp, o in self._returned.items() if tp in partitions}
        self._iter_records = deque(r for r in self._iter_records
                                   if (r.topic, r.partition) in partitions)
        self._offsets_wakeup.set()

    async def _on_revoke(self, revoked: set[TopicPartition]) -> None:
        if self._auto_commit:
            self._mark_consumed()
            try:
                await self._commit_consumed(revoked)
            except KafkaError as exc:
                LOGGER.warning("commit before rebalance failed: %r", exc)
        if self._listener is not None:
            await self._listener.on_partitions_revoked(set(revoked))
        self._set_assignment(set())

    async def _on_assign(self, assigned: set[TopicPartition]) -> None:
        self._set_assignment(assigned)
        if self._listener is not None:
            await self._listener.on_partitions_assigned(set(assigned))

    # --- positions ---------------------------------------------------------------------------

    def _state(self, tp: TopicPartition) -> PartitionState:
        state = self._fetcher.states.get(TopicPartition(*tp))
        if state is None:
            raise IllegalStateError(f"{tp} is not assigned to this consumer")
        return state

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Consume ``tp`` from ``offset`` on (the next records returned start there)."""
        if offset < 0:
            raise ValueError(f"offset {offset} is negative")
        state = self._state(tp)
        state.seek(offset)
        self._after_seek(state)
        self._consumed[state.tp] = offset

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Move to the earliest offset (looked up before the next fetch)."""
        self._seek_reset(partitions, "earliest")

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Move to the latest offset (looked up before the next fetch)."""
        self._seek_reset(partitions, "latest")

    def _seek_reset(self, partitions: Iterable[TopicPartition], strategy: str) -> None:
        states = ([self._state(tp) for tp in partitions] if partitions
                  else list(self._fetcher.states.values()))
        for state in states:
            state.request_reset(strategy)
            self._after_seek(state)
        self._offsets_wakeup.set()

    def _after_seek(self, state: PartitionState) -> None:
        self._fetcher.invalidate(state)
        tp = state.tp
        self._returned.pop(tp, None)
        if self._iter_records:
            self._iter_records = deque(r for r in self._iter_records
                                       if (r.topic, r.partition) != tp)

    async def position(self, tp: TopicPartition) -> int:
        """The offset of the next record this consumer will return for ``tp``."""
        state = self._state(tp)
        with trio.fail_after(self._api_timeout_s):
            while state.position is None:
                self._raise_errors()
                self._offsets_wakeup.set()
                await self._positions_changed.wait()
        if self._iter_records:
            for record in self._iter_records:
                if (record.topic, record.partition) == state.tp:
                    return record.offset
        return state.position

    def _on_out_of_range(self, state: PartitionState) -> None:
        if self._reset_policy == "none":
            state.error = OffsetOutOfRangeError(
                f"{state.tp.topic}-{state.tp.partition}: offset {state.fetch_offset} is out of "
                "range and auto.offset.reset=none")
            self._fetcher.data_ready.set()
            return
        state.request_reset(self._reset_policy)
        self._after_seek(state)
        self._offsets_wakeup.set()

    async def _offsets_loop(self) -> None:
        attempts = 0
        while True:
            pending = [s for s in self._fetcher.states.values()
                       if s.position is None and s.reset is not None and s.error is None]
            if not pending:
                await self._offsets_wakeup.wait()
                continue
            try:
                await self._initialize_positions(pending)
                attempts = 0
            except KafkaError as exc:
                if not exc.retriable:
                    self._errors.append(exc)
                    self._fetcher.data_ready.set()
                LOGGER.info("looking up offsets failed: %r", exc)
                await trio.sleep(self._client.retry_backoff.backoff_ms(attempts) / 1000)
                attempts += 1
            except trio.TooSlowError:
                attempts += 1
            finally:
                self._positions_changed.set()
                self._positions_changed = trio.Event()

    async def _initialize_positions(self, pending: list[PartitionState]) -> None:
        epochs = {state.tp: state.epoch for state in pending}

        def current(state: PartitionState) -> bool:
            return (self._fetcher.states.get(state.tp) is state
                    and state.epoch == epochs[state.tp] and state.position is None)

        need_committed = [s for s in pending if s.reset == "committed"]
        if need_committed:
            committed: dict[TopicPartition, tuple[int, str | None]] = {}
            if self._coordinator is not None:
                committed = await fetch_committed(
                    self._coordinator, self._client, [s.tp for s in need_committed],
                    timeout_s=self._api_timeout_s)
            for state in need_committed:
                if not current(state):
                    continue
                if state.tp in committed:
                    state.seek(committed[state.tp][0])
                    epochs[state.tp] = state.epoch
                    self._consumed[state.tp] = state.position  # type: ignore[assignment]
                elif self._reset_policy == "none":
                    state.error = NoOffsetForPartitionError(
                        f"{state.tp.topic}-{state.tp.partition} has no committed offset and "
                        "auto.offset.reset=none")
                    self._fetcher.data_ready.set()
                else:
                    state.reset = self._reset_policy
        to_reset = {s.tp: _RESETS[s.reset] for s in pending
                    if current(s) and s.reset in _RESETS}
        if to_reset:
            found = await list_offsets(self._client, to_reset, timeout_s=self._api_timeout_s)
            for state in pending:
                if state.tp in found and current(state):
                    state.seek(found[state.tp].offset)
                    self._consumed[state.tp] = state.position  # type: ignore[assignment]
        self._fetcher.wakeup()

    # --- consuming ---------------------------------------------------------------------------

    def _raise_errors(self) -> None:
        if self._member is not None and self._member.fatal_error is not None:
            raise self._member.fatal_error
        if self._errors:
            raise self._errors.pop(0)
        self._fetcher.raise_partition_errors()

    def _mark_consumed(self) -> None:
        if self._returned:
            self._consumed.update(self._returned)
            self._returned = {}
        if self._last_yielded is not None:
            record = self._last_yielded
            self._consumed[TopicPartition(record.topic, record.partition)] = record.offset + 1
            self._last_yielded = None

    async def getmany(self, *partitions: TopicPartition, timeout_ms: float = 0,
                      max_records: int | None = None,
                      ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from the buffers, waiting up to ``timeout_ms`` for the first one.

        ``partitions`` limits the result to those partitions (others stay buffered).
        """
        if self._closed:
            raise IllegalStateError("the consumer is closed")
        self._mark_consumed()
        if self._iter_records:
            raise IllegalStateError("getmany() while an async for loop holds records")
        limit = self._max_poll_records if max_records is None else max_records
        fetcher = self._fetcher
        self._raise_errors()
        records = self._collect(limit, partitions)
        if records or timeout_ms <= 0:
            if not records:
                await trio.lowlevel.checkpoint()
            return records
        with trio.move_on_after(timeout_ms / 1000):
            while True:
                await fetcher.data_ready.wait()
                self._raise_errors()
                records = self._collect(limit, partitions)
                if records:
                    return records
                if fetcher.data_ready.is_set():
                    # buffered data only for partitions not asked for
                    await trio.lowlevel.checkpoint()
        return {}

    def _collect(self, limit: int, partitions: tuple[TopicPartition, ...] = (),
                 ) -> dict[TopicPartition, list[ConsumerRecord]]:
        fetcher = self._fetcher
        if partitions:
            wanted = {TopicPartition(*tp) for tp in partitions}
            paused = [s for tp, s in fetcher.states.items() if tp not in wanted and not s.paused]
            for state in paused:
                state.paused = True
            try:
                records = fetcher.collect(limit)
            finally:
                for state in paused:
                    state.paused = False
                if fetcher.has_data():
                    fetcher.data_ready.set()
        else:
            records = fetcher.collect(limit)
        for tp, recs in records.items():
            self._returned[tp] = recs[-1].offset + 1
        return records

    async def getone(self) -> ConsumerRecord:
        """The next record, waiting as long as it takes."""
        return await self.__anext__()

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        if self._last_yielded is not None:
            record = self._last_yielded
            self._consumed[TopicPartition(record.topic, record.partition)] = record.offset + 1
            self._last_yielded = None
        if not self._iter_records:
            if self._closed:
                raise StopAsyncIteration
            self._mark_consumed()
            fetcher = self._fetcher
            while True:
                self._raise_errors()
                batch = fetcher.collect(self._max_poll_records)
                if batch:
                    break
                await fetcher.data_ready.wait()
            for recs in batch.values():
                self._iter_records.extend(recs)
        record = self._iter_records.popleft()
        self._last_yielded = record
        return record

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop returning and fetching records of ``partitions`` until ``resume``."""
        for tp in partitions:
            self._state(tp).paused = True

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._state(tp).paused = False
        if self._fetcher.has_data():
            self._fetcher.data_ready.set()
        self._fetcher.wakeup()

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self._fetcher.states.items() if s.paused}

    def highwater(self, tp: TopicPartition) -> int | None:
        """The partition's high watermark as of the last fetch response (None before one)."""
        return self._state(tp).high_watermark

    # --- commits -----------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None
                     = None) -> None:
        """Commit ``offsets`` (next offsets to read), or the position after every record
        returned so far."""
        if self._coordinator is None:
            raise IllegalStateError("commit() needs a group.id")
        if offsets is None:
            self._mark_consumed()
            await self._commit_consumed(set(self._fetcher.states))
            return
        prepared: dict[TopicPartition, tuple[int, str | None]] = {}
        for tp, value in offsets.items():
            if isinstance(value, tuple):
                prepared[TopicPartition(*tp)] = (int(value[0]), value[1])
            else:
                prepared[TopicPartition(*tp)] = (int(value), "")
        await self._commit(prepared)

    async def _commit_consumed(self, partitions: set[TopicPartition]) -> None:
        offsets = {tp: (self._consumed[tp], "") for tp in partitions if tp in self._consumed}
        await self._commit(offsets)

    async def _commit(self, offsets: Mapping[TopicPartition, tuple[int, str | None]]) -> None:
        assert self._coordinator is not None
        generation, member_id = -1, ""
        if self._member is not None and self._subscription is not None:
            generation, member_id = self._member.commit_identity
        await commit_offsets(self._coordinator, self._client, offsets, generation=generation,
                             member_id=member_id, timeout_s=self._api_timeout_s)
        for tp, (offset, _) in offsets.items():
            self._committed_by_auto[tp] = offset

    async def _auto_commit_loop(self) -> None:
        interval_s = self.config["auto.commit.interval.ms"] / 1000
        while True:
            await trio.sleep(interval_s)
            member = self._member
            if member is None or not member.stable:
                continue
            offsets = {tp: (o, "") for tp, o in self._consumed.items()
                       if tp in member.assignment and self._committed_by_auto.get(tp) != o}
            if not offsets:
                continue
            try:
                await self._commit(offsets)
            except (KafkaError, trio.TooSlowError) as exc:
                LOGGER.warning("auto-commit failed: %r", exc)

    async def committed(self, tp: TopicPartition) -> int | None:
        """The group's committed offset for ``tp`` (None if it never committed one)."""
        if self._coordinator is None:
            raise IllegalStateError("committed() needs a group.id")
        tp = TopicPartition(*tp)
        found = await fetch_committed(self._coordinator, self._client, [tp],
                                      timeout_s=self._api_timeout_s)
        entry = found.get(tp)
        return None if entry is None else entry[0]

    # --- cluster queries ---------------------------------------------------------------------

    async def topics(self) -> set[str]:
        """Every topic in the cluster (internal ones excluded if ``exclude.internal.topics``)."""
        metadata_cls = request_class(ApiKey.Metadata)
        assert metadata_cls is not None
        response = await self._client.request_any(
            ApiKey.Metadata, lambda v: metadata_cls[v](
                topics=[] if v == 0 else None, allow_auto_topic_creation=False))
        exclude = self.config["exclude.internal.topics"]
        return {t.name for t in response.topics
                if t.error_code == 0 and not (exclude and getattr(t, "is_internal", False))}

    async def partitions_for_topic(self, topic: str) -> set[int]:
        info = await self._client.wait_for_topic(topic, self._api_timeout_s)
        return set(info.partitions)

    async def beginning_offsets(self, partitions: Iterable[TopicPartition],
                                ) -> dict[TopicPartition, int]:
        found = await list_offsets(self._client, dict.fromkeys(partitions, EARLIEST),
                                   timeout_s=self._api_timeout_s)
        return {tp: v.offset for tp, v in found.items()}

    async def end_offsets(self, partitions: Iterable[TopicPartition],
                          ) -> dict[TopicPartition, int]:
        found = await list_offsets(self._client, dict.fromkeys(partitions, LATEST),
                                   timeout_s=self._api_timeout_s)
        return {tp: v.offset for tp, v in found.items()}

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int],
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset whose timestamp is at least the given one (None if none is)."""
        found = await list_offsets(self._client, dict(timestamps), timeout_s=self._api_timeout_s)
        return {tp: (v if v.offset >= 0 else None) for tp, v in found.items()}


@asynccontextmanager
async def open_consumer(*topics: str, bootstrap_servers: str | list[str] | None = None,
                        config: Mapping[str, Any] | None = None,
                        **kwargs: Any) -> AsyncIterator[Consumer]:
    """A consumer whose background tasks live exactly as long as the ``async with`` block.

    Topics given here are subscribed at once (which needs ``group_id``).
    """
    if bootstrap_servers is not None:
        kwargs["bootstrap_servers"] = bootstrap_servers
    consumer = Consumer(normalize("consumer", CONSUMER_DEFAULTS, config, kwargs))
    async with trio.open_nursery() as nursery:
        await consumer._start(nursery)
        if topics:
            consumer.subscribe(topics)
        try:
            yield consumer
        except BaseException:
            consumer._closed = True
            consumer.client.close()
            nursery.cancel_scope.cancel()
            raise
        await consumer._close()
        nursery.cancel_scope.cancel()
