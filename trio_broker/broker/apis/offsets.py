"""OffsetCommit, OffsetFetch and OffsetDelete: committed consumer positions, every version.

Why OffsetCommit and OffsetDelete are deferred: their answers promise durability, so they are
sent only after the coordinator has fsynced the record; the handler returns at once and the
coordinator's writer answers (``Reply``). OffsetFetch reads memory, which only ever holds durable
offsets; with ``require_stable`` (v7+) it first waits for the group's commits already accepted,
and answers a partition whose offset an open transaction holds UNSTABLE_OFFSET_COMMIT.

What the versions change: v0 stores and reads offsets without checking membership, as Kafka's
ZooKeeper-backed v0 did (and reads a partition never committed as UNKNOWN_TOPIC_OR_PARTITION);
v1 carries a commit timestamp per partition; v2-v4 a retention time; v6+ the leader epoch of
the committed position, kept and returned by OffsetFetch v5+; v7+ the group instance id; v8+
OffsetFetch asks for several groups; v9 OffsetCommit answers an unknown group with a generation
GROUP_ID_NOT_FOUND (a classic group's member epoch is its generation); a member of a consumer
group (KIP-848) commits and fetches (v9+) with its member epoch, STALE_MEMBER_EPOCH otherwise;
v10 (Kafka 4.2) names topics by id in requests and answers: an id no topic has is answered
UNKNOWN_TOPIC_ID per partition (only the group's authorization is checked before it), and an
"all topics" fetch leaves out a topic that has no id any more.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import response_type
from ..coordinator import CommitRequest, OffsetAndMetadata, OffsetCommitEntry
from ..coordinator.offset_log import TopicPartition
from ..server import authz
from ..server.bodies import (
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    ResponseBody,
    Struct,
)
from ..server.context import HandlerContext, HandlerResult
from .groups import Reply

#: OffsetCommit.retention_time_ms lives in v2-v4
_RETENTION_VERSIONS = range(2, 5)
#: OffsetCommit and OffsetFetch v10 (Kafka 4.2, KIP-848) name topics by id, not by name
_TOPIC_ID_VERSION = 10


def _names(ctx: HandlerContext, topics: Iterable[Struct], *, by_id: bool) -> list[str | None]:
    """Each requested topic's name; by id (v10), None for an id no topic has (a zero id too)."""
    if not by_id:
        return [t.name for t in topics]
    logs = ctx.broker.logs
    return [None if t.topic_id is None else logs.topic_name(t.topic_id) for t in topics]


def _unknown_partitions(ctx: HandlerContext, partitions: Iterable[TopicPartition],
                        ) -> dict[TopicPartition, ErrorCode]:
    """Like Kafka, partitions that do not exist are refused before the group is consulted."""
    counts = ctx.broker.logs.topics()
    return {(t, p): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for t, p in partitions
            if not 0 <= p < counts.get(t, 0)}


async def offset_commit(ctx: HandlerContext, request: OffsetCommitRequest) -> HandlerResult:
    topic_cls = response_type(ApiKey.OffsetCommit).OffsetCommitResponseTopic
    part_cls = topic_cls.OffsetCommitResponsePartition
    v = ctx.version
    names = _names(ctx, request.topics, by_id=v >= _TOPIC_ID_VERSION)
    # Kafka stores a null metadata string as "" (OffsetAndMetadata.NoMetadata).
    entries = [OffsetCommitEntry(name, p.partition_index, p.committed_offset,
                                 p.committed_metadata or "",
                                 leader_epoch=p.committed_leader_epoch if v >= 6 else -1,
                                 commit_timestamp_ms=p.commit_timestamp if v == 1 else -1)
               for t, name in zip(request.topics, names, strict=True) if name is not None
               for p in t.partitions]
    # v10: a topic id no topic has is UNKNOWN_TOPIC_ID, ahead of the topic's authorization
    # (Kafka's KafkaApis has no name to authorize); only the group's authorization comes first.
    unknown_id = (ErrorCode.GROUP_AUTHORIZATION_FAILED
                  if None in names and not authz.group(ctx, authz.READ, request.group_id)
                  else ErrorCode.UNKNOWN_TOPIC_ID)

    def build(results: dict[TopicPartition, ErrorCode]) -> ResponseBody:
        return ctx.response(throttle_time_ms=0, topics=[
            topic_cls(name=name or "", topic_id=t.topic_id if v >= _TOPIC_ID_VERSION else None,
                      partitions=[
                          part_cls(partition_index=p.partition_index,
                                   error_code=unknown_id if name is None else
                                   results.get((name, p.partition_index), ErrorCode.NONE))
                          for p in t.partitions])
            for t, name in zip(request.topics, names, strict=True)])

    asked = [(e.topic, e.partition) for e in entries]
    unknown = {**_unknown_partitions(ctx, asked),
               **authz.offset_errors(ctx, authz.READ, request.group_id, authz.READ, asked)}
    entries = [e for e in entries if (e.topic, e.partition) not in unknown]
    if not entries:
        return build(unknown)

    def merged(results: dict[TopicPartition, ErrorCode]) -> ResponseBody:
        return build({**results, **unknown})

    # now + retention must fit the offsets file's i64 expiry; 2**62 ms is still forever (a
    # value near 2**63 crashed the commit).
    retention_ms = min(request.retention_time_ms, 2**62) if v in _RETENTION_VERSIONS else -1
    reply: Reply[dict[TopicPartition, ErrorCode]] = Reply(ctx, merged)
    ctx.broker.groups.commit_offsets(CommitRequest(
        group_id=request.group_id,
        generation_id=request.generation_id_or_member_epoch if v >= 1 else -1,
        member_id=request.member_id if v >= 1 else "",
        group_instance_id=request.group_instance_id if v >= 7 else None,
        retention_time_ms=retention_ms, group_id_not_found_error=v >= 9,
        unchecked=v == 0), entries, reply)
    return reply.result()


