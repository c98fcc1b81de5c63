"""Fault injection and the request log of a test cluster, at one place: before the handler.

Why there: every request of every node passes the handler pool, so one wrapper around the
handlers (``cluster_handlers``) sees them all, knows which node received each one
(``ctx.broker.node_id``) and can answer instead of the handler: an injected error code, a
dropped connection, a delay. The same wrapper answers NOT_COORDINATOR for a group or
transaction request sent to a node that does not coordinate its key. A single broker never
installs the wrapper: its pool dispatches straight to the handlers.

Injected errors follow librdkafka's ``push_request_errors``: per API a queue of codes, each
taken by the next matching request (on the given node, or any), in order.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from ..broker.server.bodies import RequestBody
from ..broker.server.cluster_model import GROUP_KEY, TRANSACTION_KEY
from ..broker.server.context import CloseConnection, HandlerContext, HandlerResult
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from .fault_responses import error_response
from .fault_state import Faults, RequestRecord

Handler = Callable[[HandlerContext, RequestBody], Awaitable[HandlerResult]]


def cluster_handlers(handlers: Mapping[int, Handler], faults: Faults) -> dict[int, Handler]:
    """The handler table of a cluster node: each handler behind ``_intercepted``."""
    return {key: _intercepted(handler, faults) for key, handler in handlers.items()}


def _intercepted(handler: Handler, faults: Faults) -> Handler:
    async def run(ctx: HandlerContext, body: RequestBody) -> HandlerResult:
        broker = ctx.broker
        cluster = broker.cluster
        header = ctx.header
        node = broker.node_id
        faults.log.append(RequestRecord(node, header.api_name, header.api_key,
                                        header.api_version, ctx.client_id, time.time()))
        latency = faults.latency_s.get(node)
        if latency:
            await trio.sleep(latency)
        fault = faults.take(header.api_key, node)
        if fault is not None:
            if fault.disconnect:
                return CloseConnection("injected disconnect")
            assert fault.error is not None
            return error_response(ctx, body, fault.error)
        coordinator = _coordinator_key(header.api_key, header.api_version, body)
        if coordinator is not None and cluster.coordinator_for(*coordinator) != node:
            return error_response(ctx, body, ErrorCode.NOT_COORDINATOR)
        return await handler(ctx, body)

    return run


_GROUP_APIS = frozenset({ApiKey.JoinGroup, ApiKey.SyncGroup, ApiKey.Heartbeat,
                         ApiKey.LeaveGroup, ApiKey.OffsetCommit, ApiKey.TxnOffsetCommit,
                         ApiKey.OffsetDelete, ApiKey.ConsumerGroupHeartbeat})
_TXN_APIS = frozenset({ApiKey.AddOffsetsToTxn, ApiKey.EndTxn})


def _coordinator_key(api_key: int, version: int, body: Any) -> tuple[int, str] | None:
    """(key type, key) of a request that only its coordinator may answer, else None."""
    if api_key in _GROUP_APIS:
        return GROUP_KEY, body.group_id
    if api_key == ApiKey.OffsetFetch and version < 8:
        return GROUP_KEY, body.group_id
    if api_key in _TXN_APIS:
        return TRANSACTION_KEY, body.transactional_id
    if api_key == ApiKey.InitProducerId and body.transactional_id is not None:
        return TRANSACTION_KEY, body.transactional_id
    if api_key == ApiKey.AddPartitionsToTxn and version < 4:
        return TRANSACTION_KEY, body.v3_and_below_transactional_id
    return None
