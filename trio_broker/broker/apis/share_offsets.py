"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets (KIP-932,
Kafka 4.2's versions): what ``kafka-share-groups.sh`` reads and resets.

Why apart from ``share.py``: these are the administrator's view of a share group (its
share-partitions' start offsets), not the members' traffic, and Kafka authorizes them
differently: Describe needs DESCRIBE on the group and on each topic (an unauthorized topic is
left out of a describe-all, TOPIC_AUTHORIZATION_FAILED when named), Alter READ on both, Delete
DELETE on the group and READ on each topic. Alter and Delete need an empty share group
(NON_EMPTY_GROUP), one that exists (GROUP_ID_NOT_FOUND); Describe answers start offset -1 (and
lag -1) for a share-partition never initialized, as Kafka does for absent data.
"""

from __future__ import annotations

import uuid

import trio

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import response_type
from ..server import authz
from ..server.bodies import RequestBody, Struct
from ..server.context import HandlerContext, HandlerResult

_DESCRIBE = response_type(ApiKey.DescribeShareGroupOffsets)
_D_GROUP = _DESCRIBE.DescribeShareGroupOffsetsResponseGroup
_D_TOPIC = _D_GROUP.DescribeShareGroupOffsetsResponseTopic
_D_PART = _D_TOPIC.DescribeShareGroupOffsetsResponsePartition
_ALTER = response_type(ApiKey.AlterShareGroupOffsets)
_A_TOPIC = _ALTER.AlterShareGroupOffsetsResponseTopic
_A_PART = _A_TOPIC.AlterShareGroupOffsetsResponsePartition
_DELETE = response_type(ApiKey.DeleteShareGroupOffsets)
_DEL_TOPIC = _DELETE.DeleteShareGroupOffsetsResponseTopic

#: Kafka's ``Uuid.ZERO_UUID`` (the codec writes None as the zero uuid)
_ZERO_UUID = None
#: Kafka's ``PartitionFactory.UNINITIALIZED_START_OFFSET`` / ``DEFAULT_LEADER_EPOCH``
UNINITIALIZED_START_OFFSET = -1
_DEFAULT_LEADER_EPOCH = 0
_UNKNOWN_TOPIC = "This server does not host this topic-partition."
_TOPIC_DENIED = "Topic authorization failed."


def _group_refusal(ctx: HandlerContext, group_id: str) -> tuple[int, str] | None:
    """Alter's and Delete's checks of the group once authorized: Kafka's ``shareGroup`` and
    ``validateOffsetsAlterable``."""
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID, "The group id is invalid."
    coord = ctx.broker.groups
    if group_id in coord.groups or group_id in coord.consumer_groups:
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
    shares = ctx.broker.shares
    shares.expire_members(trio.current_time())
    group = shares.groups.get(group_id)
    if group is None:
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
    if group.members:
        return ErrorCode.NON_EMPTY_GROUP, "The group is not empty."
    return None


# --- DescribeShareGroupOffsets -----------------------------------------------------------------
async def handle_describe_share_group_offsets(ctx: HandlerContext,
                                              request: RequestBody) -> HandlerResult:
    groups = []
    for g in request.groups:
        if not authz.group(ctx, authz.DESCRIBE, g.group_id):
            groups.append(_D_GROUP(group_id=g.group_id, topics=[],
                                   error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
        else:
            groups.append(_D_GROUP(group_id=g.group_id, error_code=0,
                                   topics=_described_topics(ctx, g.group_id, g.topics)))
    return ctx.response(throttle_time_ms=0, groups=groups)


def _described_topics(ctx: HandlerContext, group_id: str,
                      topics: list[Struct] | None) -> list[Struct]:
    logs = ctx.broker.logs
    shares = ctx.broker.shares
    if topics is None:  # every initialized share-partition of topics the client may describe
        wanted: dict[str, list[int]] = {}
        for initialized_id, partition in shares.initialized_partitions(group_id):
            name = logs.topic_name(initialized_id)
            if name is not None:
                wanted.setdefault(name, []).append(partition)
        allowed = authz.topics(ctx, authz.DESCRIBE, wanted)
        named = [(name, sorted(wanted[name])) for name in sorted(allowed)]
    else:
        named = [(t.topic_name, list(t.partitions)) for t in topics]
        allowed = authz.topics(ctx, authz.DESCRIBE, {name for name, _ in named})
    out = []
    for name, partitions in named:
        topic_id = logs.topic_id(name)
        if name not in allowed:
            out.append(_D_TOPIC(topic_name=name, topic_id=_ZERO_UUID, partitions=[
                _D_PART(partition_index=p, start_offset=UNINITIALIZED_START_OFFSET,
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        error_message=_TOPIC_DENIED) for p in partitions]))
            continue
        out.append(_D_TOPIC(topic_name=name, topic_id=topic_id or _ZERO_UUID, partitions=[
            _described_partition(ctx, group_id, topic_id, p) for p in partitions]))
    return out


def _described_partition(ctx: HandlerContext, group_id: str, topic_id: uuid.UUID | None,
                         partition: int) -> Struct:
    shares = ctx.broker.shares
    sp = None if topic_id is None else shares.stored_partition(group_id, topic_id, partition)
    if topic_id is None or sp is None:
        return _D_PART(partition_index=partition, start_offset=UNINITIALIZED_START_OFFSET,
                       leader_epoch=_DEFAULT_LEADER_EPOCH, lag=-1, error_code=0)
    name = ctx.broker.logs.topic_name(topic_id) or ""
    _, epoch = ctx.broker.cluster.leader_of(name, partition)
    return _D_PART(partition_index=partition, start_offset=sp.start_offset,
                   leader_epoch=max(epoch, 0), lag=shares.lag(sp, topic_id, partition),
                   error_code=0)


# --- AlterShareGroupOffsets --------------------------------------------------------------------
async def handle_alter_share_group_offsets(ctx: HandlerContext,
                                           request: RequestBody) -> HandlerResult:
    def refused(code: int, message: str | None = None) -> HandlerResult:
        return ctx.response(throttle_time_ms=0, error_code=code, error_message=message,
                            responses=[])

    group_id = request.group_id
    if not authz.group(ctx, authz.READ, group_id):
        return refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    logs = ctx.broker.logs
    allowed = authz.topics(ctx, authz.READ, {t.topic_name for t in request.topics})
    refusal = _group_refusal(ctx, group_id)
    if refusal is not None:
        return refused(*refusal)
    responses = []
    for t in request.topics:
        topic_id = logs.topic_id(t.topic_name)
        count = logs.partition_count(t.topic_name)
        error: int
        message: str | None
        if t.topic_name not in allowed:
            error, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, _TOPIC_DENIED
        elif topic_id is None or count is None:
            error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_TOPIC
        else:
            error, message = 0, None
        partitions = []
        for p in t.partitions:
            code, text = error, message
            if not code and not 0 <= p.partition_index < (count or 0):
                code, text = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_TOPIC
            if not code:
                assert topic_id is not None
                await ctx.broker.shares.alter_start_offset(group_id, topic_id,
                                                           p.partition_index, p.start_offset)
            partitions.append(_A_PART(partition_index=p.partition_index, error_code=code,
                                      error_message=text))
        responses.append(_A_TOPIC(topic_name=t.topic_name, topic_id=topic_id or _ZERO_UUID,
                                  partitions=partitions))
    return ctx.response(throttle_time_ms=0, error_code=0, responses=responses)


# --- DeleteShareGroupOffsets -------------------------------------------------------------------
async def handle_delete_share_group_offsets(ctx: HandlerContext,
                                            request: RequestBody) -> HandlerResult:
    def refused(code: int, message: str | None = None) -> HandlerResult:
        return ctx.response(throttle_time_ms=0, error_code=code, error_message=message,
                            responses=[])

    group_id = request.group_id
    if not authz.group(ctx, authz.DELETE, group_id):
        return refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    allowed = authz.topics(ctx, authz.READ, {t.topic_name for t in request.topics})
    refusal = _group_refusal(ctx, group_id)
    if refusal is not None:
        return refused(*refusal)
    logs = ctx.broker.logs
    shares = ctx.broker.shares
    responses = []
    for t in request.topics:
        topic_id = logs.topic_id(t.topic_name)
        code: int
        message: str | None
        if t.topic_name not in allowed:
            code, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, _TOPIC_DENIED
        elif topic_id is None:
            code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_TOPIC
        elif not shares.delete_offsets(group_id, topic_id):
            code, message = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             "There is no offset information to delete.")
        else:
            code, message = 0, None
        responses.append(_DEL_TOPIC(
            topic_name=t.topic_name, error_code=code, error_message=message,
            topic_id=topic_id if topic_id is not None and code != (
                ErrorCode.TOPIC_AUTHORIZATION_FAILED) else _ZERO_UUID))
    return ctx.response(throttle_time_ms=0, error_code=0, responses=responses)
