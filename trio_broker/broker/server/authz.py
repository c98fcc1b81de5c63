"""The authorizer as handlers ask it: one call per check, free when authorization is off.

Why a module of small functions: every handler checks where Kafka's ``KafkaApis`` does, with the
request's principal and client host; without ``authorizer.class.name`` each check is one
attribute test, so the data path pays nothing for authorization it does not use.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TypeVar

from ...protocol.errors import ErrorCode
from ..security.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, Operation, ResourceType
from .bodies import RequestBody
from .context import HandlerContext

#: the refusals, one INFO line each (Kafka's ``kafka.authorizer.logger``)
DENIED = logging.getLogger("trio_broker.authorizer")

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID
READ, WRITE, CREATE, DELETE = Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE
ALTER, DESCRIBE, CLUSTER_ACTION = Operation.ALTER, Operation.DESCRIBE, Operation.CLUSTER_ACTION
DESCRIBE_CONFIGS, ALTER_CONFIGS = Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS
IDEMPOTENT_WRITE = Operation.IDEMPOTENT_WRITE


def authorize(ctx: HandlerContext, operation: Operation, resource_type: ResourceType,
              name: str) -> bool:
    """May this request's principal, from its host, do ``operation`` on the resource?"""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return True
    if authorizer.authorize(ctx.principal, ctx.client_host, operation, resource_type, name):
        return True
    # Kafka's kafka.authorizer.logger line for a refused action (filtered listings log nothing)
    DENIED.info("Principal = %s is Denied operation = %s from host = %s on resource = %s:%s:%s",
                ctx.principal or "User:ANONYMOUS", operation.name, ctx.client_host,
                resource_type.name, "LITERAL", name)
    return False


def topic(ctx: HandlerContext, operation: Operation, name: str) -> bool:
    return authorize(ctx, operation, TOPIC, name)


def group(ctx: HandlerContext, operation: Operation, name: str) -> bool:
    return authorize(ctx, operation, GROUP, name)


def transactional_id(ctx: HandlerContext, operation: Operation, name: str) -> bool:
    return authorize(ctx, operation, TRANSACTIONAL_ID, name)


def cluster(ctx: HandlerContext, operation: Operation) -> bool:
    return authorize(ctx, operation, CLUSTER, CLUSTER_NAME)


def topics(ctx: HandlerContext, operation: Operation, names: Iterable[str]) -> set[str]:
    """The names among ``names`` the principal may ``operation`` (all when authorization is
    off)."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return set(names)
    principal, host = ctx.principal, ctx.client_host
    return {n for n in names if authorizer.authorize(principal, host, operation, TOPIC, n)}


def any_resource(ctx: HandlerContext, operation: Operation, resource_type: ResourceType) -> bool:
    """Kafka's ``authorizeByResourceType``: allowed on some resource of the type."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize_any(ctx.principal, ctx.client_host, operation, resource_type)


