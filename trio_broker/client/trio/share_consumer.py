"""ShareConsumer: a Trio member of a share group (KIP-932, Kafka's ``KafkaShareConsumer``).

::

    async with ShareConsumer(bootstrap, group_id="workers", topics=["orders"]) as consumer:
        async for record in consumer:
            handle(record)                       # implicit mode: accepted at the next fetch
    # share_acknowledgement_mode="explicit": await consumer.acknowledge(record, ACCEPT|...)

Why this shape: members of a share group own no partitions, so there are no positions, no
rebalance callbacks and no commits of offsets; the broker hands each record to one member
under an acquisition lock, and the member acknowledges it (``core.share_consumer`` keeps which
records wait for that). Two background tasks live in the consumer's nursery: the heartbeat
(join with a member id the client makes, as KIP-932 v1 has it, then heartbeat at the interval
the coordinator gives; rejoin on UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH) and the metadata
updater. Fetching happens in the iterating task: one ShareFetch per partition leader, in a
share session per leader (epoch 0 opens it with the assigned partitions, each next request
the next epoch, forgotten partitions named; SHARE_SESSION_NOT_FOUND or
INVALID_SHARE_SESSION_EPOCH opens a new one), carrying the acknowledgements due. ``commit``
sends them at once (ShareAcknowledge); leaving the block sends the last ones with the sessions'
final epoch and leaves the group.
"""

from __future__ import annotations

import logging
import uuid
from collections import deque
from collections.abc import Mapping
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any

import trio

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..core.errors import ConfigError, KafkaError, describe_code, error_for
from ..core.fetch import decode_fetched
from ..core.share_consumer import (
    FINAL_SESSION_EPOCH,
    INITIAL_SESSION_EPOCH,
    JOIN_EPOCH,
    LEAVE_EPOCH,
    Acknowledgements,
    AcknowledgeType,
    ShareConsumerRecord,
    acquired_records,
    share_acknowledge_request,
    share_fetch_request,
    share_group_heartbeat_request,
)
from ..core.structs import TopicPartition
from .config import SHARE_CONSUMER_DEFAULTS, normalize
from .consumer.coordinator_lookup import CoordinatorLookup
from .network import NetworkClient, Wakeup

LOGGER = logging.getLogger(__name__)

#: how long leaving may take when the block is left by an exception or cancellation
LEAVE_DEADLINE_S = 5.0
#: answers after which a share session is opened again
_SESSION_ERRORS = frozenset({ErrorCode.SHARE_SESSION_NOT_FOUND,
                             ErrorCode.INVALID_SHARE_SESSION_EPOCH})
_REJOIN_ERRORS = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH})
TIP = tuple[uuid.UUID, int]

__all__ = ["AcknowledgeType", "ShareConsumer", "ShareConsumerRecord"]


