"""One member of a consumer group for a blocking loop: join, sync, heartbeat, commit, leave.

Why no background thread: the console consumer already wakes at least every half second (its
fetches long-poll for at most that long), so it calls ``heartbeat_if_due`` between fetches and a
heartbeat is never late by more than one fetch. The group protocol is Kafka's classic one with
the ``consumer`` protocol type and the ``range`` assignor (Kafka's ``RangeAssignor``: per topic,
members sorted by id, each gets an equal run of partitions, the first ones one more), so the
member joins any group Java, librdkafka or the Trio client form with the range assignor.

Errors follow Kafka's consumer: UNKNOWN_MEMBER_ID and ILLEGAL_GENERATION forget the membership
and join again; REBALANCE_IN_PROGRESS joins again keeping the member id; a coordinator error
looks the coordinator up again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.consumer_protocol import (
    PayloadError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from ...protocol.errors import ErrorCode
from ..core import groups as group_requests
from ..core import offsets as offset_requests
from ..core.errors import KafkaError, error_for, error_name
from ..core.structs import OffsetAndMetadata, TopicPartition
from .cluster import COORDINATOR_ERRORS, Cluster

LOGGER = logging.getLogger(__name__)

PROTOCOL = "range"
#: errors after which the member joins again
REJOIN_ERRORS = frozenset({ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.UNKNOWN_MEMBER_ID,
                           ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID})


class GroupMember:
    """A member of ``group_id`` subscribed to ``topics``, through ``client``'s connections."""

    def __init__(self, client: Cluster, group_id: str, topics: Iterable[str], *,
                 session_timeout_ms: int = 45_000, rebalance_timeout_ms: int = 30_000,
                 heartbeat_interval_ms: int = 3_000) -> None:
        self.client = client
        self.group_id = group_id
        self.topics = sorted(set(topics))
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self.member_id = ""
        self.generation = -1
        self.assignment: set[TopicPartition] = set()
        self.needs_join = True
        self._next_heartbeat = 0.0

    # --- joining -------------------------------------------------------------------------

    def join(self) -> set[TopicPartition]:
        """Join (again) and return this member's partitions; retried through rebalances for up
        to twice the rebalance timeout."""
        deadline = time.monotonic() + 2 * self.rebalance_timeout_ms / 1000
        while True:
            try:
                self._join_once()
            except KafkaError as exc:
                if exc.code in COORDINATOR_ERRORS:
                    self.client.forget_coordinator(self.group_id)
                elif exc.code not in REJOIN_ERRORS:
                    raise
                if time.monotonic() > deadline:
                    raise
                LOGGER.info("joining group %r again: %s", self.group_id, exc)
                continue
            self.needs_join = False
            self._next_heartbeat = time.monotonic() + self.heartbeat_interval_s
            return set(self.assignment)

    def _call(self, api_key: int, build: Any, *, timeout_s: float | None = None) -> Any:
        return self.client.coordinator(self.group_id).request(api_key, build,
                                                              timeout_s=timeout_s)

    def _join_once(self) -> None:
        metadata = encode_subscription(self.topics)
        wait_s = self.client.timeout_s + self.rebalance_timeout_ms / 1000
        while True:
            joined = group_requests.parse_join_group(self._call(
                ApiKey.JoinGroup, lambda v: group_requests.join_group_request(
                    v, self.group_id, self.member_id,
                    session_timeout_ms=self.session_timeout_ms,
                    rebalance_timeout_ms=self.rebalance_timeout_ms,
                    protocols=[(PROTOCOL, metadata)]), timeout_s=wait_s))
            if joined.error == ErrorCode.MEMBER_ID_REQUIRED:  # KIP-394: join again with it
                self.member_id = joined.member_id
                continue
            if joined.error:
                if joined.error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                    self.member_id = ""
                raise error_for(joined.error, f"JoinGroup {self.group_id!r}: "
                                f"{error_name(joined.error)}")
            break
        self.member_id = joined.member_id
        self.generation = joined.generation
        assignments: dict[str, bytes] = {}
        if joined.leader == joined.member_id:
            assignments = self._assign(joined.members)
        code, data = group_requests.parse_sync_group(self._call(
            ApiKey.SyncGroup, lambda v: group_requests.sync_group_request(
                v, self.group_id, self.generation, self.member_id,
                protocol_name=joined.protocol, assignments=assignments), timeout_s=wait_s))
        if code:
            if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                self.member_id = ""
            raise error_for(code, f"SyncGroup {self.group_id!r}: {error_name(code)}")
        try:
            parsed = decode_assignment(data).partitions if data else {}
        except PayloadError as exc:
            raise error_for(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                            f"group {self.group_id!r} sent an assignment that does not "
                            f"decode: {exc}") from None
        self.assignment = {TopicPartition(t, p) for t, parts in parsed.items() for p in parts}

    def _assign(self, members: list[tuple[str, bytes]]) -> dict[str, bytes]:
        subscriptions: dict[str, list[str]] = {}
        for member_id, data in members:
            try:
                subscriptions[member_id] = decode_subscription(data).topics
            except PayloadError:
                subscriptions[member_id] = []
        wanted = sorted({t for topics in subscriptions.values() for t in topics})
        found = self.client.metadata(wanted).topics
        counts = {t: len(found[t].partitions) for t in wanted
                  if t in found and not found[t].error}
        plan = group_requests.range_assign(subscriptions, counts)
        return {m: encode_assignment(parts) for m, parts in plan.items()}

    # --- staying in ----------------------------------------------------------------------

    def heartbeat_if_due(self) -> bool:
        """Heartbeat when one is due; True when the member must join again (a rebalance)."""
        if self.needs_join:
            return True
        if time.monotonic() < self._next_heartbeat:
            return False
        self._next_heartbeat = time.monotonic() + self.heartbeat_interval_s
        try:
            body = self._call(ApiKey.Heartbeat, lambda v: group_requests.heartbeat_request(
                v, self.group_id, self.generation, self.member_id))
        except KafkaError as exc:
            if exc.code not in COORDINATOR_ERRORS:
                raise
            body = None
        code = ErrorCode.NOT_COORDINATOR if body is None else body.error_code
        if code in COORDINATOR_ERRORS:
            self.client.forget_coordinator(self.group_id)
            self.needs_join = True
        elif code in REJOIN_ERRORS:
            if code != ErrorCode.REBALANCE_IN_PROGRESS:
                self.member_id = ""
            self.needs_join = True
        elif code:
            raise error_for(code, f"Heartbeat {self.group_id!r}: {error_name(code)}")
        return self.needs_join

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit the next offsets to read; a commit refused by a rebalance marks the member
        for joining again (the offsets are committed by whoever owns the partitions next)."""
        if not offsets:
            return
        prepared = {tp: OffsetAndMetadata(offset, "") for tp, offset in offsets.items()}
        body = self._call(ApiKey.OffsetCommit, lambda v: offset_requests.offset_commit_request(
            v, self.group_id, prepared, generation=self.generation, member_id=self.member_id))
        for tp, code in sorted(offset_requests.parse_offset_commit(body).items()):
            if code in REJOIN_ERRORS:
                self.needs_join = True
                return
            if code in COORDINATOR_ERRORS:
                self.client.forget_coordinator(self.group_id)
                self.needs_join = True
                return
            if code:
                raise error_for(code, f"committing {tp} for group {self.group_id!r}: "
                                f"{error_name(code)}")

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        body = self._call(ApiKey.OffsetFetch, lambda v: offset_requests.offset_fetch_request(
            v, self.group_id, list(partitions)))
        code, found = offset_requests.parse_offset_fetch(body)
        if code:
            raise error_for(code, f"OffsetFetch {self.group_id!r}: {error_name(code)}")
        return {tp: c.offset for tp, c in found.items()}

    def leave(self) -> None:
        """LeaveGroup, so the others rebalance at once; failures are only logged."""
        if not self.member_id:
            return
        try:
            self._call(ApiKey.LeaveGroup, lambda v: group_requests.leave_group_request(
                v, self.group_id, self.member_id))
        except KafkaError as exc:
            LOGGER.info("leaving group %r failed: %s", self.group_id, exc)
        self.member_id = ""
        self.needs_join = True


__all__ = ["GroupMember"]
