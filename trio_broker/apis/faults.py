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
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import attrs
import trio

from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from .bodies import RequestBody
from .context import CloseConnection, HandlerContext, HandlerResult
from .fault_responses import error_response, supports_error

Handler = Callable[[HandlerContext, RequestBody], Awaitable[HandlerResult]]
#: FindCoordinator key types
GROUP_KEY, TRANSACTION_KEY = 0, 1
#: requests kept for ``requests()``: the oldest are dropped beyond this
REQUEST_LOG_SIZE = 10_000


@attrs.frozen
class RequestRecord:
    """One request a node received: what ``Cluster.requests()`` lists."""

    node_id: int
    api: str
    api_key: int
    version: int
    client_id: str
    #: wall-clock seconds (``time.time()``) when the node took it from its queue
    time: float

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class Fault:
    node_id: int | None
    error: int | None = None
    disconnect: bool = False


def api_key_of(api: str | int) -> ApiKey:
    """``"Produce"``, ``0`` or ``ApiKey.Produce`` -> ``ApiKey.Produce``."""
    if isinstance(api, str):
        try:
            return ApiKey[api]
        except KeyError:
            raise ValueError(f"unknown API {api!r}") from None
    return ApiKey(api)


def error_code_of(error: str | int) -> int:
    """``"NOT_LEADER_OR_FOLLOWER"`` or ``6`` -> 6."""
    if isinstance(error, str):
        try:
            return int(ErrorCode[error.upper()])
        except KeyError:
            raise ValueError(f"unknown error {error!r}") from None
    return int(ErrorCode(error))


class Faults:
    """Injected errors and disconnects per API, latency per node, and the request log."""

    def __init__(self) -> None:
        self._queues: dict[int, deque[Fault]] = {}
        self.latency_s: dict[int, float] = {}
        self.log: deque[RequestRecord] = deque(maxlen=REQUEST_LOG_SIZE)

    def inject(self, api: str | int, errors: Iterable[str | int] = (), *,
               node_id: int | None = None, disconnect: bool = False, count: int = 1) -> None:
        """The next requests of ``api`` (on ``node_id``, or any node) answer with ``errors`` in
        order; or, with ``disconnect=True``, the next ``count`` ones close their connection."""
        key = api_key_of(api)
        codes = [error_code_of(e) for e in errors]
        if disconnect == bool(codes):
            raise ValueError("give either errors or disconnect=True")
        if codes and not supports_error(key):
            raise ValueError(f"errors cannot be injected into {key.name} responses; "
                             "use disconnect=True")
        queue = self._queues.setdefault(int(key), deque())
        if disconnect:
            queue.extend(Fault(node_id, disconnect=True) for _ in range(count))
        else:
            queue.extend(Fault(node_id, error=code) for code in codes)

    def set_latency(self, node_id: int, ms: float) -> None:
        if ms <= 0:
            self.latency_s.pop(node_id, None)
        else:
            self.latency_s[node_id] = ms / 1000

    def clear(self) -> None:
        """Forget every injected fault and latency (the request log stays)."""
        self._queues.clear()
        self.latency_s.clear()

    def pending(self) -> dict[str, int]:
        return {ApiKey(k).name: len(q) for k, q in self._queues.items() if q}

    def take(self, api_key: int, node_id: int) -> Fault | None:
        queue = self._queues.get(api_key)
        if not queue:
            return None
        for i, fault in enumerate(queue):
            if fault.node_id is None or fault.node_id == node_id:
                del queue[i]
                return fault
        return None

    def requests(self) -> list[RequestRecord]:
        return list(self.log)


def cluster_handlers(handlers: Mapping[int, Handler]) -> dict[int, Handler]:
    """The handler table of a cluster node: each handler behind ``_intercepted``."""
    return {key: _intercepted(handler) for key, handler in handlers.items()}


def _intercepted(handler: Handler) -> Handler:
    async def run(ctx: HandlerContext, body: RequestBody) -> HandlerResult:
        broker = ctx.broker
        cluster = broker.cluster
        faults = cluster.faults
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
