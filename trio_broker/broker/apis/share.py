"""ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch and ShareAcknowledge (KIP-932, Kafka
4.2's versions): share groups, where the members read the same partitions together and each
record is acquired by one member, acknowledged record by record.

Why thin: the share coordinator (``coordinator.share``) owns membership, sessions and each
share-partition's delivery state; these handlers check the request in Kafka's order (group
authorization, the request's own fields, the share session, topic authorization, then each
partition), apply acknowledgements before fetching, and park a ShareFetch that acquired nothing
in the fetch purgatory like a Fetch, until records arrive, an acquisition lock ends or
``max_wait_ms`` passes.
"""

from __future__ import annotations

import uuid
from functools import partial
from typing import Any

import trio

from ...protocol.api_keys import ApiKey
from ...protocol.batch import BatchHeader
from ...protocol.errors import ErrorCode
from ...protocol.messages import response_type
from ..coordinator.share import Acquisition, HeartbeatAnswer, ShareGroup
from ..coordinator.share.coordinator import FINAL_SESSION_EPOCH, INITIAL_SESSION_EPOCH
from ..coordinator.share.group import Assignment
from ..metrics import SHARE_ACKNOWLEDGEMENT, SHARE_FETCH
from ..server import authz
from ..server.bodies import RequestBody, ResponseBody, Struct
from ..server.context import DEFERRED, HandlerContext, HandlerResult
from ..server.purgatory import DelayedOperation
from ..storage import StorageError
from .groups import client_host

_HB = response_type(ApiKey.ShareGroupHeartbeat)
_SGD = response_type(ApiKey.ShareGroupDescribe)
_SF = response_type(ApiKey.ShareFetch)
_SF_PART = _SF.ShareFetchableTopicResponse.PartitionData
_SA = response_type(ApiKey.ShareAcknowledge)
_SA_PART = _SA.ShareAcknowledgeTopicResponse.PartitionData
_NO_OPERATIONS = -2147483648
#: Kafka's share group assignor name (ShareGroupDescribe)
ASSIGNOR_NAME = "simple"

TP = tuple[uuid.UUID, int]


