"""DescribeAcls, CreateAcls and DeleteAcls (v0-v3): the authorizer's ACLs over the wire.

Why here and not in the authorizer: these are Kafka's ``KafkaApis`` rules around the store:
DESCRIBE on the cluster to list, ALTER on the cluster to change (CLUSTER_AUTHORIZATION_FAILED),
SECURITY_DISABLED without an authorizer, INVALID_REQUEST for a binding or filter Kafka refuses.
v0 knows no pattern types: its bindings are LITERAL and its filters match LITERAL ones (the
codec fills the field in). A change is written to disk before it is answered and judges the
next request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import response_type
from ..offload import run_io
from ..security.acl import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    validate_binding,
)
from ..security.acl_store import AclStore
from ..server import authz
from ..server.bodies import RequestBody, Struct
from ..server.context import HandlerContext, HandlerResult

_DESCRIBE = response_type(ApiKey.DescribeAcls).DescribeAclsResource
_CREATE = response_type(ApiKey.CreateAcls).AclCreationResult
_DELETE = response_type(ApiKey.DeleteAcls).DeleteAclsFilterResult
_NO_AUTHORIZER = "No Authorizer is configured."
_E = TypeVar("_E", ResourceType, PatternType, Operation, Permission)


def _enum(cls: Callable[[int], _E], value: int) -> _E:
    try:
        return cls(value)
    except ValueError:
        return cls(0)  # UNKNOWN: refused below as Kafka refuses it


def _filter(f: Struct) -> AclFilter:
    return AclFilter(_enum(ResourceType, f.resource_type_filter), f.resource_name_filter,
                     _enum(PatternType, f.pattern_type_filter), f.principal_filter,
                     f.host_filter, _enum(Operation, f.operation),
                     _enum(Permission, f.permission_type))


def _store(ctx: HandlerContext) -> AclStore | None:
    return ctx.broker.authorizer


async def handle_describe_acls(ctx: HandlerContext, request: RequestBody) -> HandlerResult:
    store = _store(ctx)
    if store is None:
        return _describe_error(ctx, ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER)
    if not authz.cluster(ctx, authz.DESCRIBE):
        return _describe_error(ctx, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    acl_filter = _filter(request)
    invalid = acl_filter.invalid()
    if invalid is not None:
        return _describe_error(ctx, ErrorCode.INVALID_REQUEST, invalid)
    grouped: dict[tuple[int, str, int], list[AclBinding]] = {}
    for b in store.acls:
        if acl_filter.matches(b):
            grouped.setdefault((b.resource_type, b.name, b.pattern_type), []).append(b)
    described = _DESCRIBE.AclDescription
    resources = [
        _DESCRIBE(resource_type=rtype, resource_name=name, pattern_type=pattern, acls=[
            described(principal=b.principal, host=b.host, operation=b.operation,
                      permission_type=b.permission)
            for b in sorted(found, key=lambda b: (b.principal, b.host, b.operation,
                                                   b.permission))])
        for (rtype, name, pattern), found in sorted(grouped.items())]
    return ctx.response(throttle_time_ms=0, error_code=0, error_message=None,
                        resources=resources)


def _describe_error(ctx: HandlerContext, error: int, message: str | None) -> HandlerResult:
    return ctx.response(throttle_time_ms=0, error_code=error, error_message=message,
                        resources=[])


async def handle_create_acls(ctx: HandlerContext, request: RequestBody) -> HandlerResult:
    store = _store(ctx)
    creations = request.creations
    if store is None:
        return _create_response(ctx, [(ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER)] *
                                len(creations))
    if not authz.cluster(ctx, authz.ALTER):
        return _create_response(ctx, [(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)] *
                                len(creations))
    results: list[tuple[int, str | None]] = []
    valid: list[AclBinding] = []
    for c in creations:
        binding = AclBinding(_enum(ResourceType, c.resource_type), c.resource_name,
                             _enum(PatternType, c.resource_pattern_type), c.principal, c.host,
                             _enum(Operation, c.operation), _enum(Permission, c.permission_type))
        invalid = validate_binding(binding)
        if invalid is None:
            valid.append(binding)
            results.append((ErrorCode.NONE, None))
        else:
            results.append((ErrorCode.INVALID_REQUEST, invalid))
    if valid:
        try:
            await run_io(store.add, valid)  # fsync: off the event loop
        except OSError as exc:
            # a disk failure: Kafka's answer for a KafkaStorageException
            results = [(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot store the ACLs: {exc}")
                       if error == 0 else (error, message) for error, message in results]
    return _create_response(ctx, results)


def _create_response(ctx: HandlerContext, results: list[tuple[int, str | None]]
                     ) -> HandlerResult:
    return ctx.response(throttle_time_ms=0, results=[
        _CREATE(error_code=error, error_message=message) for error, message in results])


async def handle_delete_acls(ctx: HandlerContext, request: RequestBody) -> HandlerResult:
    store = _store(ctx)
    filters = request.filters
    if store is None or not authz.cluster(ctx, authz.ALTER):
        error, message = ((ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER) if store is None
                          else (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None))
        return ctx.response(throttle_time_ms=0, filter_results=[
            _DELETE(error_code=error, error_message=message, matching_acls=[])
            for _ in filters])
    parsed = [_filter(f) for f in filters]
    checked = [(f, f.invalid()) for f in parsed]
    try:
        matched = iter(await run_io(
            store.delete, [f for f, invalid in checked if invalid is None]))
    except OSError as exc:
        return ctx.response(throttle_time_ms=0, filter_results=[
            _DELETE(error_code=ErrorCode.KAFKA_STORAGE_ERROR,
                    error_message=f"cannot store the ACLs: {exc}", matching_acls=[])
            for _ in filters])
    matching = _DELETE.DeleteAclsMatchingAcl
    results = []
    for _, invalid in checked:
        if invalid is not None:
            results.append(_DELETE(error_code=ErrorCode.INVALID_REQUEST, error_message=invalid,
                                   matching_acls=[]))
            continue
        results.append(_DELETE(error_code=0, error_message=None, matching_acls=[
            matching(error_code=0, error_message=None, resource_type=b.resource_type,
                     resource_name=b.name, pattern_type=b.pattern_type, principal=b.principal,
                     host=b.host, operation=b.operation, permission_type=b.permission)
            for b in next(matched)]))
    return ctx.response(throttle_time_ms=0, filter_results=results)