def operations(ctx: HandlerContext, resource_type: ResourceType, name: str) -> frozenset[int]:
    """The principal's authorized operations on a resource (KIP-430): every supported
    operation when authorization is off."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return frozenset(int(op) for op in SUPPORTED_OPERATIONS[resource_type])
    return authorizer.authorized_operations(ctx.principal, ctx.client_host, resource_type, name)


def produce_error(ctx: HandlerContext, transactional_id: str | None, name: str | None) -> int:
    """Kafka's Produce checks: WRITE on the transactional id, then WRITE on the topic; the
    error code for every partition of the topic, 0 when allowed."""
    if ctx.broker.authorizer is None:
        return 0
    if transactional_id is not None and not authorize(ctx, WRITE, TRANSACTIONAL_ID,
                                                      transactional_id):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if name is not None and not topic(ctx, WRITE, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return 0


def fetch_denied(ctx: HandlerContext, request: RequestBody, version: int) -> frozenset[str]:
    """The topics of a Fetch the principal may not READ (a follower's fetch, which names a
    replica, needs CLUSTER_ACTION on the cluster instead: Kafka's ``handleFetchRequest``)."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return frozenset()
    logs = ctx.broker.logs
    names = {logs.topic_name(t.topic_id) if version >= 13 else t.topic for t in request.topics}
    named = {n for n in names if n is not None}
    holder = getattr(request, "replica_state", None) if version >= 15 else request
    replica = getattr(holder, "replica_id", -1)
    if replica is not None and replica >= 0:
        return frozenset() if cluster(ctx, CLUSTER_ACTION) else frozenset(named)
    return frozenset(named - topics(ctx, READ, named))


def coordinator_error(ctx: HandlerContext, key_type: int, key: str) -> int:
    """FindCoordinator: DESCRIBE on the group (key type 0) or transactional id (1)."""
    if key_type == 0:
        return 0 if group(ctx, DESCRIBE, key) else ErrorCode.GROUP_AUTHORIZATION_FAILED
    if transactional_id(ctx, DESCRIBE, key):
        return 0
    return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def offset_errors(ctx: HandlerContext, group_operation: Operation, group_id: str,
                  topic_operation: Operation, partitions: Iterable[tuple[str, int]],
                  ) -> dict[tuple[str, int], ErrorCode]:
    """OffsetCommit/OffsetDelete/TxnOffsetCommit: every partition refused when the group is
    not allowed (GROUP_AUTHORIZATION_FAILED), else those of topics not allowed
    (TOPIC_AUTHORIZATION_FAILED)."""
    if ctx.broker.authorizer is None:
        return {}
    if not group(ctx, group_operation, group_id):
        return dict.fromkeys(partitions, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    asked = list(partitions)
    allowed = topics(ctx, topic_operation, {t for t, _ in asked})
    return {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in asked if tp[0] not in allowed}


_T = TypeVar("_T")


def visible_offsets(ctx: HandlerContext, found: list[tuple[tuple[str, int], _T]], *,
                    explicit: bool) -> tuple[list[tuple[tuple[str, int], _T]],
                                             dict[tuple[str, int], ErrorCode]]:
    """OffsetFetch: partitions of topics the principal may not DESCRIBE are answered
    TOPIC_AUTHORIZATION_FAILED when named, and left out of an "all topics" answer."""
    if ctx.broker.authorizer is None or not found:
        return found, {}
    allowed = topics(ctx, DESCRIBE, {tp[0] for tp, _ in found})
    if explicit:
        return found, {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp, _ in found
                       if tp[0] not in allowed}
    return [(tp, v) for tp, v in found if tp[0] in allowed], {}


def may_create_topic(ctx: HandlerContext, name: str) -> bool:
    """CreateTopics and auto-creation: CREATE on the cluster, or on the topic."""
    return cluster(ctx, CREATE) or topic(ctx, CREATE, name)


def add_partitions_errors(ctx: HandlerContext, txn_id: str, partitions: list[tuple[str, int]],
                          ) -> dict[tuple[str, int], ErrorCode]:
    """AddPartitionsToTxn v0-v3, Kafka's answer when refused (empty when allowed): every
    partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED without WRITE on the id; else the topics
    without WRITE TOPIC_AUTHORIZATION_FAILED and the rest OPERATION_NOT_ATTEMPTED."""
    if ctx.broker.authorizer is None:
        return {}
    if not transactional_id(ctx, WRITE, txn_id):
        return dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    allowed = topics(ctx, WRITE, {t for t, _ in partitions})
    if all(t in allowed for t, _ in partitions):
        return {}
    return {tp: ErrorCode.OPERATION_NOT_ATTEMPTED if tp[0] in allowed
            else ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in partitions}


def txn_offset_commit_errors(ctx: HandlerContext, txn_id: str, group_id: str,
                             partitions: list[tuple[str, int]],
                             ) -> dict[tuple[str, int], ErrorCode]:
    """TxnOffsetCommit: WRITE on the transactional id, then READ on the group and topics."""
    if ctx.broker.authorizer is None:
        return {}
    if not transactional_id(ctx, WRITE, txn_id):
        return dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    return offset_errors(ctx, READ, group_id, READ, partitions)


#: DescribeConfigs/AlterConfigs resource types (Kafka's ``ConfigResource.Type``)
_CONFIG_TOPIC, _CONFIG_BROKER, _CONFIG_BROKER_LOGGER, _CONFIG_GROUP = 2, 4, 8, 32
_CONFIG_CLIENT_METRICS = 16


def config_error(ctx: HandlerContext, operation: Operation, resource_type: int,
                 name: str) -> int:
    """The configs APIs: DESCRIBE_CONFIGS/ALTER_CONFIGS on the topic, the group or (brokers,
    loggers, client-metrics subscriptions) the cluster; 0 when allowed."""
    if ctx.broker.authorizer is None:
        return 0
    if resource_type == _CONFIG_TOPIC:
        return 0 if topic(ctx, operation, name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if resource_type == _CONFIG_GROUP:
        return 0 if group(ctx, operation, name) else ErrorCode.GROUP_AUTHORIZATION_FAILED
    if resource_type in (_CONFIG_BROKER, _CONFIG_BROKER_LOGGER, _CONFIG_CLIENT_METRICS):
        return 0 if cluster(ctx, operation) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return 0
