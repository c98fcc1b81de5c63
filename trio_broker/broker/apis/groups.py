"""Group membership APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups, ListGroups, DeleteGroups, every version Kafka 3.9 and 4.1 define.

Why thin: the group coordinator (``trio_broker.broker.coordinator``) owns every rule and state;
these handlers only translate between wire messages (what each version carries) and coordinator
calls. JoinGroup, SyncGroup and DeleteGroups may be answered later: the coordinator calls back,
``Reply`` turns an immediate callback into the handler's return value and a later one into
``ctx.respond``, so a held request never holds a handler task.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import response_type
from ..coordinator import JoinRequest, JoinResult, LeavingMember, SyncResult
from ..coordinator.internal_topics import OFFSETS_TOPIC, TRANSACTION_TOPIC
from ..offload import run_io
from ..server import authz
from ..server.bodies import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    ResponseBody,
    Struct,
    SyncGroupRequest,
)
from ..server.cluster_model import coordinator_address
from ..server.context import DEFERRED, HandlerContext, HandlerResult
from ..server.state import BrokerState
from ..storage import StorageError

LOGGER = logging.getLogger(__name__)

#: FindCoordinator key types: a consumer group, a transactional id (this node coordinates
#: both); a share group (key type 2) has no coordinator here, which Kafka answers as invalid.
_GROUP_KEY, _TRANSACTION_KEY = 0, 1
#: ListGroups' group type (and protocol type) of a share group
SHARE_GROUP_TYPE = "share"

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
    # A single broker coordinates every group and every transactional id; in a cluster, the
    # leader of the key's partition of the internal topic (``replicas.coordinator_for``).
    key_type = request.key_type if ctx.version >= 1 else _GROUP_KEY
    broker = ctx.broker
    known = key_type in (_GROUP_KEY, _TRANSACTION_KEY)
    error: int = ErrorCode.NONE if known else ErrorCode.INVALID_REQUEST
    node, (host, port) = ((broker.node_id, broker.advertised(ctx.listener)) if known
                          else (-1, ("", -1)))
    cluster = broker.cluster
    if known:  # Kafka makes the coordinator's internal topic on its first FindCoordinator
        await _ensure_internal_topic(broker, key_type)
    if ctx.version >= 4:  # a batch of keys (KIP-699)
        cls = response_type(ApiKey.FindCoordinator).Coordinator
        coordinators = []
        for key in request.coordinator_keys:
            refused = known and authz.coordinator_error(ctx, key_type, key)
            if known and not refused and not cluster.single:
                node, host, port, error = coordinator_address(cluster, key_type, key,
                                                              ctx.listener)
            coordinators.append(
                cls(key=key, node_id=-1, host="", port=-1, error_code=refused, error_message=None)
                if refused else
                cls(key=key, node_id=node, host=host, port=port, error_code=error,
                    error_message=None if known else _INVALID_REQUEST_MESSAGE))
        return ctx.response(throttle_time_ms=0, coordinators=coordinators)
    refused = known and authz.coordinator_error(ctx, key_type, request.key)
    if refused:
        return ctx.response(throttle_time_ms=0, error_code=refused, error_message=None,
                            node_id=-1, host="", port=-1)
    if known and not cluster.single:
        node, host, port, error = coordinator_address(cluster, key_type, request.key,
                                                      ctx.listener)
    # Kafka sets the error's name as the message of a successful answer, too.
    return ctx.response(throttle_time_ms=0, error_code=error,
                        error_message=ErrorCode(error).name if known else _INVALID_REQUEST_MESSAGE,
                        node_id=node, host=host, port=port)


async def _ensure_internal_topic(broker: BrokerState, key_type: int) -> None:
    internal = broker.internal_topics
    topic = OFFSETS_TOPIC if key_type == _GROUP_KEY else TRANSACTION_TOPIC
    if not internal.exists(topic):
        try:
            await run_io(internal.ensure, topic)
        except StorageError as exc:  # the coordinator works without it; its records wait
            LOGGER.error("creating internal topic %s failed: %s", topic, exc)


_INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or "
    "the message was sent to an incompatible broker. See the broker logs for more details.")


async def join_group(ctx: HandlerContext, request: JoinGroupRequest) -> HandlerResult:
    member_cls = response_type(ApiKey.JoinGroup).JoinGroupResponseMember
    version = ctx.version

    def build(r: JoinResult) -> ResponseBody:
        name = r.protocol_name if not r.error else None
        return ctx.response(
            throttle_time_ms=0, error_code=r.error, generation_id=r.generation_id,
            protocol_type=r.protocol_type if not r.error else None,
            protocol_name=name if version >= 7 or name is not None else "",
            leader=r.leader_id, skip_assignment=r.skip_assignment, member_id=r.member_id,
            members=[member_cls(member_id=mid, group_instance_id=iid, metadata=meta)
                     for mid, iid, meta in r.members])

    reason = request.reason if version >= 8 else None
    if reason:
        LOGGER.info("group %s: member %r joins; reason: %s", request.group_id,
                    request.member_id, reason)
    if not authz.group(ctx, authz.READ, request.group_id):
        return build(JoinResult(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    reply: Reply[JoinResult] = Reply(ctx, build)
    ctx.broker.groups.join_group(JoinRequest(
        group_id=request.group_id, member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 5 else None,
        client_id=ctx.client_id, client_host=client_host(ctx),
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else -1,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        require_known_member_id=version >= 4, supports_skip_assignment=version >= 9,
        reason=reason), reply)
    return reply.result()


async def sync_group(ctx: HandlerContext, request: SyncGroupRequest) -> HandlerResult:
    version = ctx.version

    def build(r: SyncResult) -> ResponseBody:
        return ctx.response(throttle_time_ms=0, error_code=r.error,
                            protocol_type=r.protocol_type, protocol_name=r.protocol_name,
                            assignment=r.assignment)

    reply: Reply[SyncResult] = Reply(ctx, build)
    if version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        # From v5 the protocol type and name are mandatory (Kafka checks before the group).
        reply(SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        return reply.result()
    if not authz.group(ctx, authz.READ, request.group_id):
        return build(SyncResult(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    ctx.broker.groups.sync_group(
        group_id=request.group_id, generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 3 else None,
        protocol_type=request.protocol_type if version >= 5 else None,
        protocol_name=request.protocol_name if version >= 5 else None,
        assignments=[(a.member_id, bytes(a.assignment)) for a in request.assignments],
        respond=reply)
    return reply.result()


async def heartbeat(ctx: HandlerContext, request: HeartbeatRequest) -> HandlerResult:
    if not authz.group(ctx, authz.READ, request.group_id):
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = ctx.broker.groups.heartbeat(
        group_id=request.group_id, generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if ctx.version >= 3 else None)
    return ctx.response(throttle_time_ms=0, error_code=error)


async def leave_group(ctx: HandlerContext, request: LeaveGroupRequest) -> HandlerResult:
    if ctx.version < 3:
        leaving = [LeavingMember(request.member_id)]
    else:
        leaving = [LeavingMember(m.member_id, m.group_instance_id,
                                 m.reason if ctx.version >= 5 else None)
                   for m in request.members]
    if not authz.group(ctx, authz.READ, request.group_id):
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                            members=[])
    error, errors = ctx.broker.groups.leave_group(request.group_id, leaving)
    await ctx.broker.groups.store.written()  # the group without them is durable first
    if ctx.version < 3:  # one member: its error is the answer's
        return ctx.response(throttle_time_ms=0, error_code=error or errors[0])
    if error:  # a group-level error is answered alone, as Kafka's error response
        return ctx.response(throttle_time_ms=0, error_code=error, members=[])
    cls = response_type(ApiKey.LeaveGroup).MemberResponse
    return ctx.response(throttle_time_ms=0, error_code=error, members=[
        cls(member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=e)
        for m, e in zip(leaving, errors, strict=True)])


async def describe_groups(ctx: HandlerContext, request: DescribeGroupsRequest) -> HandlerResult:
    cls = response_type(ApiKey.DescribeGroups).DescribedGroup
    member_cls = cls.DescribedGroupMember
    coord = ctx.broker.groups
    wants_operations = ctx.version >= 3 and request.include_authorized_operations
    groups = []
    for group_id in request.groups:
        if not authz.group(ctx, authz.DESCRIBE, group_id):
            groups.append(_group_error(cls, group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, ""))
            continue
        if not coord.loaded:
            groups.append(_group_error(cls, group_id, coord.not_ready_error, ""))
            continue
        summary = coord.describe_group(group_id)
        if summary is None:
            if ctx.version >= 6:  # KIP-1043: an unknown group is an error, no longer Dead
                groups.append(_group_error(cls, group_id, ErrorCode.GROUP_ID_NOT_FOUND, "Dead",
                                           coord.group_not_found_message(group_id)))
            else:  # before v6 Kafka describes an unknown group as Dead, without error
                groups.append(_group_error(cls, group_id, ErrorCode.NONE, "Dead"))
            continue
        groups.append(cls(
            error_code=ErrorCode.NONE, error_message=None, group_id=group_id,
            group_state=str(summary.state), protocol_type=summary.protocol_type,
            protocol_data=summary.protocol_name,
            members=[member_cls(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                client_id=m.client_id, client_host=m.client_host,
                                member_metadata=m.metadata, member_assignment=m.assignment)
                     for m in summary.members],
            authorized_operations=(authz.operations(ctx, authz.GROUP, group_id)
                                   if wants_operations else None)))
    return ctx.response(throttle_time_ms=0, groups=groups)


def _group_error(cls: Struct, group_id: str, error: ErrorCode, state: str,
                 message: str | None = None) -> Struct:
    return cls(error_code=error, error_message=message, group_id=group_id, group_state=state,
               protocol_type="", protocol_data="", members=[], authorized_operations=None)


async def list_groups(ctx: HandlerContext, request: ListGroupsRequest) -> HandlerResult:
    cls = response_type(ApiKey.ListGroups).ListedGroup
    coord = ctx.broker.groups
    if not coord.loaded:
        return ctx.response(throttle_time_ms=0, error_code=coord.not_ready_error, groups=[])
    states = request.states_filter if ctx.version >= 4 else []
    types = request.types_filter if ctx.version >= 5 else []
    # each node lists the groups it coordinates (admin clients ask every node and merge)
    cluster, node = ctx.broker.cluster, ctx.broker.node_id
    every = authz.cluster(ctx, authz.DESCRIBE)  # else only the groups it may describe
    listed = [(g.group_id, g.protocol_type, str(g.state), g.group_type)
              for g in coord.list_groups(states, types)]
    listed += _share_groups(ctx, states, types)
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=[
        cls(group_id=gid, protocol_type=protocol_type, group_state=state, group_type=group_type)
        for gid, protocol_type, state, group_type in listed
        if (cluster.single or cluster.coordinator_for(_GROUP_KEY, gid) == node)
        and (every or authz.group(ctx, authz.DESCRIBE, gid))])


def _share_groups(ctx: HandlerContext, states: list[str],
                  types: list[str]) -> list[tuple[str, str, str, str]]:
    """Share groups (KIP-932) as Kafka lists them: type and protocol type ``share``."""
    wanted = {s.strip().lower() for s in states}
    if types and SHARE_GROUP_TYPE not in (t.lower() for t in types):
        return []
    return [(g.group_id, SHARE_GROUP_TYPE, g.state, SHARE_GROUP_TYPE)
            for g in ctx.broker.shares.groups.values()
            if not wanted or g.state.lower() in wanted]


async def delete_groups(ctx: HandlerContext, request: DeleteGroupsRequest) -> HandlerResult:
    cls = response_type(ApiKey.DeleteGroups).DeletableGroupResult
    names = list(dict.fromkeys(request.groups_names))  # Kafka answers each group once

    refused = {gid: ErrorCode.GROUP_AUTHORIZATION_FAILED for gid in names
               if not authz.group(ctx, authz.DELETE, gid)}
    # share groups (KIP-932): deleted here, with their share-partitions' state, when empty
    shares = ctx.broker.shares
    shared = {gid: ErrorCode.NONE if shares.delete_group(gid) else ErrorCode.NON_EMPTY_GROUP
              for gid in names if gid in shares.groups and gid not in refused}
    refused.update(shared)

    def build(results: dict[str, ErrorCode]) -> ResponseBody:
        results = {**results, **refused}
        return ctx.response(throttle_time_ms=0, results=[
            cls(group_id=gid, error_code=results.get(gid, ErrorCode.NONE)) for gid in names])

    reply: Reply[dict[str, ErrorCode]] = Reply(ctx, build)
    ctx.broker.groups.delete_groups([gid for gid in names if gid not in refused], reply)
    return reply.result()
