"""Fetch: whole batches from each partition's log, long-polled through the purgatory.

Why it reads, then parks: most fetches find data at once and are answered by the handler. One
that finds fewer than ``min_bytes`` is parked (``purgatory.py``) and re-read when enough data was
appended to the partitions it watches or its ``max_wait_ms`` passes; the handler is free at once.
Batches are returned as the log stores them (KIP-74: the first batch even when it exceeds the
limits); fetch sessions are answered with session id 0, so clients keep sending full fetches.
"""

from __future__ import annotations

import trio

from ..log import StorageError
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.messages import response_type
from .bodies import FetchRequest, ResponseBody, Struct
from .context import DEFERRED, HandlerContext, HandlerResult
from .purgatory import DelayedOperation
from .state import BrokerState

_R = response_type(ApiKey.Fetch)
_TopicResp = _R.FetchableTopicResponse
_PartResp = _TopicResp.PartitionData


async def handle_fetch(ctx: HandlerContext, request: FetchRequest) -> HandlerResult:
    topics, total, errors = read_partitions(ctx.broker, request)
    keys = [(t.topic, p.partition) for t in request.topics for p in t.partitions]
    if request.max_wait_ms <= 0 or total >= request.min_bytes or errors or not keys:
        return _response(ctx, topics)

    def complete() -> None:
        again, _, _ = read_partitions(ctx.broker, request)
        ctx.respond(_response(ctx, again))

    op = DelayedOperation(keys, deadline=trio.current_time() + request.max_wait_ms / 1000,
                          min_bytes=request.min_bytes, accumulated_bytes=total,
                          complete=complete)
    ctx.broker.fetch_purgatory.park(op)
    return DEFERRED


def _response(ctx: HandlerContext, topics: list[Struct]) -> ResponseBody:
    return ctx.response(throttle_time_ms=0, error_code=0, session_id=0, responses=topics)


def read_partitions(broker: BrokerState,
                    request: FetchRequest) -> tuple[list[Struct], int, int]:
    """(topic responses, bytes read, partitions in error) honouring max_bytes and KIP-74."""
    logs = broker.logs
    remaining = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    total = 0
    errors = 0
    first_data = True
    out = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            log = logs.get_log(t.topic, p.partition)
            if log is None:
                offline = (t.topic, p.partition) in logs.offline_partitions
                errors += 1
                parts.append(_part(p.partition, ErrorCode.KAFKA_STORAGE_ERROR if offline
                                   else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            limit = min(p.partition_max_bytes, remaining)
            try:
                data = log.read(p.fetch_offset, max(limit, 0), min_one_batch=first_data)
            except StorageError as exc:
                errors += 1
                parts.append(_part(p.partition, exc.error_code, log.high_watermark,
                                   log.log_start_offset))
                continue
            n = len(data.records)
            if n:
                first_data = False
                remaining -= n
                total += n
            parts.append(_part(p.partition, 0, data.high_watermark, data.log_start_offset,
                               data.records, data.last_stable_offset))
        out.append(_TopicResp(topic=t.topic, partitions=parts))
    return out, total, errors


def _part(index: int, error: int, hw: int = -1, log_start: int = -1, records: bytes = b"",
          lso: int | None = None) -> Struct:
    return _PartResp(partition_index=index, error_code=error, high_watermark=hw,
                     last_stable_offset=hw if lso is None else lso, log_start_offset=log_start,
                     aborted_transactions=[], preferred_read_replica=-1, records=records)
