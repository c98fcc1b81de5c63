"""DescribeClientQuotas and AlterClientQuotas (v0-v1): client quotas over the wire.

Why Kafka's rules: ``kafka-configs --entity-type users --entity-name alice --alter --add-config
producer_byte_rate=1048576`` and the admin clients' ``alter_client_quotas`` send these; DESCRIBE
or ALTER of configs on the cluster is required (CLUSTER_AUTHORIZATION_FAILED), a bad entity,
key or value is INVALID_REQUEST for its entry, and ``validate_only`` checks without storing. A
change is written to disk before it is answered and governs the next request.
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import response_type
from ..offload import run_io
from ..security.client_quotas import (
    CLIENT_ID,
    IP,
    USER,
    Entity,
    QuotaError,
    entity_of,
    validate,
)
from ..server import authz
from ..server.bodies import RequestBody
from ..server.context import HandlerContext, HandlerResult

_D = response_type(ApiKey.DescribeClientQuotas)
_A = response_type(ApiKey.AlterClientQuotas)
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


async def handle_describe_client_quotas(ctx: HandlerContext,
                                        request: RequestBody) -> HandlerResult:
    if not authz.cluster(ctx, authz.DESCRIBE_CONFIGS):
        return _describe_error(ctx, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    wanted: dict[str, tuple[int, str | None]] = {}
    for c in request.components:
        if c.entity_type in wanted:
            return _describe_error(ctx, ErrorCode.INVALID_REQUEST,
                                   f"Duplicate {c.entity_type} filter component entity type")
        if c.entity_type not in (USER, CLIENT_ID, IP) or c.match_type not in (
                EXACT, DEFAULT, SPECIFIED) or (c.match_type == EXACT and c.match is None):
            return _describe_error(ctx, ErrorCode.INVALID_REQUEST,
                                   f"Invalid filter component {c.entity_type}/{c.match_type}")
        wanted[c.entity_type] = (c.match_type, c.match)
    entity_cls = _D.EntryData.EntityData
    entries = []
    for entity, values in sorted(ctx.broker.quotas.entries().items(), key=lambda kv: repr(kv)):
        if not _matches(entity, wanted, request.strict):
            continue
        entries.append(_D.EntryData(
            entity=[entity_cls(entity_type=t, entity_name=n) for t, n in entity],
            values=[_D.EntryData.ValueData(key=k, value=v) for k, v in sorted(values.items())]))
    return ctx.response(throttle_time_ms=0, error_code=0, error_message=None, entries=entries)


def _matches(entity: Entity, wanted: dict[str, tuple[int, str | None]], strict: bool) -> bool:
    names = dict(entity)
    if strict and set(names) != set(wanted):
        return False
    for entity_type, (match_type, match) in wanted.items():
        if entity_type not in names:
            return False
        name = names[entity_type]
        if match_type == EXACT and name != match:
            return False
        if match_type == DEFAULT and name is not None:
            return False
        if match_type == SPECIFIED and name is None:
            return False
    return True


def _describe_error(ctx: HandlerContext, error: int, message: str | None) -> HandlerResult:
    return ctx.response(throttle_time_ms=0, error_code=error, error_message=message,
                        entries=None)


async def handle_alter_client_quotas(ctx: HandlerContext, request: RequestBody) -> HandlerResult:
    allowed = authz.cluster(ctx, authz.ALTER_CONFIGS)
    results: list[tuple[Any, int, str | None]] = []
    changes: list[tuple[Entity, list[tuple[str, float, bool]]]] = []
    seen: set[Entity] = set()
    for entry in request.entries:
        entity = entity_of((e.entity_type, e.entity_name) for e in entry.entity)
        ops = [(op.key, op.value, op.remove) for op in entry.ops]
        if not allowed:
            results.append((entry, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None))
            continue
        try:
            if entity in seen:
                raise QuotaError("Duplicate quota entity")
            if len({k for k, _, _ in ops}) != len(ops):
                raise QuotaError("Duplicate quota key")
            validate(entity, ops)
        except QuotaError as exc:
            results.append((entry, ErrorCode.INVALID_REQUEST, str(exc)))
            continue
        seen.add(entity)
        changes.append((entity, ops))
        results.append((entry, ErrorCode.NONE, None))
    if changes and not request.validate_only:
        try:
            await run_io(ctx.broker.quotas.alter, changes)  # fsync
        except OSError as exc:
            # a disk failure: Kafka's answer for a KafkaStorageException
            results = [(e, ErrorCode.KAFKA_STORAGE_ERROR, f"cannot store the quotas: {exc}")
                       if code == 0 else (e, code, m) for e, code, m in results]
    entity_cls = _A.EntryData.EntityData
    return ctx.response(throttle_time_ms=0, entries=[
        _A.EntryData(error_code=code, error_message=message, entity=[
            entity_cls(entity_type=e.entity_type, entity_name=e.entity_name)
            for e in entry.entity])
        for entry, code, message in results])
