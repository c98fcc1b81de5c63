"""InitProducerId v0-v5: a producer id and epoch for an idempotent or transactional producer.

Without a transactional id, every call gets a fresh producer id at epoch 0. With one, the
transaction coordinator (``coordinator.transactions``) answers: the id's producer id with its
epoch bumped, fencing any earlier instance and aborting the transaction it left open. From v3 a
producer may name its current id and epoch (KIP-360): a transactional producer recovers its id
with them; Kafka ignores them for a producer without a transactional id and allocates a new id,
but refuses a pair with only one half set (INVALID_REQUEST). PRODUCER_FENCED is v4+; older
clients get INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..offload import run_io
from ..server import authz
from ..server.bodies import InitProducerIdRequest
from ..server.context import HandlerContext, HandlerResult
from ..storage import StorageError
from .transactions import fencing_error

_NO_PRODUCER_ID = -1
_NO_PRODUCER_EPOCH = -1


async def handle_init_producer_id(ctx: HandlerContext,
                                  request: InitProducerIdRequest) -> HandlerResult:
    expected_id, expected_epoch = _NO_PRODUCER_ID, _NO_PRODUCER_EPOCH
    if ctx.version >= 3:
        expected_id, expected_epoch = request.producer_id, request.producer_epoch
        if (expected_id == _NO_PRODUCER_ID) != (expected_epoch == _NO_PRODUCER_EPOCH):
            return _refused(ctx, ErrorCode.INVALID_REQUEST)
    if request.transactional_id is not None:
        if not request.transactional_id:
            return _refused(ctx, ErrorCode.INVALID_REQUEST)
        if not authz.transactional_id(ctx, authz.WRITE, request.transactional_id):
            return _refused(ctx, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        error, producer_id, epoch = await ctx.broker.transactions.init_producer_id(
            request.transactional_id, request.transaction_timeout_ms,
            expected_id=expected_id, expected_epoch=expected_epoch)
        if error:
            return _refused(ctx, fencing_error(ctx, ApiKey.InitProducerId, error))
        return ctx.response(throttle_time_ms=0, error_code=0, producer_id=producer_id,
                            producer_epoch=epoch)
    if not (authz.cluster(ctx, authz.IDEMPOTENT_WRITE)
            or authz.any_resource(ctx, authz.WRITE, authz.TOPIC)):
        return _refused(ctx, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        producer_id = await run_io(ctx.broker.producer_ids.allocate)
    except (OSError, StorageError):  # the id block could not be reserved; clients retry it
        return _refused(ctx, ErrorCode.KAFKA_STORAGE_ERROR)
    return ctx.response(throttle_time_ms=0, error_code=0, producer_id=producer_id,
                        producer_epoch=0)


def _refused(ctx: HandlerContext, error: ErrorCode) -> HandlerResult:
    return ctx.response(throttle_time_ms=0, error_code=error, producer_id=_NO_PRODUCER_ID,
                        producer_epoch=_NO_PRODUCER_EPOCH)