# --- ShareGroupHeartbeat -----------------------------------------------------------------------
async def handle_share_group_heartbeat(ctx: HandlerContext,
                                       request: RequestBody) -> HandlerResult:
    def answer(a: HeartbeatAnswer) -> ResponseBody:
        assignment = None if a.assignment is None else _HB.Assignment(
            topic_partitions=[_HB.Assignment.TopicPartitions(topic_id=tid, partitions=sorted(p))
                              for tid, p in sorted(a.assignment.items(), key=str)])
        return ctx.response(throttle_time_ms=0, error_code=a.error, error_message=a.message,
                            member_id=a.member_id, member_epoch=a.member_epoch,
                            heartbeat_interval_ms=(ctx.broker.shares.heartbeat_interval_ms(
                                request.group_id) if not a.error else 0),
                            assignment=assignment)

    if not authz.group(ctx, authz.READ, request.group_id):
        return answer(HeartbeatAnswer(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    invalid = _heartbeat_invalid(request)
    if invalid is not None:
        return answer(HeartbeatAnswer(ErrorCode.INVALID_REQUEST, invalid))
    coord = ctx.broker.groups
    if request.group_id in coord.groups or request.group_id in coord.consumer_groups:
        return answer(HeartbeatAnswer(ErrorCode.GROUP_ID_NOT_FOUND,
                                      f"Group {request.group_id} is not a share group."))
    subscribed = request.subscribed_topic_names
    return answer(ctx.broker.shares.heartbeat(
        request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        rack_id=request.rack_id, subscribed=None if subscribed is None else tuple(subscribed),
        client_id=ctx.client_id, client_host=client_host(ctx), now=trio.current_time()))


def _heartbeat_invalid(request: RequestBody) -> str | None:
    """Kafka's ``throwIfShareGroupHeartbeatRequestIsInvalid``."""
    if not request.group_id:
        return "GroupId can't be empty."
    if not request.member_id:
        return "MemberId can't be empty."
    if request.member_epoch < -1:
        return "MemberEpoch is invalid."
    if request.member_epoch == 0 and not request.subscribed_topic_names:
        return "SubscribedTopicNames must be set in first request."
    return None


# --- ShareGroupDescribe ------------------------------------------------------------------------
async def handle_share_group_describe(ctx: HandlerContext,
                                      request: RequestBody) -> HandlerResult:
    shares = ctx.broker.shares
    names = {tid: name for name, tid in ctx.broker.logs.topic_ids().items()}
    groups = []
    for group_id in request.group_ids:
        group = shares.groups.get(group_id)
        if not authz.group(ctx, authz.DESCRIBE, group_id):
            groups.append(_described_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
        elif group is None:
            groups.append(_described_error(group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                                           f"Group {group_id} not found."))
        else:
            ops = (authz.operations(ctx, authz.GROUP, group_id)
                   if request.include_authorized_operations else None)
            groups.append(_described(group, names, ops))
    return ctx.response(throttle_time_ms=0, groups=groups)


def _described_error(group_id: str, error: int, message: str | None = None) -> Struct:
    return _SGD.DescribedGroup(error_code=error, error_message=message, group_id=group_id,
                               group_state="Dead", group_epoch=-1, assignment_epoch=-1,
                               assignor_name="", members=[])


def _described(group: ShareGroup, names: dict[uuid.UUID, str],
               operations: frozenset[int] | None) -> Struct:
    member_cls = _SGD.DescribedGroup.Member
    tp_cls = member_cls.Assignment.TopicPartitions

    def assignment(a: Assignment) -> Struct:
        return member_cls.Assignment(topic_partitions=[
            tp_cls(topic_id=tid, topic_name=names[tid], partitions=sorted(p))
            for tid, p in sorted(a.items(), key=str) if tid in names])

    members = [member_cls(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                          client_id=m.client_id, client_host=m.client_host,
                          subscribed_topic_names=list(m.subscribed_topic_names),
                          assignment=assignment(m.assignment))
               for m in group.members.values()]
    bits = _NO_OPERATIONS if operations is None else sum(1 << op for op in operations)
    return _SGD.DescribedGroup(error_code=0, group_id=group.group_id, group_state=group.state,
                               group_epoch=group.group_epoch, assignment_epoch=group.group_epoch,
                               assignor_name=ASSIGNOR_NAME, members=members,
                               authorized_operations=bits)


# --- acknowledgements (ShareFetch and ShareAcknowledge) ----------------------------------------
def _acknowledge(ctx: HandlerContext, group_id: str, member_id: str, topics: list[Struct],
                 denied: set[str], renew: bool) -> dict[TP, int]:
    """Apply every partition's acknowledgement batches; (topic id, partition) -> error code.
    ``renew`` is the request's ``IsRenewAck``: only then is RENEW a valid type."""
    shares = ctx.broker.shares
    logs = ctx.broker.logs
    results: dict[TP, int] = {}
    now = trio.current_time()
    lock_s = shares.record_lock_duration_ms(group_id) / 1000
    # Kafka counts what reaches its SharePartitionManager: unknown and denied topics are
    # answered before it
    counted: list[str] = []
    failed: list[str] = []
    for t in topics:
        name = logs.topic_name(t.topic_id)
        for p in t.partitions:
            if not p.acknowledgement_batches:
                continue
            key = (t.topic_id, p.partition_index)
            if name is None:
                results[key] = ErrorCode.UNKNOWN_TOPIC_ID
            elif name in denied:
                results[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif logs.get_log(name, p.partition_index) is None:
                results[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                counted.append(name)
                sp = shares.partitions.get((group_id, t.topic_id, p.partition_index))
                if sp is None:
                    results[key] = ErrorCode.INVALID_RECORD_STATE
                    failed.append(name)
                    continue
                sp.expire_locks(now)
                error = sp.acknowledge(member_id, [
                    (b.first_offset, b.last_offset, b.acknowledge_types)
                    for b in p.acknowledgement_batches], renew=renew, now=now, lock_s=lock_s)
                results[key] = error or 0
                if error is not None:
                    failed.append(name)
                if error is None:  # records freed or released: wake the group's waiting fetches
                    _count_acknowledgements(ctx, p.acknowledgement_batches)
                    ctx.broker.fetch_purgatory.notify(_share_key(group_id, name,
                                                                 p.partition_index), 1)
    if counted:
        ctx.broker.metrics.topics.share_requests(SHARE_ACKNOWLEDGEMENT, counted, failed)
    return results


#: Kafka's AcknowledgeType names, as its RecordAcknowledgementsPerSec ackType tag spells them
#: (gaps are no record: not counted)
_ACK_TAGS = {1: "Accept", 2: "Release", 3: "Reject", 4: "Renew"}


def _count_acknowledgements(ctx: HandlerContext, batches: list[Struct]) -> None:
    counter = ctx.broker.metrics.share_record_acknowledgements
    for b in batches:
        types = b.acknowledge_types
        if len(types) == 1:
            if types[0] in _ACK_TAGS:
                counter.labels(_ACK_TAGS[types[0]]).inc(b.last_offset - b.first_offset + 1)
            continue
        for kind in types:
            if kind in _ACK_TAGS:
                counter.labels(_ACK_TAGS[kind]).inc()


async def _persist(ctx: HandlerContext, group_id: str, acks: dict[TP, int]) -> None:
    """Acknowledgements are durable before they are answered (``coordinator.share.store``)."""
    for (topic_id, partition), code in acks.items():
        if code == 0:
            await ctx.broker.shares.persist(group_id, topic_id, partition)


def _share_key(group_id: str, topic: str, partition: int) -> tuple[str, str, str, int]:
    """The purgatory key a parked ShareFetch also waits under: acknowledgements in its group."""
    return ("share", group_id, topic, partition)


def _session_error(ctx: HandlerContext, request: RequestBody,
                   named: list[TP], forgotten: list[TP]) -> tuple[int, set[TP]]:
    found = ctx.broker.shares.session(request.group_id or "", request.member_id or "",
                                      request.share_session_epoch, named, forgotten,
                                      node_id=ctx.broker.node_id)
    if isinstance(found, ErrorCode):
        return found, set()
    return 0, set(found.partitions)


def _denied_topics(ctx: HandlerContext, topics: list[Struct]) -> set[str]:
    logs = ctx.broker.logs
    names = {n for t in topics if (n := logs.topic_name(t.topic_id)) is not None}
    return names - authz.topics(ctx, authz.READ, names)


def _top_level(ctx: HandlerContext, lock_ms: int, error: int,
               message: str | None = None) -> ResponseBody:
    """A ShareFetch or ShareAcknowledge answer refused as a whole."""
    return ctx.response(throttle_time_ms=0, error_code=error, error_message=message,
                        acquisition_lock_timeout_ms=lock_ms, responses=[], node_endpoints=[])


def _group_refusal(ctx: HandlerContext, group_id: str,
                   member_id: str) -> tuple[int, str | None] | None:
    """The checks ShareFetch and ShareAcknowledge open with, in Kafka's order."""
    if not authz.group(ctx, authz.READ, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    if not group_id or not member_id:
        return ErrorCode.INVALID_REQUEST, "GroupId and MemberId must be set."
    return None


# --- ShareFetch --------------------------------------------------------------------------------
async def handle_share_fetch(ctx: HandlerContext, request: RequestBody) -> HandlerResult:
    lock_ms = ctx.broker.shares.record_lock_duration_ms(request.group_id or "")

    top_level = partial(_top_level, ctx, lock_ms)
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    refused = _group_refusal(ctx, group_id, member_id)
    if refused is not None:
        return top_level(*refused)
    renew = bool(request.is_renew_ack)
    if renew and (request.max_bytes or request.min_bytes or request.max_records
                  or request.max_wait_ms):
        # KIP-1222: a renewing ShareFetch fetches nothing (fetching could outlast the renewed
        # locks), so it must not ask for records
        return top_level(ErrorCode.INVALID_REQUEST, "MaxBytes, MinBytes, MaxRecords and "
                         "MaxWaitMs must be 0 in a ShareFetch with IsRenewAck.")
    named = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    epoch = request.share_session_epoch
    if epoch == FINAL_SESSION_EPOCH and any(
            not p.acknowledgement_batches for t in request.topics for p in t.partitions):
        return top_level(ErrorCode.INVALID_REQUEST,
                         "Acknowledge data is the only data allowed in a final ShareFetch.")
    forgotten = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    error, session = _session_error(ctx, request, named, forgotten)
    if error:
        return top_level(error)
    denied = _denied_topics(ctx, request.topics)
    acks = _acknowledge(ctx, group_id, member_id, request.topics, denied, renew)
    await _persist(ctx, group_id, acks)
    wanted = set() if epoch == FINAL_SESSION_EPOCH or renew else session
    fetched = _acquire(ctx, request, group_id, member_id, wanted, denied)
    logs = ctx.broker.logs
    # counted once per topic when the fetch starts, failed when it completes
    # (``_fetch_response``), as Kafka's SharePartitionManager marks them
    named_topics = {name for tid, _ in wanted if (name := logs.topic_name(tid)) is not None
                    and name not in denied}
    if named_topics:
        ctx.broker.metrics.topics.share_requests(SHARE_FETCH, named_topics, ())
    if (any(a.record_count for a in fetched.values() if isinstance(a, Acquisition))
            or request.max_wait_ms <= 0 or not wanted):
        return _fetch_response(ctx, acks, fetched, lock_ms)
    tps = [(name, p) for tid, p in wanted if (name := logs.topic_name(tid)) is not None]
    keys = [*tps, *(_share_key(group_id, name, p) for name, p in tps)]
    deadline = trio.current_time() + request.max_wait_ms / 1000
    lock_end = ctx.broker.shares.next_lock_deadline(group_id, wanted)
    if lock_end is not None:
        deadline = min(deadline, lock_end)

    def complete() -> None:
        ctx.respond(_fetch_response(
            ctx, acks, _acquire(ctx, request, group_id, member_id, wanted, denied), lock_ms))

    ctx.broker.fetch_purgatory.park(DelayedOperation(
        keys, deadline=deadline, min_bytes=1, accumulated_bytes=0, complete=complete))
    return DEFERRED


def _acquire(ctx: HandlerContext, request: RequestBody, group_id: str, member_id: str,
             wanted: set[TP], denied: set[str]) -> dict[TP, Acquisition | int]:
    """Acquire records for the member from each partition of its session."""
    logs = ctx.broker.logs
    shares = ctx.broker.shares
    now = trio.current_time()
    lock_s = shares.record_lock_duration_ms(group_id) / 1000
    remaining = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    max_records = request.max_records if request.max_records > 0 else 500
    committed = shares.isolation_level(group_id) == "read_committed"
    out: dict[TP, Acquisition | int] = {}
    for topic_id, partition in sorted(wanted, key=str):
        name = logs.topic_name(topic_id)
        log = None if name is None else logs.get_log(name, partition)
        if name is None:
            out[(topic_id, partition)] = ErrorCode.UNKNOWN_TOPIC_ID
            continue
        if name in denied:
            out[(topic_id, partition)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        sp = shares.share_partition(group_id, topic_id, partition)
        if log is None or sp is None:
            out[(topic_id, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        if remaining <= 0 or max_records <= 0:
            continue

        reader = _Reader(log, committed)
        try:
            got = sp.acquire(member_id, reader.read, max_records=max_records,
                             max_bytes=remaining, now=now, lock_s=lock_s,
                             skip=reader.skip if committed else None)
        except StorageError as exc:
            out[(topic_id, partition)] = exc.error_code
            continue
        out[(topic_id, partition)] = got
        remaining -= len(got.records)
        max_records -= got.record_count
    return out


class _Reader:
    """A share-partition's reads of its log. read_committed (the group's
    ``share.isolation.level``) reads stop at the last stable offset, and the batches of the
    transactions aborted there, and control batches, are skipped, as Kafka's share fetch
    archives them: a share consumer never sees them."""

    def __init__(self, log: Any, committed: bool) -> None:
        self.log = log
        self.committed = committed
        self.aborted: list[Any] = []

    def read(self, offset: int, max_bytes: int) -> bytes:
        data = self.log.read(offset, max_bytes, min_one_batch=True, committed=self.committed)
        assert isinstance(data.records, bytes)  # no region asked for
        self.aborted = data.aborted_transactions or []
        return data.records

    def skip(self, header: BatchHeader) -> bool:
        if header.is_control:
            return True
        return header.is_transactional and any(
            a.producer_id == header.producer_id
            and a.first_offset <= header.base_offset <= a.last_offset for a in self.aborted)


def _leader(ctx: HandlerContext, cls: Any, topic_id: uuid.UUID, partition: int) -> Struct:
    name = ctx.broker.logs.topic_name(topic_id)
    leader, epoch = (-1, -1) if name is None else ctx.broker.cluster.leader_of(name, partition)
    return cls.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)


#: partition errors answered before Kafka's SharePartitionManager sees the fetch: not failures
#: it counts
_NOT_FETCHED = frozenset({ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.TOPIC_AUTHORIZATION_FAILED})


def _fetch_response(ctx: HandlerContext, acks: dict[TP, int],
                    fetched: dict[TP, Acquisition | int], lock_ms: int) -> ResponseBody:
    failed = {name for (tid, _), got in fetched.items() if isinstance(got, int)
              and got not in _NOT_FETCHED and (name := ctx.broker.logs.topic_name(tid))}
    if failed:
        ctx.broker.metrics.topics.share_requests(SHARE_FETCH, (), failed)
    by_topic: dict[uuid.UUID, list[Struct]] = {}
    for key in sorted(set(acks) | set(fetched), key=str):
        got = fetched.get(key)
        part = _SF_PART(partition_index=key[1], error_code=0, acknowledge_error_code=0,
                        current_leader=_leader(ctx, _SF_PART, *key), records=None,
                        acquired_records=[])
        if key in acks:
            part.acknowledge_error_code = acks[key]
        if isinstance(got, int):
            part.error_code = got
        elif got is not None:
            if not got.record_count and key not in acks:
                continue
            part.records = got.records
            part.acquired_records = [
                _SF_PART.AcquiredRecords(first_offset=r.first_offset, last_offset=r.last_offset,
                                         delivery_count=r.delivery_count) for r in got.ranges]
        by_topic.setdefault(key[0], []).append(part)
    return ctx.response(
        throttle_time_ms=0, error_code=0, acquisition_lock_timeout_ms=lock_ms,
        responses=[_SF.ShareFetchableTopicResponse(topic_id=tid, partitions=parts)
                   for tid, parts in by_topic.items()], node_endpoints=[])


# --- ShareAcknowledge --------------------------------------------------------------------------
async def handle_share_acknowledge(ctx: HandlerContext, request: RequestBody) -> HandlerResult:
    lock_ms = ctx.broker.shares.record_lock_duration_ms(request.group_id or "")

    top_level = partial(_top_level, ctx, lock_ms)
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    refused = _group_refusal(ctx, group_id, member_id)
    if refused is not None:
        return top_level(*refused)
    if request.share_session_epoch == INITIAL_SESSION_EPOCH:
        return top_level(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                         "ShareAcknowledge cannot open a share session.")
    error, _ = _session_error(ctx, request, [], [])
    if error:
        return top_level(error)
    acks = _acknowledge(ctx, group_id, member_id, request.topics,
                        _denied_topics(ctx, request.topics), bool(request.is_renew_ack))
    await _persist(ctx, group_id, acks)
    by_topic: dict[uuid.UUID, list[Struct]] = {}
    for (tid, p), code in sorted(acks.items(), key=str):
        by_topic.setdefault(tid, []).append(_SA_PART(
            partition_index=p, error_code=code, current_leader=_leader(ctx, _SA_PART, tid, p)))
    return ctx.response(
        throttle_time_ms=0, error_code=0, acquisition_lock_timeout_ms=lock_ms,
        responses=[_SA.ShareAcknowledgeTopicResponse(topic_id=tid, partitions=parts)
                   for tid, parts in by_topic.items()], node_endpoints=[])
