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
from typing import Any, Generic, TypeVar

from ..coordinator import GroupCoordinator, JoinResult, SyncResult
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.messages import ApiMessage, response_type
from .context import DEFERRED, HandlerResult, RequestContext
from .registry import handler

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

    def __init__(self, ctx: RequestContext, build: Callable[[T], ApiMessage]) -> None:
        self._ctx = ctx
        self._build = build
        self._inline = True
        self._body: ApiMessage | None = None

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


def coordinator(ctx: RequestContext) -> GroupCoordinator | None:
    """This broker's group coordinator, or None while it is not running."""
    return ctx.broker.groups  # type: ignore[no-any-return]


def client_host(ctx: RequestContext) -> str:
    """Kafka reports member hosts as ``/address``."""
    return f"/{ctx.client_host}"


@handler(ApiKey.FindCoordinator)
async def find_coordinator(ctx: RequestContext, request: Any) -> HandlerResult:
    # A single broker coordinates every group and every transactional id.
    key_type = getattr(request, "key_type", 0)
    broker = ctx.broker
    if key_type not in (0, 1):
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                            error_message=f"unknown key type {key_type}", node_id=-1, host="",
                            port=-1)
    if coordinator(ctx) is None:
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                            error_message=None, node_id=-1, host="", port=-1)
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                        node_id=broker.node_id, host=broker.advertised_host,
                        port=broker.advertised_port)


@handler(ApiKey.JoinGroup)
async def join_group(ctx: RequestContext, request: Any) -> HandlerResult:
    member_cls = response_type(ApiKey.JoinGroup).JoinGroupResponseMember

    def build(r: JoinResult) -> ApiMessage:
        return ctx.response(
            throttle_time_ms=0, error_code=r.error, generation_id=r.generation_id,
            protocol_name=r.protocol_name, leader=r.leader_id, member_id=r.member_id,
            members=[member_cls(member_id=mid, group_instance_id=None, metadata=meta)
                     for mid, meta in r.members])

    coord = coordinator(ctx)
    if coord is None:
        return build(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, request.member_id))
    if getattr(request, "group_instance_id", None) is not None:
        LOGGER.debug("group %s: group.instance.id %r ignored (static membership unsupported)",
                     request.group_id, request.group_instance_id)
    reply: Reply[JoinResult] = Reply(ctx, build)
    rebalance_timeout_ms = request.rebalance_timeout_ms if ctx.version >= 1 else -1
    coord.join_group(
        group_id=request.group_id, member_id=request.member_id, client_id=ctx.client_id,
        client_host=client_host(ctx), session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms, protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        require_known_member_id=ctx.version >= 4, respond=reply)
    return reply.result()


@handler(ApiKey.SyncGroup)
async def sync_group(ctx: RequestContext, request: Any) -> HandlerResult:
    def build(r: SyncResult) -> ApiMessage:
        return ctx.response(throttle_time_ms=0, error_code=r.error, assignment=r.assignment)

    coord = coordinator(ctx)
    if coord is None:
        return build(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    reply: Reply[SyncResult] = Reply(ctx, build)
    coord.sync_group(group_id=request.group_id, generation_id=request.generation_id,
                     member_id=request.member_id,
                     assignments=[(a.member_id, bytes(a.assignment))
                                  for a in request.assignments],
                     respond=reply)
    return reply.result()


@handler(ApiKey.Heartbeat)
async def heartbeat(ctx: RequestContext, request: Any) -> HandlerResult:
    coord = coordinator(ctx)
    error = ErrorCode.COORDINATOR_NOT_AVAILABLE if coord is None else coord.heartbeat(
        group_id=request.group_id, generation_id=request.generation_id,
        member_id=request.member_id)
    return ctx.response(throttle_time_ms=0, error_code=error)


@handler(ApiKey.LeaveGroup)
async def leave_group(ctx: RequestContext, request: Any) -> HandlerResult:
    coord = coordinator(ctx)
    error = ErrorCode.COORDINATOR_NOT_AVAILABLE if coord is None else coord.leave_group(
        group_id=request.group_id, member_id=request.member_id)
    return ctx.response(throttle_time_ms=0, error_code=error)


@handler(ApiKey.DescribeGroups)
async def describe_groups(ctx: RequestContext, request: Any) -> HandlerResult:
    cls = response_type(ApiKey.DescribeGroups).DescribedGroup
    member_cls = cls.DescribedGroupMember
    coord = coordinator(ctx)
    operations = (_GROUP_OPERATIONS if getattr(request, "include_authorized_operations", False)
                  else None)
    groups = []
    for group_id in request.groups:
        if coord is None or not coord.loaded:
            error = (ErrorCode.COORDINATOR_NOT_AVAILABLE if coord is None
                     else coord.not_ready_error)
            groups.append(cls(error_code=error, group_id=group_id, group_state="",
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


@handler(ApiKey.ListGroups)
async def list_groups(ctx: RequestContext, request: Any) -> HandlerResult:
    cls = response_type(ApiKey.ListGroups).ListedGroup
    coord = coordinator(ctx)
    if coord is None or not coord.loaded:
        error = (ErrorCode.COORDINATOR_NOT_AVAILABLE if coord is None
                 else coord.not_ready_error)
        return ctx.response(throttle_time_ms=0, error_code=error, groups=[])
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE,
                        groups=[cls(group_id=gid, protocol_type=ptype)
                                for gid, ptype in coord.list_groups()])


@handler(ApiKey.DeleteGroups)
async def delete_groups(ctx: RequestContext, request: Any) -> HandlerResult:
    cls = response_type(ApiKey.DeleteGroups).DeletableGroupResult
    names = list(request.groups_names)

    def build(results: dict[str, ErrorCode]) -> ApiMessage:
        return ctx.response(throttle_time_ms=0, results=[
            cls(group_id=gid, error_code=results.get(gid, ErrorCode.NONE)) for gid in names])

    coord = coordinator(ctx)
    if coord is None:
        return build(dict.fromkeys(names, ErrorCode.COORDINATOR_NOT_AVAILABLE))
    reply: Reply[dict[str, ErrorCode]] = Reply(ctx, build)
    coord.delete_groups(names, reply)
    return reply.result()
