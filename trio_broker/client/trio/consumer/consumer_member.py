"""Consumer-protocol (KIP-848) membership: ``group_protocol="consumer"``.

Why one task and no join/sync: in the consumer protocol the coordinator computes the assignment
(with its server-side assignor, ``group_remote_assignor`` picks one) and the member only
heartbeats. Each ConsumerGroupHeartbeat carries the subscription and the partitions the member
owns; the answer carries the member's epoch and, when it changed, the partitions it may own now.
The member reconciles incrementally, as Java's ``ConsumerMembershipManager``:

    partitions no longer in the assignment   revoked first (commit with auto-commit on, then
                                             ``on_partitions_revoked``), and the next heartbeat,
                                             sent at once, reports them gone
    partitions new in the assignment         added (``on_partitions_assigned``); the
                                             coordinator hands a partition over only after its
                                             old owner reported it revoked

Partitions kept across a rebalance stay assigned, with their positions. FENCED_MEMBER_EPOCH and
UNKNOWN_MEMBER_ID lose every partition and rejoin with epoch 0; leaving sends epoch -1 (-2 for a
static member, ``group_instance_id``, so it gets its partitions back when it restarts within its
session timeout). Assignments name topics by id, so topic ids come from Metadata v10+.
Commits use OffsetCommit v9+ with the member epoch, as the coordinator requires of members.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import trio

from ....protocol.api_keys import ApiKey, request_class
from ....protocol.errors import ErrorCode
from ....protocol.messages import make_request
from ...core.errors import KafkaError, UnsupportedVersionError, describe_code, error_for
from ...core.metadata import metadata_request
from ...core.structs import TopicPartition
from ..network import NetworkClient, Wakeup
from .coordinator_lookup import CoordinatorLookup

LOGGER = logging.getLogger(__name__)

_HEARTBEAT: Any = request_class(ApiKey.ConsumerGroupHeartbeat)
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
#: the lowest versions that carry what this member needs: topic ids (Metadata), the member
#: epoch (OffsetCommit)
_METADATA_WITH_IDS = 10
COMMIT_VERSION = 9

_REJOIN = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})
_COORDINATOR = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                          ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})


class ConsumerMember:
    """This consumer's membership in a consumer-protocol group; the same face as the classic
    ``GroupMember`` to the ``Consumer``."""

    def __init__(self, client: NetworkClient, config: dict[str, Any],
                 coordinator: CoordinatorLookup, *,
                 on_revoke: Callable[[set[TopicPartition]], Awaitable[None]],
                 on_assign: Callable[[set[TopicPartition]], Awaitable[None]],
                 on_fatal: Callable[[], None] = lambda: None) -> None:
        self._client = client
        self._coordinator = coordinator
        self.group_id = coordinator.group_id
        self._instance_id: str | None = config["group.instance.id"]
        self._assignor: str | None = config["group.remote.assignor"]
        self._rebalance_timeout_ms = config["max.poll.interval.ms"]
        self._interval_s = config["heartbeat.interval.ms"] / 1000  # until the broker says
        self._on_revoke = on_revoke
        self._on_assign = on_assign
        self._on_fatal = on_fatal
        self.member_id = uuid.uuid4().hex  # KIP-1082: the member chooses its id
        self.member_epoch = 0
        self.topics: set[str] = set()
        #: a pattern subscription (RE2 syntax, matched by the group coordinator, KIP-848)
        self.regex: str | None = None
        self.assignment: set[TopicPartition] = set()
        self.stable = False
        self.fatal_error: KafkaError | None = None
        self.joined = trio.Event()
        self._ids: dict[str, uuid.UUID] = {}
        self._names: dict[uuid.UUID, str] = {}
        self._wakeup = Wakeup()
        self._left = False

    @property
    def generation(self) -> int:
        return self.member_epoch

    @property
    def commit_identity(self) -> tuple[int, str]:
        return self.member_epoch, self.member_id

    def subscribe(self, topics: Iterable[str]) -> None:
        topics = set(topics)
        if topics != self.topics or self.regex is not None:
            self.topics = topics
            self.regex = None
            self._left = False
            self._wakeup.set()

    def subscribe_pattern(self, regex: str) -> None:
        if regex != self.regex:
            self.topics = set()
            self.regex = regex
            self._left = False
            self._wakeup.set()

    def stop_joining(self) -> None:
        """Heartbeat no more until subscribed again (the leave heartbeat is the last word)."""
        self._left = True

    def request_rejoin(self, reason: str) -> None:
        LOGGER.info("group %s: heartbeat now (%s)", self.group_id, reason)
        self._wakeup.set()

    # --- the heartbeat task ------------------------------------------------------------------

    async def heartbeat_loop(self) -> None:
        """Nothing: ``run`` heartbeats (the consumer protocol has no separate join)."""
        await trio.lowlevel.checkpoint()

    async def run(self) -> None:
        attempts = 0
        while True:
            if (not self.topics and self.regex is None) or self._left:
                await self._wakeup.wait()
                continue
            self._wakeup.clear()
            try:
                await self._heartbeat()
                attempts = 0
            except KafkaError as exc:
                if not exc.retriable:
                    LOGGER.error("group %s: %r", self.group_id, exc)
                    self.fatal_error = exc
                    self.joined.set()
                    self._on_fatal()
                    return
                LOGGER.info("group %s: heartbeat failed (%r); retrying", self.group_id, exc)
                await trio.sleep(self._client.retry_backoff.backoff_ms(attempts) / 1000)
                attempts += 1
                continue
            with trio.move_on_after(self._interval_s):
                await self._wakeup.wait()

    def _owned(self) -> list[Any]:
        by_topic: dict[str, list[int]] = {}
        for tp in self.assignment:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return [{"topic_id": self._ids[t], "partitions": sorted(p)}
                for t, p in sorted(by_topic.items()) if t in self._ids]

    def _request(self, version: int, epoch: int) -> Any:
        owned = [_HEARTBEAT.TopicPartitions(**t) for t in self._owned()]
        leaving = epoch < 0
        return make_request(
            ApiKey.ConsumerGroupHeartbeat, version, group_id=self.group_id,
            member_id=self.member_id, member_epoch=epoch, instance_id=self._instance_id,
            rack_id=None, rebalance_timeout_ms=-1 if leaving else self._rebalance_timeout_ms,
            subscribed_topic_names=None if leaving or self.regex is not None else sorted(
                self.topics),
            subscribed_topic_regex=None if leaving else self.regex,
            server_assignor=None if leaving else self._assignor,
            topic_partitions=None if leaving else owned)

    async def _heartbeat(self) -> None:
        self._client.add_topics(self.topics)
        epoch = self.member_epoch
        response = await self._coordinator.request(
            ApiKey.ConsumerGroupHeartbeat, lambda v: self._request(v, epoch))
        code = response.error_code
        if code != ErrorCode.NONE:
            await self._on_error(code, response.error_message)
            return
        self.member_epoch = response.member_epoch
        if response.heartbeat_interval_ms > 0:
            self._interval_s = response.heartbeat_interval_ms / 1000
        if response.assignment is not None:
            await self._reconcile(response.assignment.topic_partitions)
        elif epoch == 0:
            self.stable = True

    async def _on_error(self, code: int, message: str | None) -> None:
        text = f"ConsumerGroupHeartbeat for group {self.group_id!r}: {describe_code(code)}" + (
            f" ({message})" if message else "")
        if code in _REJOIN:
            LOGGER.info("%s; losing every partition and joining again", text)
            await self._lose_all()
            self.member_epoch = 0
            self._wakeup.set()
            return
        if code in _COORDINATOR:
            self._coordinator.mark_unknown()
        raise error_for(code, text)

    async def _lose_all(self) -> None:
        self.stable = False
        if self.assignment:
            lost, self.assignment = self.assignment, set()
            await self._on_revoke(lost)

    async def _reconcile(self, topic_partitions: list[Any]) -> None:
        unknown = [t.topic_id for t in topic_partitions if t.topic_id not in self._names]
        if unknown:
            await self._resolve_topic_ids()
        target = {TopicPartition(self._names[t.topic_id], p) for t in topic_partitions
                  if t.topic_id in self._names for p in t.partitions}
        if len(target) < sum(len(t.partitions) for t in topic_partitions):
            LOGGER.info("group %s: assignment names topics not known yet", self.group_id)
            self._wakeup.set()
        revoked = self.assignment - target
        if revoked:
            self.stable = False
            self.assignment -= revoked
            LOGGER.info("group %s epoch %s: revoking %s", self.group_id, self.member_epoch,
                        sorted(revoked))
            await self._on_revoke(revoked)
            self._wakeup.set()  # report them gone at once
        added = target - self.assignment
        if added:
            self.assignment |= added
            LOGGER.info("group %s epoch %s: assigned %s", self.group_id, self.member_epoch,
                        sorted(added))
        self.stable = True
        if added or not self.joined.is_set():
            await self._on_assign(added)
        self.joined.set()

    async def _resolve_topic_ids(self) -> None:
        """Topic ids of the subscribed topics, from Metadata v10+ (the client's metadata cache
        speaks older versions, without ids)."""
        conn = await self._client.connection(self._client.least_loaded_node())
        theirs = conn.api_versions.get(ApiKey.Metadata, (0, 0))
        version = min(12, theirs[1])
        if version < _METADATA_WITH_IDS:
            raise UnsupportedVersionError(f"the broker speaks Metadata up to v{theirs[1]}; "
                                          "topic ids need v10")
        request = await conn.send(ApiKey.Metadata,
                                  lambda v: metadata_request(
                                      v, None if self.regex is not None else sorted(self.topics)),
                                  version=version)
        assert request is not None
        response = await request.wait()
        for topic in response.topics:
            if topic.error_code == ErrorCode.NONE and topic.name:
                self._ids[topic.name] = topic.topic_id
                self._names[topic.topic_id] = topic.name

    # --- leaving -----------------------------------------------------------------------------

    async def leave(self) -> None:
        """A leave heartbeat (epoch -1, or -2 for a static member), best effort."""
        if self.member_epoch <= 0 or self._coordinator.node_id is None:
            self._left = True
            return
        epoch = LEAVE_EPOCH if self._instance_id is None else STATIC_LEAVE_EPOCH
        self._left = True
        self.stable = False
        self.member_epoch = 0
        self.assignment = set()
        with trio.move_on_after(self._client.request_timeout_s):
            try:
                await self._coordinator.request(ApiKey.ConsumerGroupHeartbeat,
                                                lambda v: self._request(v, epoch))
                LOGGER.info("group %s: member %s left", self.group_id, self.member_id)
            except KafkaError as exc:
                LOGGER.info("group %s: leave heartbeat failed: %r", self.group_id, exc)
