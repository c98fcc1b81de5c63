"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848), every version Kafka 3.9..4.1
defines: v0 (the coordinator may generate the member id) and v1 (the member generates it;
``subscribed_topic_regex``); ConsumerGroupDescribe v1 adds each member's type.

Why thin: the coordinator (``coordinator.consumer_groups``) owns every rule; these handlers
translate topic-id lists to and from its assignments. A heartbeat that changed the group is
answered once the change is durable (``Reply``), without holding a handler task.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import response_type
from ..coordinator.consumer_group import Assignment, ConsumerGroup
from ..coordinator.consumer_groups import HeartbeatRequest, HeartbeatResult
from ..server import authz
from ..server.bodies import RequestBody, ResponseBody, Struct
from ..server.context import HandlerContext, HandlerResult
from .groups import Reply, client_host

_HB = response_type(ApiKey.ConsumerGroupHeartbeat)
_CGD = response_type(ApiKey.ConsumerGroupDescribe)
#: ConsumerGroupDescribe v1 member type of a member speaking the consumer protocol
_CONSUMER_MEMBER_TYPE = 1
_CLASSIC_MEMBER_TYPE = 0


async def handle_consumer_group_heartbeat(ctx: HandlerContext,
                                          request: RequestBody) -> HandlerResult:
    def build(r: HeartbeatResult) -> ResponseBody:
        assignment = None if r.assignment is None else _HB.Assignment(
            topic_partitions=_topic_partitions(_HB.Assignment.TopicPartitions, r.assignment))
        return ctx.response(throttle_time_ms=0, error_code=r.error, error_message=r.message,
                            member_id=r.member_id, member_epoch=r.member_epoch,
                            heartbeat_interval_ms=r.heartbeat_interval_ms,
                            assignment=assignment)

    reply: Reply[HeartbeatResult] = Reply(ctx, build)
    broker = ctx.broker
    if not broker.config.consumer_protocol_enabled:
        # Kafka, with consumer missing from group.coordinator.rebalance.protocols
        reply(HeartbeatResult(ErrorCode.UNSUPPORTED_VERSION))
        return reply.result()
    if not authz.group(ctx, authz.READ, request.group_id):
        reply(HeartbeatResult(ErrorCode.GROUP_AUTHORIZATION_FAILED))
        return reply.result()
    owned = None if request.topic_partitions is None else _owned(request.topic_partitions)
    broker.groups.consumer_group_heartbeat(HeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id,
        member_epoch=request.member_epoch, client_id=ctx.client_id,
        client_host=client_host(ctx), version=ctx.version, instance_id=request.instance_id,
        rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=(None if request.subscribed_topic_names is None
                                else tuple(request.subscribed_topic_names)),
        subscribed_topic_regex=(request.subscribed_topic_regex if ctx.version >= 1 else None),
        server_assignor=request.server_assignor, owned=owned), reply)
    return reply.result()


def _owned(topics: Iterable[Struct]) -> dict[uuid.UUID, frozenset[int]]:
    owned: dict[uuid.UUID, frozenset[int]] = {}
    for t in topics:
        topic_id = t.topic_id or uuid.UUID(int=0)
        owned[topic_id] = owned.get(topic_id, frozenset()) | frozenset(t.partitions)
    return owned


def _topic_partitions(cls: Struct, assignment: Assignment,
                      names: dict[uuid.UUID, str] | None = None) -> list[Struct]:
    if names is None:
        return [cls(topic_id=tid, partitions=sorted(parts))
                for tid, parts in sorted(assignment.items(), key=lambda kv: str(kv[0]))]
    # ConsumerGroupDescribe names each topic; a topic deleted since is left out, as Kafka does
    return [cls(topic_id=tid, topic_name=names[tid], partitions=sorted(parts))
            for tid, parts in sorted(assignment.items(), key=lambda kv: str(kv[0]))
            if tid in names]


async def handle_consumer_group_describe(ctx: HandlerContext,
                                         request: RequestBody) -> HandlerResult:
    coord = ctx.broker.groups
    wants_operations = bool(request.include_authorized_operations)
    names = {tid: name for name, tid in ctx.broker.logs.topic_ids().items()}
    groups = []
    for group_id in request.group_ids:
        if not authz.group(ctx, authz.DESCRIBE, group_id):
            groups.append(_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
        elif not coord.loaded:
            groups.append(_error(group_id, coord.not_ready_error))
        elif not group_id:
            groups.append(_error(group_id, ErrorCode.INVALID_GROUP_ID))
        elif group_id in coord.consumer_groups:
            groups.append(_described(coord.consumer_groups[group_id], names,
                                     coord.consumer.default_assignor, ctx.version,
                                     authz.operations(ctx, authz.GROUP, group_id)
                                     if wants_operations else None))
        elif group_id in coord.groups:
            groups.append(_error(group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                                 f"Group {group_id} is not a consumer group."))
        else:
            groups.append(_error(group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                                 f"Group {group_id} not found."))
    return ctx.response(throttle_time_ms=0, groups=groups)


def _error(group_id: str, error: ErrorCode, message: str | None = None) -> Struct:
    return _CGD.DescribedGroup(error_code=error, error_message=message, group_id=group_id,
                               group_state="", group_epoch=0, assignment_epoch=0,
                               assignor_name="", members=[])


def _described(group: ConsumerGroup, names: dict[uuid.UUID, str], default_assignor: str,
               version: int, operations: frozenset[int] | None) -> Struct:
    """Kafka's ``ConsumerGroup.asDescribedGroup``."""
    member_cls = _CGD.DescribedGroup.Member
    tp_cls = member_cls.Assignment.TopicPartitions
    members = [member_cls(
        member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
        member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=sorted(m.subscribed_topic_names),
        subscribed_topic_regex=m.subscribed_topic_regex,
        assignment=member_cls.Assignment(topic_partitions=_topic_partitions(
            tp_cls, m.assigned, names)),
        target_assignment=member_cls.Assignment(topic_partitions=_topic_partitions(
            tp_cls, group.target_assignment.get(m.member_id, {}), names)),
        member_type=-1 if version < 1 else (
            _CLASSIC_MEMBER_TYPE if m.uses_classic_protocol else _CONSUMER_MEMBER_TYPE))
        for m in group.members.values()]
    return _CGD.DescribedGroup(
        error_code=ErrorCode.NONE, error_message=None, group_id=group.group_id,
        group_state=str(group.state), group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.preferred_assignor() or default_assignor, members=members,
        authorized_operations=_bits(operations) if operations is not None else -2**31)


def _bits(operations: Iterable[int]) -> int:
    return sum(1 << op for op in operations)


__all__ = ["handle_consumer_group_describe", "handle_consumer_group_heartbeat"]
