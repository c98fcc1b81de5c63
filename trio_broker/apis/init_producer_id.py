"""InitProducerId v0-v5: a fresh producer id, epoch 0, for every idempotent (non-transactional)
producer.

Transactions are not implemented, so a transactional id is refused with a fatal error rather than
silently given non-transactional semantics. From v3 a producer may name its current id and
epoch (KIP-360); Kafka ignores them for a producer without a transactional id and allocates a
new id, but refuses a pair with only one half set (INVALID_REQUEST).
"""

from __future__ import annotations

import trio

from ..protocol.errors import ErrorCode
from .bodies import InitProducerIdRequest
from .context import HandlerContext, HandlerResult

_NO_PRODUCER_ID = -1
_NO_PRODUCER_EPOCH = -1


async def handle_init_producer_id(ctx: HandlerContext,
                                  request: InitProducerIdRequest) -> HandlerResult:
    if request.transactional_id is not None:
        return _refused(ctx, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if ctx.version >= 3 and ((request.producer_id == _NO_PRODUCER_ID)
                             != (request.producer_epoch == _NO_PRODUCER_EPOCH)):
        return _refused(ctx, ErrorCode.INVALID_REQUEST)
    try:
        producer_id = await trio.to_thread.run_sync(ctx.broker.producer_ids.allocate)
    except OSError:
        return _refused(ctx, ErrorCode.KAFKA_STORAGE_ERROR)
    return ctx.response(throttle_time_ms=0, error_code=0, producer_id=producer_id,
                        producer_epoch=0)


def _refused(ctx: HandlerContext, error: ErrorCode) -> HandlerResult:
    return ctx.response(throttle_time_ms=0, error_code=error, producer_id=_NO_PRODUCER_ID,
                        producer_epoch=_NO_PRODUCER_EPOCH)