class ShareConsumer:
    """A share group member; ``async with`` runs it, ``async for`` reads its records."""

    def __init__(self, bootstrap_servers: str | list[str] | None = None, *, group_id: str,
                 topics: list[str] | tuple[str, ...] = (),
                 config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        if bootstrap_servers is not None:
            kwargs["bootstrap_servers"] = bootstrap_servers
        kwargs["group_id"] = group_id
        self.config = normalize("share consumer", SHARE_CONSUMER_DEFAULTS, config, kwargs)
        mode = str(self.config["share.acknowledgement.mode"]).lower()
        if mode not in ("implicit", "explicit"):
            raise ConfigError(f"share.acknowledgement.mode must be implicit or explicit, "
                              f"got {mode!r}")
        self.group_id: str = self.config["group.id"]
        self.topics = frozenset(topics)
        self.member_id = str(uuid.uuid4())
        self.member_epoch = JOIN_EPOCH
        self.acks = Acknowledgements(implicit=mode == "implicit")
        self.client = NetworkClient(self.config, allow_auto_topic_creation=False)
        self._coordinator = CoordinatorLookup(self.client, self.group_id)
        #: topic id -> partitions, as the coordinator last assigned them
        self._assignment: dict[uuid.UUID, frozenset[int]] = {}
        #: leader node -> (next share session epoch, partitions in the session)
        self._sessions: dict[int, tuple[int, set[TIP]]] = {}
        self._buffer: deque[ShareConsumerRecord] = deque()
        self._assigned = trio.Event()
        self._heartbeat_now = Wakeup()
        self._fatal: KafkaError | None = None
        self._stack: AsyncExitStack | None = None
        self._tasks: trio.Nursery | None = None
        self._background = trio.CancelScope()
        self._heartbeat_scope = trio.CancelScope()
        self._heartbeat_sent = False
        self._closed = False
        #: per partition, the acknowledgement error of the last answer (0: none)
        self.acknowledgement_errors: dict[TopicPartition, int] = {}

    # --- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> ShareConsumer:
        if not self.topics:
            raise ConfigError("a share consumer needs topics to subscribe to")
        stack = AsyncExitStack()
        outer = await stack.enter_async_context(trio.open_nursery())
        # the background tasks run shielded, so the connections still work for the last
        # acknowledgements and the leave when the block is cancelled
        self._background, self._tasks = await outer.start(_shielded_nursery)
        self._stack = stack
        self.client.start(self._tasks)
        self.client.add_topics(self.topics)
        self._tasks.start_soon(self._heartbeat_loop)
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        assert self._stack is not None
        assert self._tasks is not None
        try:
            with trio.CancelScope(shield=True) as scope:
                scope.deadline = trio.current_time() + LEAVE_DEADLINE_S
                await self._close()
        finally:
            self._closed = True
            self.client.close()
            self._background.cancel()
            try:
                await self._stack.__aexit__(kind, error, tb)
            except BaseExceptionGroup as group:
                # the block's own exception, wrapped by the nursery around it: the caller
                # gets it as raised (the background tasks were cancelled, not failed)
                if error is not None and group.exceptions == (error,):
                    raise error from None
                raise
        return None

    async def _close(self) -> None:
        # no heartbeat after the leave: it would join the group again
        self._heartbeat_scope.cancel()
        if self.acks.implicit:
            self.acks.accept_delivered()
        for node_id in list(self._sessions):
            epoch, _ = self._sessions[node_id]
            acks = self._acks_for(node_id)
            if epoch != INITIAL_SESSION_EPOCH and acks:
                try:
                    await self._acknowledge(node_id, FINAL_SESSION_EPOCH, acks)
                except KafkaError as exc:
                    LOGGER.info("share group %s: final acknowledgements failed: %r",
                                self.group_id, exc)
        self._sessions.clear()
        if self._heartbeat_sent:  # a join may be in flight: leave whatever the epoch
            try:
                await self._coordinator.request(ApiKey.ShareGroupHeartbeat, lambda v: (
                    share_group_heartbeat_request(v, self.group_id, self.member_id,
                                                  LEAVE_EPOCH, None)))
            except KafkaError as exc:
                LOGGER.info("share group %s: leaving failed: %r", self.group_id, exc)

    # --- membership --------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        with self._heartbeat_scope:
            await self._heartbeats()

    async def _heartbeats(self) -> None:
        attempts = 0
        while not self._closed:
            interval_s = self.client.retry_backoff.backoff_ms(attempts) / 1000
            try:
                interval_s = await self._heartbeat()
                attempts = 0
            except KafkaError as exc:
                if not exc.retriable:
                    self._fatal = exc
                    self._assigned.set()  # wakes the iterating task to raise it
                    return
                LOGGER.info("share group %s: heartbeat failed: %r", self.group_id, exc)
                attempts += 1
            with trio.move_on_after(interval_s):
                await self._heartbeat_now.wait()

    async def _heartbeat(self) -> float:
        """One heartbeat (a join at epoch 0); the seconds until the next one."""
        epoch = self.member_epoch
        topics = self.topics if epoch == JOIN_EPOCH else None
        self._heartbeat_sent = True
        answer = await self._coordinator.request(ApiKey.ShareGroupHeartbeat, lambda v: (
            share_group_heartbeat_request(v, self.group_id, self.member_id, epoch, topics)))
        code = answer.error_code
        if code in _REJOIN_ERRORS:
            LOGGER.info("share group %s: %s, joining again", self.group_id, describe_code(code))
            self.member_epoch = JOIN_EPOCH
            self._set_assignment({})
            return 0.0
        if code:
            raise self._coordinator.error(code, f"ShareGroupHeartbeat for group "
                                          f"{self.group_id!r}: {describe_code(code)}"
                                          + (f" ({answer.error_message})"
                                             if answer.error_message else ""))
        self.member_epoch = answer.member_epoch
        if answer.assignment is not None:
            self._set_assignment({tp.topic_id: frozenset(tp.partitions)
                                  for tp in answer.assignment.topic_partitions})
        return float(answer.heartbeat_interval_ms) / 1000

    def _set_assignment(self, assignment: dict[uuid.UUID, frozenset[int]]) -> None:
        for tid, parts in self._assignment.items():
            for p in parts - assignment.get(tid, frozenset()):
                name = self._topic_name(tid)
                if name is not None:
                    self.acks.forget(TopicPartition(name, p))
        self._assignment = assignment
        if assignment:
            self._assigned.set()
        else:
            self._assigned = trio.Event()

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        for name, info in self.client.metadata.topics.items():
            if info.topic_id == topic_id:
                return name
        return None

    # --- records -----------------------------------------------------------------------------

    def __aiter__(self) -> ShareConsumer:
        return self

    async def __anext__(self) -> ShareConsumerRecord:
        while not self._buffer:
            if self._closed:
                raise StopAsyncIteration
            await self._fetch()
        record = self._buffer.popleft()
        self.acks.handed_out(record)
        return record

    async def acknowledge(self, record: ShareConsumerRecord,
                          kind: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Explicit mode: accept, release (deliver again) or reject a record handed out; sent
        with the next fetch, ``commit`` or leaving. ``RENEW`` (Kafka 4.2, KIP-1222) restarts
        the record's acquisition lock when ``commit`` sends it; the record still needs its
        final acknowledgement."""
        if self.acks.implicit:
            raise ConfigError("acknowledge needs share.acknowledgement.mode=explicit")
        if kind == AcknowledgeType.GAP or not self.acks.acknowledge(
                TopicPartition(record.topic, record.partition), record.offset, kind):
            raise ValueError(f"{record.topic}-{record.partition}@{record.offset} was not handed "
                             "out or is already acknowledged")
        await trio.lowlevel.checkpoint()

    async def commit(self) -> dict[TopicPartition, int]:
        """Send the acknowledgements due now (ShareAcknowledge); each partition's error code
        (0: acknowledged). In implicit mode the records handed out so far are accepted."""
        if self.acks.implicit:
            self.acks.accept_delivered()
        results: dict[TopicPartition, int] = {}
        for node_id, (epoch, _) in list(self._sessions.items()):
            acks = self._acks_for(node_id)
            if acks and epoch != INITIAL_SESSION_EPOCH:
                results.update(await self._acknowledge(node_id, epoch, acks))
        return results

    def _partitions_by_leader(self) -> dict[int, dict[TIP, TopicPartition]]:
        out: dict[int, dict[TIP, TopicPartition]] = {}
        for tid, parts in self._assignment.items():
            name = self._topic_name(tid)
            if name is None:
                self.client.request_update()
                continue
            for p in parts:
                tp = TopicPartition(name, p)
                leader = self.client.metadata.leader_for(tp)
                if leader < 0:
                    self.client.request_update()
                    continue
                out.setdefault(leader, {})[(tid, p)] = tp
        return out

    def _acks_for(self, node_id: int) -> dict[TIP, dict[int, int]]:
        """The acknowledgements due for the partitions in ``node_id``'s session, removed."""
        _, in_session = self._sessions.get(node_id, (0, set()))
        ids = {tp: tip for tip in in_session
               if (name := self._topic_name(tip[0])) is not None
               for tp in [TopicPartition(name, tip[1])]}
        return {ids[tp]: offsets for tp, offsets in self.acks.take(ids).items()}

    async def _fetch(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        if not self.acks.implicit and self.acks.unacknowledged():
            raise ValueError(f"{self.acks.unacknowledged()} records handed out are not "
                             "acknowledged yet (explicit acknowledgement mode)")
        self.acks.accept_delivered()
        leaders = self._partitions_by_leader()
        if not leaders:
            if self._assignment:  # topic ids or leaders not in the metadata yet
                await self.client.refresh_metadata()
            else:
                with trio.move_on_after(self.config["fetch.max.wait.ms"] / 1000):
                    await self._assigned.wait()
            if self._fatal is not None:
                raise self._fatal
            return
        for node_id in set(self._sessions) - set(leaders):  # no partition led there now
            self._sessions.pop(node_id)
        if len(leaders) == 1:
            [(node_id, partitions)] = leaders.items()
            await self._fetch_from(node_id, partitions)
            return
        try:  # one long poll per leader, at the same time
            async with trio.open_nursery() as nursery:
                for node_id, partitions in leaders.items():
                    nursery.start_soon(self._fetch_from, node_id, partitions)
        except BaseExceptionGroup as group:
            errors = [e for e in group.exceptions if isinstance(e, KafkaError)]
            if errors and len(errors) == len(group.exceptions):
                raise errors[0] from None
            raise

    async def _fetch_from(self, node_id: int, partitions: dict[TIP, TopicPartition]) -> None:
        epoch, in_session = self._sessions.get(node_id, (INITIAL_SESSION_EPOCH, set()))
        acks = self._acks_for(node_id) if epoch != INITIAL_SESSION_EPOCH else {}
        named = set(partitions) - in_session if epoch != INITIAL_SESSION_EPOCH else set(
            partitions)
        forgotten = in_session - set(partitions)
        try:
            answer = await self.client.request(node_id, ApiKey.ShareFetch, lambda v: (
                share_fetch_request(v, self.group_id, self.member_id, epoch, partitions=named,
                                    acks=acks, forgotten=forgotten,
                                    max_wait_ms=self.config["fetch.max.wait.ms"],
                                    min_bytes=self.config["fetch.min.bytes"],
                                    max_bytes=self.config["fetch.max.bytes"],
                                    max_records=self.config["max.poll.records"])),
                timeout_s=(self.client.request_timeout_s
                           + self.config["fetch.max.wait.ms"] / 1000))
        except KafkaError as exc:
            if not exc.retriable:
                raise
            # the leader moved or went away: its session (and the acknowledgements in this
            # request) are gone; the records come back once their locks run out
            LOGGER.info("share group %s: ShareFetch to node %s failed: %r", self.group_id,
                        node_id, exc)
            self._sessions.pop(node_id, None)
            self.client.request_update()
            await trio.sleep(self.client.retry_backoff.backoff_ms(0) / 1000)
            return
        if answer.error_code in _SESSION_ERRORS:
            self._sessions.pop(node_id, None)
            return
        if answer.error_code:
            raise error_for(answer.error_code, f"ShareFetch for group {self.group_id!r}: "
                            f"{describe_code(answer.error_code)}")
        self._sessions[node_id] = (1 if epoch == 0x7FFFFFFF else epoch + 1,
                                   (in_session | set(partitions)) - forgotten)
        for topic in answer.responses:
            for p in topic.partitions:
                tp = partitions.get((topic.topic_id, p.partition_index))
                if tp is None:
                    continue
                self.acknowledgement_errors[tp] = p.acknowledge_error_code
                if p.error_code:
                    self.client.request_update()
                    continue
                if not p.acquired_records or not p.records:
                    continue
                records, gaps = acquired_records(
                    decode_fetched(tp, p.records, 0, check_crcs=True),
                    [(r.first_offset, r.last_offset, r.delivery_count)
                     for r in p.acquired_records])
                self.acks.gaps(tp, gaps)
                self._buffer.extend(records)

    async def _acknowledge(self, node_id: int, epoch: int,
                           acks: dict[TIP, dict[int, int]]) -> dict[TopicPartition, int]:
        answer = await self.client.request(node_id, ApiKey.ShareAcknowledge, lambda v: (
            share_acknowledge_request(v, self.group_id, self.member_id, epoch, acks)))
        if answer.error_code in _SESSION_ERRORS:
            self._sessions.pop(node_id, None)
        if answer.error_code:
            raise error_for(answer.error_code, f"ShareAcknowledge for group "
                            f"{self.group_id!r}: {describe_code(answer.error_code)}")
        if epoch != FINAL_SESSION_EPOCH:
            next_epoch, in_session = self._sessions[node_id]
            self._sessions[node_id] = (1 if next_epoch == 0x7FFFFFFF else next_epoch + 1,
                                       in_session)
        results = {}
        for topic in answer.responses:
            name = self._topic_name(topic.topic_id)
            for p in topic.partitions:
                if name is not None:
                    results[TopicPartition(name, p.partition_index)] = p.error_code
        self.acknowledgement_errors.update(results)
        return results


async def _shielded_nursery(*, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    with trio.CancelScope(shield=True) as scope:
        async with trio.open_nursery() as tasks:
            task_status.started((scope, tasks))
            await trio.sleep_forever()
