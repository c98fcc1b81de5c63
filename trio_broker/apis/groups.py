"""Group membership APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups, ListGroups, DeleteGroups.

Why thin: the group coordinator (``trio_broker.coordinator``) owns every rule and state; these
handlers only translate between wire messages and coordinator calls. JoinGroup, SyncGroup and
DeleteGroups may be answered later: the coordinator calls back, ``Reply`` turns an immediate
callback into the handler's return value and a later one into ``ctx.respond``, so a held request
never holds a handler task.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from ..coordinator import JoinResult, SyncResult
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.messages import response_type
from .bodies import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    ResponseBody,
    SyncGroupRequest,
)
from .context import DEFERRED, HandlerContext, HandlerResult

LOGGER = logging.getLogger(__name__)

#: DescribeGroups authorized_operations (bit numbers; the codec packs them) without an
#: authorizer: READ (3), DELETE (6), DESCRIBE (8) allowed. None encodes Kafka's "not requested".
_GROUP_OPERATIONS = frozenset({3, 6, 8})

T = TypeVar("T")


class Reply(Generic[T]):
    """A coordinator callback bound to one request.

    Called during the handler (the answer is ready at once) it keeps the body for the handler to
    return; called later it sends the body with ``ctx.respond``.
    """

    __slots__ = ("_body", "_build", "_ctx", "_inline")

    def __init__(self, ctx: HandlerContext, build: Callable[[T], ResponseBody]) -> None:
        self._ctx = ctx
        self._build = build
        self._inline = True
        self._body: ResponseBody | None = None

    def __call__(self, result: T) -> None:
        body = self._build(result)
        if self._inline:
            self._body = body
        else:
            self._ctx.respond(body)

    def result(self) -> HandlerResult:
        """What the handler returns: the body if already answered, else ``DEFERRED``."""
        self._inline = False
        return DEFERRED if self._body is None else self._body


def client_host(ctx: HandlerContext) -> str:
    """Kafka reports member hosts as ``/address``."""
    return f"/{ctx.client_host}"


async def find_coordinator(ctx: HandlerContext, request: FindCoordinatorRequest) -> HandlerResult:
    # A single broker coordinates every group and every transactional id.
    key_type = getattr(request, "key_type", 0)
    broker = ctx.broker
    if key_type not in (0, 1):
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                            error_message=f"unknown key type {key_type}", node_id=-1, host="",
                            port=-1)
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                        node_id=broker.node_id, host=broker.advertised_host,
                        port=broker.advertised_port)


async def join_group(ctx: HandlerContext, request: JoinGroupRequest) -> HandlerResult:
    member_cls = response_type(ApiKey.JoinGroup).JoinGroupResponseMember

    def build(r: JoinResult) -> ResponseBody:
        return ctx.response(
            throttle_time_ms=0, error_code=r.error, generation_id=r.generation_id,
            protocol_name=r.protocol_name, leader=r.leader_id, member_id=r.member_id,
            members=[member_cls(member_id=mid, group_instance_id=None, metadata=meta)
                     for mid, meta in r.members])

    if getattr(request, "group_instance_id", None) is not None:
        LOGGER.debug("group %s: group.instance.id %r ignored (static membership unsupported)",
                     request.group_id, request.group_instance_id)
    reply: Reply[JoinResult] = Reply(ctx, build)
    rebalance_timeout_ms = request.rebalance_timeout_ms if ctx.version >= 1 else -1
    ctx.broker.groups.join_group(
        group_id=request.group_id, member_id=request.member_id, client_id=ctx.client_id,
        client_host=client_host(ctx), session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms, protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        require_known_member_id=ctx.version >= 4, respond=reply)
    return reply.result()


async def sync_group(ctx: HandlerContext, request: SyncGroupRequest) -> HandlerResult:
    def build(r: SyncResult) -> ResponseBody:
        return ctx.response(throttle_time_ms=0, error_code=r.error, assignment=r.assignment)

    reply: Reply[SyncResult] = Reply(ctx, build)
    ctx.broker.groups.sync_group(group_id=request.group_id, generation_id=request.generation_id,
                     member_id=request.member_id,
                     assignments=[(a.member_id, bytes(a.assignment))
                                  for a in request.assignments],
                     respond=reply)
    return reply.result()


async def heartbeat(ctx: HandlerContext, request: HeartbeatRequest) -> HandlerResult:
    error = ctx.broker.groups.heartbeat(
        group_id=request.group_id, generation_id=request.generation_id,
        member_id=request.member_id)
    return ctx.response(throttle_time_ms=0, error_code=error)


async def leave_group(ctx: HandlerContext, request: LeaveGroupRequest) -> HandlerResult:
    error = ctx.broker.groups.leave_group(
        group_id=request.group_id, member_id=request.member_id)
    return ctx.response(throttle_time_ms=0, error_code=error)


async def describe_groups(ctx: HandlerContext, request: DescribeGroupsRequest) -> HandlerResult:
    cls = response_type(ApiKey.DescribeGroups).DescribedGroup
    member_cls = cls.DescribedGroupMember
    coord = ctx.broker.groups
    operations = (_GROUP_OPERATIONS if getattr(request, "include_authorized_operations", False)
                  else None)
    groups = []
    for group_id in request.groups:
        if not coord.loaded:
            groups.append(cls(error_code=coord.not_ready_error, group_id=group_id, group_state="",
                              protocol_type="", protocol_data="", members=[],
                              authorized_operations=operations))
            continue
        summary = coord.describe_group(group_id)
        if summary is None:  # Kafka before DescribeGroups v6: an unknown group is Dead
            groups.append(cls(error_code=ErrorCode.NONE, group_id=group_id, group_state="Dead",
                              protocol_type="", protocol_data="", members=[],
                              authorized_operations=operations))
            continue
        groups.append(cls(
            error_code=ErrorCode.NONE, group_id=group_id, group_state=str(summary.state),
            protocol_type=summary.protocol_type, protocol_data=summary.protocol_name,
            members=[member_cls(member_id=m.member_id, group_instance_id=None,
                                client_id=m.client_id, client_host=m.client_host,
                                member_metadata=m.metadata, member_assignment=m.assignment)
                     for m in summary.members],
            authorized_operations=operations))
    return ctx.response(throttle_time_ms=0, groups=groups)


async def list_groups(ctx: HandlerContext, request: ListGroupsRequest) -> HandlerResult:
    cls = response_type(ApiKey.ListGroups).ListedGroup
    coord = ctx.broker.groups
    if not coord.loaded:
        return ctx.response(throttle_time_ms=0, error_code=coord.not_ready_error, groups=[])
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE,
                        groups=[cls(group_id=gid, protocol_type=ptype)
                                for gid, ptype in coord.list_groups()])


async def delete_groups(ctx: HandlerContext, request: DeleteGroupsRequest) -> HandlerResult:
    cls = response_type(ApiKey.DeleteGroups).DeletableGroupResult
    names = list(request.groups_names)

    def build(results: dict[str, ErrorCode]) -> ResponseBody:
        return ctx.response(throttle_time_ms=0, results=[
            cls(group_id=gid, error_code=results.get(gid, ErrorCode.NONE)) for gid in names])

    reply: Reply[dict[str, ErrorCode]] = Reply(ctx, build)
    ctx.broker.groups.delete_groups(names, reply)
    return reply.result()
