"""The authorizer as handlers ask it: one call per check, free when authorization is off.

Why a module of small functions: every handler checks where Kafka's ``KafkaApis`` does, with the
request's principal and client host; without ``authorizer.class.name`` each check is one
attribute test, so the data path pays nothing for authorization it does not use.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..security.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, Operation, ResourceType
from .context import HandlerContext

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
    return authorizer.authorize(ctx.principal, ctx.client_host, operation, resource_type, name)


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