# --- OffsetFetch -----------------------------------------------------------------------------

_OF = response_type(ApiKey.OffsetFetch)

#: (group id, the partitions asked for or None for all) of one OffsetFetch
_Wanted = tuple[str, list[TopicPartition] | None]


async def offset_fetch(ctx: HandlerContext, request: OffsetFetchRequest) -> HandlerResult:
    v = ctx.version
    wanted: list[_Wanted]
    by_id = v >= _TOPIC_ID_VERSION
    #: per group: the topics named by an id no topic has (v10), answered UNKNOWN_TOPIC_ID
    unknown_ids: list[list[Struct]] = []
    if v >= 8:
        wanted = []
        for g in request.groups:
            if g.topics is None:
                wanted.append((g.group_id, None))
                unknown_ids.append([])
                continue
            names = _names(ctx, g.topics, by_id=by_id)
            wanted.append((g.group_id, [(name, p) for t, name in zip(g.topics, names, strict=True)
                                        if name is not None for p in t.partition_indexes]))
            unknown_ids.append([t for t, name in zip(g.topics, names, strict=True)
                                if name is None])
    else:
        wanted = [(request.group_id, None if request.topics is None else
                   [(t.name, p) for t in request.topics for p in t.partition_indexes])]
    coord = ctx.broker.groups
    # v9+: a consumer-group member names itself and its epoch (checked, STALE_MEMBER_EPOCH)
    members = {g.group_id: (g.member_id, g.member_epoch) for g in request.groups} if v >= 9 else {}

    stable = v >= 7 and request.require_stable

    def build(_: object = None) -> ResponseBody:
        if v >= 8:
            return ctx.response(throttle_time_ms=0, groups=[
                _group_result(ctx, g, parts, *members.get(g, (None, -1)),
                              unstable=_unstable(ctx, g, stable), by_id=by_id,
                              unknown_ids=unknown)
                for (g, parts), unknown in zip(wanted, unknown_ids, strict=True)])
        return _single_group_result(ctx, *wanted[0], _unstable(ctx, wanted[0][0], stable))

    if not (v >= 7 and request.require_stable):
        return build()
    # require_stable: answer once every commit of these groups already accepted is applied.
    waiting = 0
    reply: Reply[object] = Reply(ctx, build)

    def one_done() -> None:
        nonlocal waiting
        waiting -= 1
        if waiting == 0:
            reply(None)

    for group_id in dict.fromkeys(g for g, _ in wanted):
        waiting += 1
        if not coord.after_pending_writes(group_id, one_done):
            waiting -= 1
    if waiting == 0:
        return build()
    return reply.result()


def _unstable(ctx: HandlerContext, group_id: str, require_stable: bool) -> set[TopicPartition]:
    """With ``require_stable``, the partitions an open transaction holds offsets for: Kafka
    answers them UNSTABLE_OFFSET_COMMIT (retriable) until the transaction ends."""
    return ctx.broker.transactions.pending_offsets(group_id) if require_stable else set()


