"""Classic consumer-group membership (``GroupMember``): join, sync, heartbeat, leave. The
coordinator itself is found and asked through ``coordinator_lookup.CoordinatorLookup``; the
consumer-protocol (KIP-848) member is ``consumer_member.ConsumerMember``, with the same face.

Why two tasks: a JoinGroup may legitimately wait minutes (until every member rejoins), while
heartbeats must keep flowing on schedule whenever the group is stable. So the *group task* runs
the join/sync protocol whenever a rejoin is needed and otherwise sleeps, and the *heartbeat
task* sends a Heartbeat every ``heartbeat.interval.ms`` while the member is stable, turning the
coordinator's answers into "rejoin needed" for the group task.

Member states (eager rebalancing, as Kafka's classic protocol)::

    UNJOINED --JoinGroup--> (MEMBER_ID_REQUIRED: JoinGroup again with the given id)
             --JoinGroup ok--> leader assigns --SyncGroup--> STABLE
    STABLE --(REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / subscription or
              partition count changed)--> revoke everything --> UNJOINED

Eager protocols (``range``, ``roundrobin``): before every rejoin the member revokes its whole
assignment (committing its positions first when ``enable.auto.commit`` is on), so no two members
ever fetch the same partition in one generation.

Cooperative protocol (``cooperative-sticky``, KIP-429, used when every configured assignor is
cooperative, as Java decides): the member keeps its partitions (and keeps consuming them) through
the rebalance and sends them in its subscription (v2: with its generation). After SyncGroup it
revokes only the partitions it lost, adds the new ones, and rejoins at once if it revoked any:
the leader never moves a partition in one generation, so the second rebalance hands the revoked
partitions over. A member that lost its membership (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION)
loses every partition before rejoining.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import Any

import trio

from ....protocol.api_keys import ApiKey
from ....protocol.consumer_protocol import (
    PayloadError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from ....protocol.errors import ErrorCode
from ...core import groups as requests
from ...core.errors import (
    ConfigError,
    KafkaError,
    describe_code,
    error_for,
)
from ...core.structs import TopicPartition
from ..network import NetworkClient, Wakeup
from .assignors import ASSIGNORS
from .coordinator_lookup import COORDINATOR_ERRORS, CoordinatorLookup

LOGGER = logging.getLogger(__name__)

_FATAL_JOIN_ERRORS = frozenset({
    ErrorCode.INVALID_GROUP_ID,
    ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.INVALID_SESSION_TIMEOUT,
    ErrorCode.GROUP_MAX_SIZE_REACHED,
    ErrorCode.FENCED_INSTANCE_ID,
    ErrorCode.UNSUPPORTED_VERSION,
})

class GroupMember:
    """This consumer's membership in a classic group (the group and heartbeat tasks)."""

    def __init__(self, client: NetworkClient, config: dict[str, Any], coordinator:
                 CoordinatorLookup, *,
                 on_revoke: Callable[[set[TopicPartition]], Awaitable[None]],
                 on_assign: Callable[[set[TopicPartition]], Awaitable[None]],
                 on_fatal: Callable[[], None] = lambda: None) -> None:
        self._client = client
        self._coordinator = coordinator
        self.group_id = coordinator.group_id
        self._session_timeout_ms = config["session.timeout.ms"]
        self._rebalance_timeout_ms = config["max.poll.interval.ms"]
        self._heartbeat_interval_s = config["heartbeat.interval.ms"] / 1000
        self._request_timeout_s = config["request.timeout.ms"] / 1000
        #: a static member (KIP-345): its partitions wait for it through a restart within
        #: session.timeout.ms, and it never sends LeaveGroup (as Java's consumer since 2.3)
        self.instance_id: str | None = config["group.instance.id"]
        names = config["partition.assignment.strategy"]
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",") if n.strip()]
        unknown = [n for n in names if n not in ASSIGNORS]
        if unknown or not names:
            raise ConfigError(f"partition.assignment.strategy {unknown or names!r}: supported "
                              f"assignors are {', '.join(ASSIGNORS)}")
        self._assignors = [ASSIGNORS[n] for n in names]
        self.cooperative = all(getattr(a, "cooperative", False) for a in self._assignors)
        self._on_revoke = on_revoke
        self._on_assign = on_assign
        self._on_fatal = on_fatal
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.leader_id: str | None = None
        self.stable = False
        self.topics: set[str] = set()
        self.assignment: set[TopicPartition] = set()
        self.fatal_error: KafkaError | None = None
        self._rejoin_needed = True
        self._rejoin = Wakeup()
        #: set by ``stop_joining`` (a leave), cleared by a new subscription
        self._left = False
        self._join_scope: trio.CancelScope | None = None
        self._stable_event = trio.Event()
        self._partition_counts: dict[str, int] = {}
        self._last_heartbeat_ok = -math.inf
        self.joined = trio.Event()  # set after the first successful assignment

    # --- requests from the consumer ---------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        topics = set(topics)
        if topics != self.topics:
            self.topics = topics
            self._left = False
            self.request_rejoin("subscription changed")

    def stop_joining(self) -> None:
        """End a JoinGroup or SyncGroup in flight and join no more until subscribed again.

        Called before the LeaveGroup, which must be the member's last word: a join loop told
        afterwards that its member is unknown would join again as a new member, which the group
        then waits for (``session.timeout.ms``) before it can rebalance or empty.
        """
        self._left = True
        if self._join_scope is not None:
            self._join_scope.cancel()

    def request_rejoin(self, reason: str) -> None:
        if not self._rejoin_needed:
            LOGGER.info("group %s: rejoin needed (%s)", self.group_id, reason)
        self._rejoin_needed = True
        self.stable = False
        self._stable_event = trio.Event()
        self._rejoin.set()

    @property
    def commit_identity(self) -> tuple[int, str]:
        """(generation, member id) to put in an OffsetCommit."""
        return self.generation, self.member_id

    # --- the group task ----------------------------------------------------------------------

    async def run(self) -> None:
        attempts = 0
        while True:
            if self._rejoin_needed and self.topics and not self._left:
                try:
                    await self._rebalance()
                except KafkaError as exc:
                    if not exc.retriable:
                        LOGGER.error("group %s: %r", self.group_id, exc)
                        self.fatal_error = exc
                        self.joined.set()
                        self._on_fatal()
                        return
                    LOGGER.info("group %s: rebalance failed (%r); retrying", self.group_id, exc)
                    self._rejoin_needed = True
                    await trio.sleep(self._client.retry_backoff.backoff_ms(attempts) / 1000)
                    attempts += 1
                else:
                    attempts = 0
            else:
                await self._rejoin.wait()

    async def _rebalance(self) -> None:
        if self.assignment and (not self.cooperative or self.generation < 0):
            revoked, self.assignment = self.assignment, set()  # eager, or lost
            await self._on_revoke(revoked)
        attempts = 0
        while True:
            self._rejoin_needed = False
            self._rejoin.clear()
            if self._left:
                return
            try:
                with trio.CancelScope() as self._join_scope:
                    assignment = await self._join_and_sync()
                if self._join_scope.cancelled_caught:
                    return
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                LOGGER.info("group %s: join failed (%r); retrying", self.group_id, exc)
                await trio.sleep(self._client.retry_backoff.backoff_ms(attempts) / 1000)
                attempts += 1
                continue
            if assignment is None or self._rejoin_needed:
                continue
            break
        new = {TopicPartition(topic, p) for topic, parts in assignment.items() for p in parts}
        revoked = self.assignment - new
        if revoked:  # cooperative: give up only what moved, then rejoin to let it go
            self.assignment -= revoked
            await self._on_revoke(revoked)
        added = new - self.assignment
        self.assignment = new
        self.stable = True
        self._last_heartbeat_ok = trio.current_time()
        self._stable_event.set()
        LOGGER.info("group %s generation %s: member %s assigned %s", self.group_id,
                    self.generation, self.member_id, sorted(self.assignment))
        await self._on_assign(added)
        self.joined.set()
        if revoked:
            self.request_rejoin(f"revoked {len(revoked)} partitions")

    async def _join_and_sync(self) -> dict[str, list[int]] | None:
        """One JoinGroup + SyncGroup round; None when the protocol says to join again."""
        topics = sorted(self.topics)
        self._client.add_topics(topics)
        if self.cooperative:
            owned: dict[str, list[int]] = {}
            for tp in self.assignment:
                owned.setdefault(tp.topic, []).append(tp.partition)
            metadata = encode_subscription(topics, owned_partitions=owned,
                                           generation_id=self.generation)
        else:
            metadata = encode_subscription(topics)
        protocols = [(a.name, metadata) for a in self._assignors]
        joined = requests.parse_join_group(await self._coordinator.request(
            ApiKey.JoinGroup, lambda v: requests.join_group_request(
                v, self.group_id, self.member_id, session_timeout_ms=self._session_timeout_ms,
                rebalance_timeout_ms=self._rebalance_timeout_ms, protocols=protocols,
                group_instance_id=self.instance_id),
            timeout_s=self._rebalance_timeout_ms / 1000 + 5 + self._request_timeout_s))
        code = joined.error
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = joined.member_id
            return None
        if code != ErrorCode.NONE:
            self._handle_group_error(code, "JoinGroup")
            return None
        self.member_id = joined.member_id
        self.generation = joined.generation
        self.protocol = joined.protocol
        self.leader_id = joined.leader
        if joined.leader == joined.member_id:
            assignments = await self._assign(joined.protocol or "", joined.members)
        else:
            assignments = {}
        code, assignment = requests.parse_sync_group(await self._coordinator.request(
            ApiKey.SyncGroup, lambda v: requests.sync_group_request(
                v, self.group_id, self.generation, self.member_id,
                protocol_name=self.protocol, assignments=assignments,
                group_instance_id=self.instance_id)))
        if code != ErrorCode.NONE:
            self._handle_group_error(code, "SyncGroup")
            return None
        try:
            return decode_assignment(assignment).partitions
        except PayloadError as exc:
            raise error_for(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                            f"group {self.group_id!r}: unreadable assignment: {exc}") from None

    def _handle_group_error(self, code: int, what: str) -> None:
        error = error_for(code, f"{what} for group {self.group_id!r}: {describe_code(code)}")
        if code in _FATAL_JOIN_ERRORS:
            raise error
        if code == ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id = ""
            self.generation = -1
        elif code in COORDINATOR_ERRORS:
            self._coordinator.mark_unknown()
        if code in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.UNKNOWN_MEMBER_ID,
                    ErrorCode.ILLEGAL_GENERATION):
            LOGGER.debug("group %s: %s answered %s; joining again", self.group_id, what, code)
            return
        raise error

    async def _assign(self, protocol: str,
                      members: list[tuple[str, bytes]]) -> dict[str, bytes]:
        """As the leader: run the chosen assignor over every member's subscription."""
        assignor: Any = ASSIGNORS.get(protocol)
        if assignor is None:
            raise error_for(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                            f"the group chose assignor {protocol!r}, which this client lacks")
        subscriptions: dict[str, list[str]] = {}
        owned: dict[str, dict[str, list[int]]] = {}
        generations: dict[str, int] = {}
        for member_id, metadata in members:
            try:
                decoded = decode_subscription(metadata)
            except PayloadError as exc:
                LOGGER.warning("group %s: member %s sent an unreadable subscription (%s)",
                               self.group_id, member_id, exc)
                subscriptions[member_id] = []
                continue
            subscriptions[member_id] = decoded.topics
            owned[member_id] = decoded.owned_partitions
            generations[member_id] = decoded.generation_id
        all_topics = {t for topics in subscriptions.values() for t in topics}
        self._client.add_topics(all_topics)
        with trio.move_on_after(self._request_timeout_s):
            await self._client.refresh_metadata()
        counts = {t: info.num_partitions for t, info in self._client.metadata.topics.items()
                  if t in all_topics and info.error == ErrorCode.NONE}
        self._partition_counts = counts
        if getattr(assignor, "cooperative", False):
            result = assignor.assign(subscriptions, counts, owned, generations)
        else:
            result = assignor.assign(subscriptions, counts)
        LOGGER.debug("group %s: leader assigned %s", self.group_id, result)
        return {member: encode_assignment(parts) for member, parts in result.items()}

    # --- the heartbeat task ------------------------------------------------------------------

    async def heartbeat_loop(self) -> None:
        while True:
            await self._stable_event.wait()
            await trio.sleep(self._heartbeat_interval_s)
            if not self.stable:
                continue
            self._check_partition_counts()
            generation, member_id = self.generation, self.member_id
            try:
                response = await self._coordinator.request(
                    ApiKey.Heartbeat, partial(requests.heartbeat_request, group_id=self.group_id,
                                              generation=generation, member_id=member_id,
                                              group_instance_id=self.instance_id))
                code = response.error_code
            except KafkaError as exc:
                LOGGER.info("group %s: heartbeat failed: %r", self.group_id, exc)
                code = -2
            now = trio.current_time()
            if code == ErrorCode.NONE:
                self._last_heartbeat_ok = now
                continue
            if generation != self.generation:
                continue  # the answer is about a generation already left behind
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                self.request_rejoin("heartbeat answered REBALANCE_IN_PROGRESS")
            elif code == ErrorCode.ILLEGAL_GENERATION:
                self.generation = -1  # the partitions of that generation are lost
                self.request_rejoin("heartbeat answered ILLEGAL_GENERATION")
            elif code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                self.generation = -1
                self.request_rejoin("heartbeat answered UNKNOWN_MEMBER_ID")
            elif code in COORDINATOR_ERRORS:
                self._coordinator.mark_unknown()
            elif code == ErrorCode.FENCED_INSTANCE_ID:
                # another consumer took this group.instance.id: fatal, as in Java
                self.fatal_error = error_for(code, f"Heartbeat for group {self.group_id!r}: "
                                             f"{describe_code(code)}")
                LOGGER.error("group %s: %r", self.group_id, self.fatal_error)
                self.stable = False
                self._left = True
                self.joined.set()
                self._on_fatal()
                return
            if (self.stable and now - self._last_heartbeat_ok
                    > self._session_timeout_ms / 1000):
                self.request_rejoin("no successful heartbeat within session.timeout.ms")

    def _check_partition_counts(self) -> None:
        """As the leader: a subscribed topic that appeared or grew needs a new assignment."""
        if self.leader_id != self.member_id or not self.leader_id:
            return
        for topic in self.topics:
            info = self._client.metadata.topics.get(topic)
            count = info.num_partitions if info is not None and info.error == 0 else 0
            if count != self._partition_counts.get(topic, 0):
                self.request_rejoin(f"topic {topic} now has {count} partitions")
                return

    # --- leaving -----------------------------------------------------------------------------

    async def leave(self) -> None:
        """LeaveGroup (best effort) so the group rebalances now rather than after a timeout."""
        self.stop_joining()
        if self.instance_id is not None:  # static: the session timeout ends the membership
            self.member_id, self.generation, self.stable = "", -1, False
            await trio.lowlevel.checkpoint()
            return
        if not self.member_id or self._coordinator.node_id is None:
            return
        member_id, self.member_id = self.member_id, ""
        self.generation = -1
        self.stable = False
        with trio.move_on_after(self._request_timeout_s):
            try:
                await self._coordinator.request(ApiKey.LeaveGroup, lambda v: (
                    requests.leave_group_request(v, self.group_id, member_id)))
                LOGGER.info("group %s: member %s left", self.group_id, member_id)
            except KafkaError as exc:
                LOGGER.info("group %s: LeaveGroup failed: %r", self.group_id, exc)


__all__ = ["GroupMember"]
