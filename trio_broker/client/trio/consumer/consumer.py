"""The consumer's public face: subscription or manual assignment, positions, commits, queries.

Its parts, as in Kafka's and aiokafka's consumers: ``subscription_state`` (what is assigned and
which positions are processed), ``fetcher`` (pipelined Fetch requests, buffered chunks),
``positions`` (committed offsets, ``auto.offset.reset``), ``coordinator_lookup`` (finding the
group's coordinator), ``committed_offsets`` (OffsetCommit, OffsetFetch), ``classic_member`` and
``consumer_member`` (membership in a classic or a consumer-protocol group: joining, heartbeats,
leaving) and ``assignors``. Auto-commit (``enable.auto.commit``, every
``auto.commit.interval.ms``) stores only processed positions, so a crash between taking records
and handling them replays them rather than losing them (at-least-once).

Background tasks, all in the nursery of ``open_consumer``: the fetcher (pipelined Fetch
requests), the position resolver (committed offsets, ``auto.offset.reset``, seeks to the
beginning or end), the metadata updater, and with a group the group task, the heartbeat task and
the auto-commit task. Leaving the ``async with`` block (by any exit, cancellation and Ctrl-C
included) commits (with auto-commit on), leaves the group and stops them all.

``isolation.level``: ``read_uncommitted`` (the default) returns every data record, aborted ones
included; ``read_committed`` reads up to the last stable offset and drops the records of aborted
transactions (``client.core.fetch``), and its "latest" is the last stable offset.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Protocol

import trio
import trio.lowlevel

from ....protocol.api_keys import ApiKey
from ....protocol.errors import ErrorCode
from ...core.errors import (
    ConfigError,
    IllegalStateError,
    KafkaError,
)
from ...core.metadata import metadata_request
from ...core.offsets import READ_COMMITTED, READ_UNCOMMITTED
from ...core.structs import (
    EARLIEST,
    LATEST,
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)
from ..config import CONSUMER_DEFAULTS, normalize
from ..network import NetworkClient
from ..offsets import list_offsets
from .classic_member import GroupMember
from .committed_offsets import commit_offsets, fetch_committed
from .consumer_member import COMMIT_VERSION, ConsumerMember
from .coordinator_lookup import CoordinatorLookup
from .fetcher import Fetcher
from .positions import PositionResolver
from .subscription_state import ConsumerRebalanceListener, PartitionState, SubscriptionState

LOGGER = logging.getLogger(__name__)


class TopicPattern(Protocol):
    """A compiled expression ``subscribe(pattern=...)`` takes besides a string: Python's
    ``re.Pattern``, or another engine's with the same two members (``re2``'s, where the pattern
    comes from someone untrusted: RE2 cannot backtrack)."""

    @property
    def pattern(self) -> str: ...

    def fullmatch(self, string: str) -> object: ...


class Consumer:
    """A Kafka consumer for Trio; make one with ``open_consumer``."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        if config["isolation.level"] not in ("read_uncommitted", "read_committed"):
            raise ConfigError("isolation.level must be read_uncommitted or read_committed, "
                              f"got {config['isolation.level']!r}")
        self._isolation_level = (READ_COMMITTED if config["isolation.level"] == "read_committed"
                                 else READ_UNCOMMITTED)
        protocol = str(config["group.protocol"]).lower()
        if protocol not in ("classic", "consumer"):
            raise ConfigError(f"group.protocol must be classic or consumer, got {protocol!r}")
        if config["group.remote.assignor"] is not None and protocol == "classic":
            raise ConfigError("group.remote.assignor needs group.protocol=consumer")
        self._consumer_protocol = protocol == "consumer"
        reset = config["auto.offset.reset"]
        if reset not in ("earliest", "latest", "none"):
            raise ConfigError(f"auto.offset.reset must be earliest, latest or none, "
                              f"got {reset!r}")
        self._client = NetworkClient(config,
                                     allow_auto_topic_creation=config["allow.auto.create.topics"])
        self._subs = SubscriptionState()
        self._fetcher = Fetcher(self._client, config, self._subs,
                                lambda state: self._positions.on_out_of_range(state))
        self._group_id: str | None = config["group.id"]
        self._coordinator = (CoordinatorLookup(self._client, self._group_id)
                             if self._group_id else None)
        self._member: GroupMember | ConsumerMember | None = None
        if self._coordinator is not None:
            member_class = ConsumerMember if self._consumer_protocol else GroupMember
            self._member = member_class(self._client, config, self._coordinator,
                                        on_revoke=self._on_revoke, on_assign=self._on_assign,
                                        on_fatal=lambda: self._fetcher.data_ready.set())
        self._api_timeout_s = config["default.api.timeout.ms"] / 1000
        self._positions = PositionResolver(self._client, self._subs, self._fetcher,
                                           self._coordinator, reset_policy=reset,
                                           api_timeout_s=self._api_timeout_s,
                                           isolation_level=self._isolation_level)
        self._max_poll_records = config["max.poll.records"]
        self._auto_commit = bool(config["enable.auto.commit"]) and self._group_id is not None
        self._closed = False
        #: a classic-protocol pattern subscription, matched here at every metadata update
        self._pattern: TopicPattern | None = None
        self._exclude_internal = bool(config["exclude.internal.topics"])

    @property
    def client(self) -> NetworkClient:
        return self._client

    # --- lifecycle ---------------------------------------------------------------------------

    async def _start(self, nursery: trio.Nursery) -> None:
        self._client.add_listener(self._on_cluster_change)
        self._client.start(nursery)
        nursery.start_soon(self._fetcher.run)
        nursery.start_soon(self._positions.run)
        if self._member is not None:
            nursery.start_soon(self._member.run)
            nursery.start_soon(self._member.heartbeat_loop)
            if self._auto_commit:
                nursery.start_soon(self._auto_commit_loop)

    def _on_cluster_change(self) -> None:
        self._match_pattern()
        if self._client.fatal_error is not None:
            self._fetcher.data_ready.set()  # a waiting getmany raises it

    async def _close(self, commit_budget_s: float = math.inf) -> None:
        """Give up the partitions (the commit with auto-commit on and the listener, bounded by
        ``commit_budget_s`` so the leave still gets its turn), then leave the group."""
        self._closed = True
        if self._member is not None:
            self._member.stop_joining()
            if self._member.assignment:  # as Java's close: commit, on_partitions_revoked
                revoked, self._member.assignment = self._member.assignment, set()
                with trio.move_on_after(commit_budget_s):
                    await self._on_revoke(revoked)
            await self._member.leave()
        self._client.close()

    # --- subscription and assignment ---------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | str = (),
                  listener: ConsumerRebalanceListener | None = None, *,
                  pattern: str | TopicPattern | None = None) -> None:
        """Join the consumer group (``group.id``) for ``topics``, or for every topic whose
        whole name matches ``pattern`` (a string, or an expression compiled already); the group
        assigns partitions.

        A pattern is matched by this client against every topic's metadata with the classic
        protocol (Python's ``re``, as Java's client uses ``java.util.regex``; internal topics
        left out while ``exclude.internal.topics``), so topics created or deleted later join or
        leave the subscription at the next metadata refresh (``metadata.max.age.ms``); with the
        consumer protocol it goes to the group coordinator, which matches it (RE2 syntax).
        """
        if self._member is None:
            raise IllegalStateError("subscribe() needs a group.id; use assign() without one")
        if self._subs.manual:
            raise IllegalStateError("subscribe() after assign(): call unsubscribe() first")
        names = {topics} if isinstance(topics, str) else set(topics)
        if pattern is not None:
            if names:
                raise ValueError("subscribe() takes topics or a pattern, not both")
            self._subscribe_pattern(pattern, listener)
            return
        if not names:
            raise ValueError("subscribe() needs at least one topic")
        self._pattern = None
        self._client.track_all_topics(False)
        self._subs.subscription = names
        self._subs.listener = listener
        self._client.set_topics(names)
        self._member.subscribe(names)

    def _subscribe_pattern(self, pattern: str | TopicPattern,
                           listener: ConsumerRebalanceListener | None) -> None:
        assert self._member is not None
        compiled: TopicPattern
        if isinstance(pattern, str):
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"subscribe(pattern={pattern!r}): {exc}") from None
        else:
            compiled = pattern
        self._subs.listener = listener
        self._client.track_all_topics(True)
        if isinstance(self._member, ConsumerMember):
            self._pattern = None
            self._subs.subscription = set()
            self._member.subscribe_pattern(compiled.pattern)
            return
        self._pattern = compiled
        self._subs.subscription = set()
        self._match_pattern()

    def _match_pattern(self) -> None:
        """Classic protocol: subscribe to the topics the pattern matches now."""
        if self._pattern is None or self._member is None or self._subs.subscription is None:
            return
        exclude = self._exclude_internal
        matched = {name for name, info in self._client.metadata.topics.items()
                   if info.error == ErrorCode.NONE and not (exclude and info.internal)
                   and self._pattern.fullmatch(name)}
        if matched != self._subs.subscription:
            LOGGER.info("pattern %r now matches %s", self._pattern.pattern, sorted(matched))
            self._subs.subscription = matched
            self._member.subscribe(matched)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly ``partitions``, without group membership."""
        if self._subs.subscription is not None:
            raise IllegalStateError("assign() after subscribe(): call unsubscribe() first")
        wanted = {TopicPartition(*tp) for tp in partitions}
        self._subs.manual = True
        self._client.set_topics({tp.topic for tp in wanted})
        self._set_assignment(wanted)

    async def unsubscribe(self) -> None:
        """Drop the subscription (leaving the group) or the manual assignment."""
        if self._member is not None and self._subs.subscription is not None:
            self._pattern = None
            self._client.track_all_topics(False)
            self._member.subscribe(())
            self._member.stop_joining()
            if self._member.assignment:
                revoked, self._member.assignment = self._member.assignment, set()
                await self._on_revoke(revoked)
            await self._member.leave()
        else:
            await trio.lowlevel.checkpoint()
        self._subs.subscription = None
        self._subs.manual = False
        self._set_assignment(set())

    def subscription(self) -> set[str]:
        return set(self._subs.subscription or ())

    def assignment(self) -> set[TopicPartition]:
        return set(self._subs.states)

    def _set_assignment(self, partitions: set[TopicPartition]) -> None:
        self._subs.set_assignment(partitions)
        self._fetcher.assignment_changed()
        self._positions.wakeup.set()

    async def _on_revoke(self, revoked: set[TopicPartition]) -> None:
        if self._auto_commit:
            self._subs.mark_consumed()
            try:
                await self._commit_consumed(revoked)
            except (KafkaError, trio.TooSlowError) as exc:
                LOGGER.warning("commit before giving up partitions failed: %r", exc)
        if self._subs.listener is not None:
            await self._subs.listener.on_partitions_revoked(set(revoked))
        # what the member still owns: nothing (classic, eager) or the rest (incremental)
        assert self._member is not None
        self._set_assignment(set(self._member.assignment))

    async def _on_assign(self, assigned: set[TopicPartition]) -> None:
        assert self._member is not None
        self._set_assignment(set(self._member.assignment))
        if self._subs.listener is not None:
            await self._subs.listener.on_partitions_assigned(set(assigned))

    # --- positions ---------------------------------------------------------------------------

    def _state(self, tp: TopicPartition) -> PartitionState:
        return self._subs.state(tp)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Consume ``tp`` from ``offset`` on (the next records returned start there)."""
        if offset < 0:
            raise ValueError(f"offset {offset} is negative")
        state = self._state(tp)
        state.seek(offset)
        self._positions.after_seek(state)
        self._subs.consumed[state.tp] = offset

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Move to the earliest offset (looked up before the next fetch)."""
        self._seek_reset(partitions, "earliest")

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Move to the latest offset (looked up before the next fetch)."""
        self._seek_reset(partitions, "latest")

    def _seek_reset(self, partitions: Iterable[TopicPartition], strategy: str) -> None:
        self._positions.reset([self._state(tp) for tp in partitions] if partitions
                              else list(self._subs.states.values()), strategy)

    async def position(self, tp: TopicPartition) -> int:
        """The offset of the next record this consumer will return for ``tp``."""
        state = self._state(tp)
        with trio.fail_after(self._api_timeout_s):
            while state.position is None:
                self._raise_errors()
                self._positions.wakeup.set()
                await self._positions.positions_changed.wait()
        position = self._subs.next_position(state)
        assert position is not None
        return position

    # --- consuming ---------------------------------------------------------------------------

    def _raise_errors(self) -> None:
        if self._member is not None and self._member.fatal_error is not None:
            raise self._member.fatal_error
        if self._client.fatal_error is not None:
            raise self._client.fatal_error
        if self._positions.errors:
            raise self._positions.errors.pop(0)
        self._fetcher.raise_partition_errors()

    async def getmany(self, *partitions: TopicPartition, timeout_ms: float = 0,
                      max_records: int | None = None,
                      ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from the buffers, waiting up to ``timeout_ms`` for the first one.

        ``partitions`` limits the result to those partitions (others stay buffered).
        """
        if self._closed:
            raise IllegalStateError("the consumer is closed")
        self._subs.mark_consumed()
        if self._subs.iter_records:
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
            paused = [s for tp, s in self._subs.states.items()
                      if tp not in wanted and not s.paused]
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
        self._subs.mark_returned(records)
        return records

    async def getone(self) -> ConsumerRecord:
        """The next record, waiting as long as it takes."""
        return await self.__anext__()

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        subs = self._subs
        subs.mark_yielded_consumed()
        if not subs.iter_records:
            if self._closed:
                raise StopAsyncIteration
            subs.mark_consumed()
            fetcher = self._fetcher
            while True:
                self._raise_errors()
                batch = fetcher.collect(self._max_poll_records)
                if batch:
                    break
                await fetcher.data_ready.wait()
            for recs in batch.values():
                subs.iter_records.extend(recs)
        record = subs.iter_records.popleft()
        subs.last_yielded = record
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
        return self._subs.paused()

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
            self._subs.mark_consumed()
            await self._commit_consumed(set(self._subs.states))
            return
        prepared: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, value in offsets.items():
            if isinstance(value, tuple):
                prepared[TopicPartition(*tp)] = OffsetAndMetadata(int(value[0]), value[1])
            else:
                prepared[TopicPartition(*tp)] = OffsetAndMetadata(int(value), "")
        await self._commit(prepared)

    async def _commit_consumed(self, partitions: set[TopicPartition]) -> None:
        await self._commit(self._subs.consumed_offsets(partitions))

    async def _commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        assert self._coordinator is not None
        generation, member_id, instance_id = -1, "", None
        if self._member is not None and self._subs.subscription is not None:
            generation, member_id = self._member.commit_identity
            instance_id = self.config["group.instance.id"]
        await commit_offsets(self._coordinator, self._client, offsets, generation=generation,
                             member_id=member_id, timeout_s=self._api_timeout_s,
                             version=COMMIT_VERSION if self._consumer_protocol else None,
                             group_instance_id=instance_id)
        for tp, (offset, _) in offsets.items():
            self._subs.committed[tp] = offset

    async def _auto_commit_loop(self) -> None:
        interval_s = self.config["auto.commit.interval.ms"] / 1000
        while True:
            await trio.sleep(interval_s)
            member = self._member
            if member is None or not member.stable:
                continue
            offsets = self._subs.uncommitted(member.assignment)
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
        return None if entry is None else entry.offset

    # --- cluster queries ---------------------------------------------------------------------

    async def topics(self) -> set[str]:
        """Every topic in the cluster (internal ones excluded if ``exclude.internal.topics``)."""
        response = await self._client.request_any(
            ApiKey.Metadata, lambda v: metadata_request(v, None))
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
                                   timeout_s=self._api_timeout_s,
                                   isolation_level=self._isolation_level)
        return {tp: v.offset for tp, v in found.items()}

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int],
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset whose timestamp is at least the given one (None if none is)."""
        found = await list_offsets(self._client, dict(timestamps), timeout_s=self._api_timeout_s)
        return {tp: (v if v.offset >= 0 else None) for tp, v in found.items()}


#: how long leaving the block may spend on the final commit and the leave, when it was left by
#: cancellation or an exception (Ctrl-C included): long enough for two round trips, short
#: enough that a Ctrl-C still feels immediate.
LEAVE_DEADLINE_S = 5.0


@asynccontextmanager
async def open_consumer(*topics: str, bootstrap_servers: str | list[str] | None = None,
                        config: Mapping[str, Any] | None = None,
                        **kwargs: Any) -> AsyncIterator[Consumer]:
    """A consumer whose background tasks live exactly as long as the ``async with`` block.

    Topics given here are subscribed at once (which needs ``group_id``). However the block is
    left (normally, by an exception, by cancellation or Ctrl-C) the consumer commits (with
    auto-commit on) and leaves its group; after an abnormal exit that happens under a shielded
    deadline of ``LEAVE_DEADLINE_S``, so the group rebalances at once instead of waiting out
    ``session.timeout.ms``.
    """
    if bootstrap_servers is not None:
        kwargs["bootstrap_servers"] = bootstrap_servers
    consumer = Consumer(normalize("consumer", CONSUMER_DEFAULTS, config, kwargs))
    async with trio.open_nursery() as nursery:
        # the background tasks run shielded, so the connections still work for the final
        # commit and leave when the block is cancelled; they stop when ``background`` does
        background, tasks = await nursery.start(_shielded_nursery)
        try:
            await consumer._start(tasks)
            if topics:
                consumer.subscribe(topics)
            try:
                yield consumer
            except BaseException:
                with trio.CancelScope(shield=True) as scope:
                    scope.deadline = trio.current_time() + LEAVE_DEADLINE_S
                    await consumer._close(commit_budget_s=LEAVE_DEADLINE_S / 2)
                raise
            await consumer._close()
        finally:
            consumer._closed = True
            consumer.client.close()
            background.cancel()


async def _shielded_nursery(*, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    with trio.CancelScope(shield=True) as scope:
        async with trio.open_nursery() as tasks:
            task_status.started((scope, tasks))
            await trio.sleep_forever()
