"""Durable group metadata: the records a group change writes, the writer, and the replay.

Why records are answered only once durable: as in Kafka, a response that tells a member its
generation, epoch or assignment must survive a crash of the broker that sent it, or the member
would come back to a coordinator that never heard of what it was told. So the coordinator
builds records as it changes a group (Kafka's ``CoordinatorResult`` records), hands them here
with the answer as a callback, and one writer task appends them in batches, one fsync per batch,
before the callbacks run. Memory is updated at once; only the answers wait.

What is written (Kafka's record types, one JSON value each; see ``group_log.py``):

    classic group   ("classic", "")        generation, protocol type and name, leader, and
                                           each member with its subscription and assignment
                                           (Kafka's GroupMetadataValue), written when a
                                           generation gets its assignment, when a static member
                                           is replaced, and when the group becomes empty
    consumer group  ("epochs", "")         group epoch, assignment epoch, subscribed topics'
                                           ids and partition counts (ConsumerGroupMetadata,
                                           TargetAssignmentMetadata)
                    ("member", member id)  subscription and current assignment, member epoch
                                           and state (MemberMetadata, CurrentMemberAssignment)
                    ("target", member id)  the member's target assignment
                    ("regex", expression)  the topics a regular expression resolved to

On start the live records are replayed into groups (``load``): a classic group with members
comes back Stable at its last written generation, a consumer group with its epochs and every
member's assignment; the coordinator then restarts their session timers.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from ..offload import run_io
from .consumer_group import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    ResolvedRegex,
    assignment_of,
)
from .group import Group, Member
from .group_log import (
    DEFAULT_COMPACT_BYTES,
    DELETE_GROUP,
    GroupLog,
    GroupLogError,
    GroupRecords,
    Record,
    apply,
    encode_record,
)
from .internal_topics import (
    OFFSETS_TOPIC,
    CoordinatorRecord,
    InternalTopics,
    group_metadata_key,
    group_metadata_value,
)
from .states import GroupState

LOGGER = logging.getLogger(__name__)

Done = Callable[[bool], None]
#: how file work runs: ``trio.to_thread.run_sync`` (off the event loop), or inline for tests on
#: a mock clock, which would otherwise jump ahead while a worker thread fsyncs
IoRunner = Callable[..., Awaitable[Any]]


@attrs.define(eq=False)
class _Pending:
    records: list[bytes]
    done: Done | None
    #: the same change as Kafka's records in ``__consumer_offsets``, by group id
    kafka: dict[str, list[CoordinatorRecord]] = attrs.field(factory=dict)


class GroupStore:
    """The writer of group metadata records (see the module docstring)."""

    def __init__(self, directory: Path, *, compact_bytes: int = DEFAULT_COMPACT_BYTES,
                 io_runner: IoRunner | None = None) -> None:
        self.log = GroupLog(directory, compact_bytes=compact_bytes)
        self._run: IoRunner = io_runner or run_io
        #: the live records, as they will be once everything queued is written
        self._live: GroupRecords = {}
        self._queue: list[_Pending] = []
        self._in_flight = 0
        self._wakeup = trio.Event()
        self._closed = False
        #: what ``read`` found, for ``load`` to take
        self._read: GroupRecords | None = None
        #: where Kafka's group metadata records go too (None: nowhere)
        self.internal: InternalTopics | None = None

    def read(self) -> None:
        """Open the file now, blocking (the broker's start opens all its files in one worker
        thread); ``load`` then takes what was read instead of opening it."""
        self._read = self.log.open()

    async def load(self) -> GroupRecords:
        read, self._read = self._read, None
        self._live = read if read is not None else await self._run(self.log.open)
        return {g: dict(r) for g, r in self._live.items()}

    def write(self, records: list[Record], done: Done | None = None) -> None:
        """Queue ``records``; ``done(ok)`` once they are durable (or failed, or refused)."""
        if self._closed:
            if done is not None:
                done(False)
            return
        for record in records:
            apply(self._live, record)
        pending = _Pending([encode_record(r) for r in records], done)
        if self.internal is not None:
            for record in records:
                kafka = kafka_record(record)
                if kafka is not None:
                    pending.kafka.setdefault(record[0], []).append(kafka)
        self._queue.append(pending)
        self._wakeup.set()

    async def written(self) -> bool:
        """Wait until every record queued so far is durable (False if writing failed).

        For answers that change a group without records of their own to wait on: a LeaveGroup
        that empties a group is answered once the empty group is on disk, or a broker killed
        right after it would come back with the departed members (and refuse a new member's
        protocols with INCONSISTENT_GROUP_PROTOCOL until their sessions expire)."""
        if not self._queue:
            return True
        finished = trio.Event()
        result = [False]

        def done(ok: bool) -> None:
            result[0] = ok
            finished.set()

        self.write([], done)
        await finished.wait()
        return result[0]

    def begin_shutdown(self) -> None:
        self._closed = True

    async def write_loop(self) -> None:
        """Write queued records in batches; one fsync answers every request in a batch."""
        while not self._closed:
            if not self._queue:
                self._wakeup = trio.Event()
                await self._wakeup.wait()
                continue
            if self.internal is not None:
                await self.internal.prepare(OFFSETS_TOPIC, run=self._run)
            batch = list(self._queue)
            self._in_flight = len(batch)
            ok = True
            try:
                await self._run(self.log.append, [r for p in batch for r in p.records])
            except (OSError, GroupLogError) as exc:
                ok = False
                LOGGER.error("writing %d group metadata records to %s failed: %s",
                             sum(len(p.records) for p in batch), self.log.path, exc)
            finally:
                self._in_flight = 0
            del self._queue[:len(batch)]
            for p in batch:
                if p.done is not None:
                    p.done(ok)
            if ok and self.internal is not None:
                self.internal.append_if_exists(OFFSETS_TOPIC, _by_group(batch))
            if ok and not self._closed and self.log.should_compact():
                snapshot = {g: dict(r) for g, r in self._live.items()}
                try:
                    await self._run(self.log.compact, snapshot)
                except (OSError, GroupLogError) as exc:
                    LOGGER.error("compacting %s failed, still appending to it: %s",
                                 self.log.path, exc)

    def close(self) -> None:
        """Write what is still queued, answer it, close the file."""
        self._closed = True
        queued = self._queue[self._in_flight:]
        del self._queue[self._in_flight:]
        ok = True
        try:
            self.log.close([r for p in queued for r in p.records])
        except (OSError, GroupLogError) as exc:
            ok = False
            LOGGER.error("writing %d queued group records at shutdown failed: %s", len(queued),
                         exc)
        if ok and self.internal is not None:
            self.internal.append_if_exists(OFFSETS_TOPIC, _by_group(queued))
        for p in queued:
            if p.done is not None:
                p.done(ok)


def _by_group(pending: Iterable[_Pending]) -> dict[str, list[CoordinatorRecord]]:
    by_key: dict[str, list[CoordinatorRecord]] = {}
    for p in pending:
        for group_id, kafka in p.kafka.items():
            by_key.setdefault(group_id, []).extend(kafka)
    return by_key


# --- records of a change ---------------------------------------------------------------------

def delete_group_record(group_id: str) -> Record:
    return (group_id, DELETE_GROUP, "", None)


def classic_group_record(group: Group, assignments: Mapping[str, bytes] | None = None,
                         ) -> Record:
    """Kafka's GroupMetadataValue: the generation with each member's subscription to the
    chosen protocol and its assignment (``assignments`` instead of the stored ones)."""
    protocol = group.protocol_name
    if assignments is None:
        assignments = {m.member_id: m.assignment for m in group.members.values()}
    return (group.group_id, "classic", "", {
        "generation": group.generation_id, "protocol_type": group.protocol_type,
        "protocol": protocol, "leader": group.leader_id, "state_ms": group.state_since_ms,
        "members": [{
            "id": m.member_id, "instance": m.group_instance_id, "client_id": m.client_id,
            "host": m.client_host, "session_ms": m.session_timeout_ms,
            "rebalance_ms": m.rebalance_timeout_ms,
            "subscription": _b64(m.metadata(protocol) if protocol else b""),
            "assignment": _b64(assignments.get(m.member_id, b""))}
            for m in group.members.values()]})


def kafka_record(record: Record) -> CoordinatorRecord | None:
    """Kafka's GroupMetadataKey/Value of a classic group's record, a tombstone of a deleted
    group; None for the consumer-protocol (KIP-848) records, which are kept in the file only."""
    group_id, kind, _, value = record
    if kind == DELETE_GROUP or (kind == "classic" and value is None):
        return group_metadata_key(group_id), None
    if kind != "classic":
        return None
    return group_metadata_key(group_id), group_metadata_value(
        value["generation"], value["protocol_type"], value["protocol"], value["leader"],
        value["state_ms"],
        ({"member_id": m["id"], "group_instance_id": m["instance"], "client_id": m["client_id"],
          "client_host": m["host"], "rebalance_timeout_ms": m["rebalance_ms"],
          "session_timeout_ms": m["session_ms"], "subscription": _unb64(m["subscription"]),
          "assignment": _unb64(m["assignment"])} for m in value["members"]))


def epochs_record(group: ConsumerGroup) -> Record:
    return (group.group_id, "epochs", "", {
        "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
        "metadata": {name: [str(tid), n] for name, (tid, n) in
                     sorted(group.subscription_metadata.items())}})


def member_record(group_id: str, m: ConsumerGroupMember) -> Record:
    return (group_id, "member", m.member_id, {
        "instance": m.instance_id, "rack": m.rack_id, "rebalance_ms": m.rebalance_timeout_ms,
        "client_id": m.client_id, "host": m.client_host,
        "topics": sorted(m.subscribed_topic_names), "regex": m.subscribed_topic_regex,
        "assignor": m.server_assignor, "epoch": m.member_epoch,
        "previous_epoch": m.previous_member_epoch, "state": m.state.value,
        "assigned": _assignment_json(m.assigned),
        "revoking": _assignment_json(m.pending_revocation),
        "classic": None if m.classic is None else {
            "session_ms": m.classic.session_timeout_ms,
            "protocols": [[name, _b64(meta)] for name, meta in m.classic.protocols]}})


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    return [(group_id, "member", member_id, None), (group_id, "target", member_id, None)]


def target_record(group_id: str, member_id: str, assignment: Assignment) -> Record:
    return (group_id, "target", member_id, _assignment_json(assignment))


def regex_record(group_id: str, regex: str, resolved: ResolvedRegex | None) -> Record:
    value = None if resolved is None else {
        "topics": sorted(resolved.topics), "version": resolved.version,
        "ts": resolved.timestamp_ms}
    return (group_id, "regex", regex, value)


# --- replay ------------------------------------------------------------------------------------

def materialize(state: GroupRecords, now_ms: int) -> dict[str, Group | ConsumerGroup]:
    """The groups the live records describe."""
    out: dict[str, Group | ConsumerGroup] = {}
    for group_id, records in state.items():
        classic = records.get(("classic", ""))
        out[group_id] = (_classic(group_id, classic, now_ms) if classic is not None
                         else _consumer(group_id, records, now_ms))
    return out


def _classic(group_id: str, v: Mapping[str, Any], now_ms: int) -> Group:
    members = v["members"]
    protocol = v["protocol"]
    group = Group(group_id, state=GroupState.STABLE if members else GroupState.EMPTY,
                  state_since_ms=v["state_ms"] if not members else now_ms,
                  generation_id=v["generation"], protocol_type=v["protocol_type"],
                  protocol_name=protocol if members else None, leader_id=v["leader"])
    for m in members:
        group.add_member(Member(
            m["id"], m["instance"], m["client_id"], m["host"], m["session_ms"],
            m["rebalance_ms"], v["protocol_type"] or "",
            [(protocol, _unb64(m["subscription"]))] if protocol else [],
            assignment=_unb64(m["assignment"])))
    group.leader_id = v["leader"] if members else None
    group.subscribed_topics = group.compute_subscribed_topics()
    return group


def _consumer(group_id: str, records: Mapping[tuple[str, str], Any],
              now_ms: int) -> ConsumerGroup:
    group = ConsumerGroup(group_id, now_ms)
    epochs = records.get(("epochs", ""))
    if epochs is not None:
        group.group_epoch = epochs["group_epoch"]
        group.assignment_epoch = epochs["assignment_epoch"]
        group.subscription_metadata = {name: (uuid.UUID(tid), n)
                                       for name, (tid, n) in epochs["metadata"].items()}
    for (kind, sub), v in records.items():
        if kind == "regex":
            group.resolved_regexes[sub] = ResolvedRegex(frozenset(v["topics"]), v["version"],
                                                        v["ts"])
        elif kind == "target":
            group.target_assignment[sub] = _assignment_of_json(v)
    for (kind, sub), v in records.items():
        if kind == "member":
            group.update_member(ConsumerGroupMember(
                sub, v["instance"], v["rack"], v["rebalance_ms"], v["client_id"], v["host"],
                frozenset(v["topics"]), v["regex"], v["assignor"], v["epoch"],
                v["previous_epoch"], MemberState(v["state"]), _assignment_of_json(v["assigned"]),
                _assignment_of_json(v["revoking"]), _classic_of_json(v.get("classic"))))
    # Topics may have changed while the broker was down: the next heartbeat looks again.
    group.metadata_expired = True
    return group


def _classic_of_json(value: Mapping[str, Any] | None) -> ClassicMemberMetadata | None:
    if value is None:
        return None
    return ClassicMemberMetadata(value["session_ms"], tuple(
        (name, _unb64(meta)) for name, meta in value["protocols"]))


def _assignment_json(assignment: Assignment) -> dict[str, list[int]]:
    return {str(tid): sorted(parts) for tid, parts in sorted(assignment.items(),
                                                           key=lambda kv: str(kv[0]))}


def _assignment_of_json(value: Mapping[str, list[int]]) -> Assignment:
    return assignment_of((uuid.UUID(tid), parts) for tid, parts in value.items())


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text)


__all__ = ["GroupStore", "IoRunner", "classic_group_record", "delete_group_record", "epochs_record",
           "materialize", "member_record", "member_tombstones", "regex_record",
           "target_record"]