def _group_result(ctx: HandlerContext, group_id: str, partitions: list[TopicPartition] | None,
                  member_id: str | None, member_epoch: int, *,
                  unstable: set[TopicPartition], by_id: bool,
                  unknown_ids: list[Struct]) -> Struct:
    group_cls = _OF.OffsetFetchResponseGroup
    topic_cls = group_cls.OffsetFetchResponseTopics
    part_cls = topic_cls.OffsetFetchResponsePartitions
    if not authz.group(ctx, authz.DESCRIBE, group_id):
        return group_cls(group_id=group_id, topics=[],
                         error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error, found = ctx.broker.groups.fetch_offsets(group_id, partitions, member_id=member_id,
                                                   member_epoch=member_epoch)
    if error:  # Kafka answers a group-level error alone
        return group_cls(group_id=group_id, topics=[], error_code=error)
    found, denied = authz.visible_offsets(ctx, found, explicit=partitions is not None)
    logs = ctx.broker.logs
    topics = []
    for topic, parts in _by_topic(found).items():
        topic_id = logs.topic_id(topic) if by_id else None
        if by_id and topic_id is None:
            continue  # v10 names a topic by its id: one without (deleted) cannot be answered
        topics.append(topic_cls(name=topic, topic_id=topic_id, partitions=[
            _partition(part_cls, p, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            if (topic, p) in denied else
            _partition(part_cls, p, None, ErrorCode.UNSTABLE_OFFSET_COMMIT)
            if (topic, p) in unstable else _partition(part_cls, p, om, ErrorCode.NONE)
            for p, om in parts]))
    # after the coordinator's answer, as Kafka's KafkaApis appends its error topics
    topics += [topic_cls(name="", topic_id=t.topic_id, partitions=[
        _partition(part_cls, p, None, ErrorCode.UNKNOWN_TOPIC_ID) for p in t.partition_indexes])
        for t in unknown_ids]
    return group_cls(group_id=group_id, topics=topics, error_code=ErrorCode.NONE)


def _single_group_result(ctx: HandlerContext, group_id: str,
                         partitions: list[TopicPartition] | None,
                         unstable: set[TopicPartition]) -> ResponseBody:
    topic_cls = _OF.OffsetFetchResponseTopic
    part_cls = topic_cls.OffsetFetchResponsePartition
    v = ctx.version
    if authz.group(ctx, authz.DESCRIBE, group_id):
        error, found = ctx.broker.groups.fetch_offsets(group_id, partitions)
    else:
        error, found = ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    found, denied = authz.visible_offsets(ctx, found, explicit=partitions is not None)
    if error and v >= 2:
        return ctx.response(throttle_time_ms=0, topics=[], error_code=error)
    if error:  # v0-v1 have no top-level error code: every requested partition carries it
        found = [(tp, None) for tp in partitions or []]
    unknown: dict[TopicPartition, ErrorCode] = {}
    if v == 0 and not error:
        # ZooKeeper-era v0: a partition without a committed offset (or without a topic) is
        # UNKNOWN_TOPIC_OR_PARTITION.
        unknown = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp, om in found if om is None}
    if unstable and not error:
        unknown = dict.fromkeys(unstable, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        found = [(tp, None if tp in unstable else om) for tp, om in found]
    if denied and not error:
        unknown = {**unknown, **denied}
        found = [(tp, None if tp in denied else om) for tp, om in found]
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, topics=[
        topic_cls(name=topic, partitions=[
            _partition(part_cls, p, om, error or unknown.get((topic, p), ErrorCode.NONE))
            for p, om in parts])
        for topic, parts in _by_topic(found).items()])


def _by_topic(found: list[tuple[TopicPartition, OffsetAndMetadata | None]],
              ) -> dict[str, list[tuple[int, OffsetAndMetadata | None]]]:
    by_topic: dict[str, list[tuple[int, OffsetAndMetadata | None]]] = {}
    for (topic, partition), om in found:
        by_topic.setdefault(topic, []).append((partition, om))
    return by_topic


def _partition(cls: Struct, partition: int, om: OffsetAndMetadata | None,
               error: ErrorCode) -> Struct:
    if om is None:
        return cls(partition_index=partition, committed_offset=-1, committed_leader_epoch=-1,
                   metadata="", error_code=error)
    return cls(partition_index=partition, committed_offset=om.offset,
               committed_leader_epoch=om.leader_epoch, metadata=om.metadata, error_code=error)


# --- OffsetDelete ----------------------------------------------------------------------------

async def offset_delete(ctx: HandlerContext, request: OffsetDeleteRequest) -> HandlerResult:
    topic_cls = response_type(ApiKey.OffsetDelete).OffsetDeleteResponseTopic
    part_cls = topic_cls.OffsetDeleteResponsePartition
    asked = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    if not authz.group(ctx, authz.DELETE, request.group_id):
        return ctx.response(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0,
                            topics=[])
    unknown = {**_unknown_partitions(ctx, asked),
               **authz.offset_errors(ctx, authz.DELETE, request.group_id, authz.READ, asked)}

    def build(outcome: tuple[ErrorCode, dict[TopicPartition, ErrorCode]]) -> ResponseBody:
        error, results = outcome
        if error:  # Kafka answers a group-level error alone
            return ctx.response(error_code=error, throttle_time_ms=0, topics=[])
        results = {**results, **unknown}
        return ctx.response(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=[
            topic_cls(name=t.name, partitions=[
                part_cls(partition_index=p.partition_index,
                         error_code=results.get((t.name, p.partition_index), ErrorCode.NONE))
                for p in t.partitions])
            for t in request.topics])

    reply: Reply[tuple[ErrorCode, dict[TopicPartition, ErrorCode]]] = Reply(ctx, build)
    ctx.broker.groups.delete_offsets(
        request.group_id, [tp for tp in dict.fromkeys(asked) if tp not in unknown],
        lambda error, results: reply((error, results)))
    return reply.result()
