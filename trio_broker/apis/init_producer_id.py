"""InitProducerId: a fresh producer id, epoch 0, for every idempotent (non-transactional) producer.

Transactions are not implemented, so a transactional id is refused with a fatal error rather than
silently given non-transactional semantics.
"""

from __future__ import annotations

import trio

from ..protocol.errors import ErrorCode
from .bodies import InitProducerIdRequest
from .context import HandlerContext, HandlerResult


async def handle_init_producer_id(ctx: HandlerContext,
                                  request: InitProducerIdRequest) -> HandlerResult:
    if request.transactional_id is not None:
        return ctx.response(throttle_time_ms=0,
                            error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                            producer_id=-1, producer_epoch=-1)
    try:
        producer_id = await trio.to_thread.run_sync(ctx.broker.producer_ids.allocate)
    except OSError:
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.KAFKA_STORAGE_ERROR,
                            producer_id=-1, producer_epoch=-1)
    return ctx.response(throttle_time_ms=0, error_code=0, producer_id=producer_id,
                        producer_epoch=0)
