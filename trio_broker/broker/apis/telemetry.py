"""GetTelemetrySubscriptions v0 and PushTelemetry v0 (KIP-714): "no subscription".

Why answer at all: clients of KIP-714 (librdkafka, the Java client) ask for a subscription when
the broker advertises the API. This broker has no client-metrics subscriptions and no metrics
receiver, so it answers as Kafka does for a client no subscription matches: no requested metrics
(the client then pushes nothing), Kafka's default push interval (5 minutes, after which the client
asks again), its compression types and size limit. A client that pushes anyway is checked the
way Kafka checks it (terminating state, push interval, subscription id, codec, size) and its
metrics are dropped: there is nowhere to export them.

State per client instance (when it last asked, when it last pushed) lives in the broker state
(``telemetry_state.py``).
"""

from __future__ import annotations

import time
import uuid

from ...protocol.errors import ErrorCode
from ..server.bodies import GetTelemetrySubscriptionsRequest, PushTelemetryRequest
from ..server.context import HandlerContext, HandlerResult
from ..server.telemetry_state import PUSH_INTERVAL_MS, ClientInstance

#: telemetry.max.bytes default
TELEMETRY_MAX_BYTES = 1024 * 1024
#: codecs a client may push with: zstd, lz4, gzip, snappy (Kafka's order)
ACCEPTED_COMPRESSION_TYPES = [4, 3, 1, 2]
_ZERO_ID = uuid.UUID(int=0)
_RESERVED_IDS = (_ZERO_ID, uuid.UUID(int=1))


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


async def handle_get_telemetry_subscriptions(
        ctx: HandlerContext, request: GetTelemetrySubscriptionsRequest) -> HandlerResult:
    client_id = request.client_instance_id
    if client_id is None or client_id == _ZERO_ID:
        client_id = uuid.uuid4()
    now = _now_ms()
    instance = ctx.broker.telemetry.instance(client_id, now)
    if now - max(instance.last_get_ms, instance.last_push_ms) < PUSH_INTERVAL_MS:
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED)
    instance.last_get_ms = now
    return ctx.response(
        throttle_time_ms=0, error_code=0, client_instance_id=client_id,
        subscription_id=instance.subscription_id,
        accepted_compression_types=ACCEPTED_COMPRESSION_TYPES, push_interval_ms=PUSH_INTERVAL_MS,
        telemetry_max_bytes=TELEMETRY_MAX_BYTES, delta_temporality=True, requested_metrics=[])


async def handle_push_telemetry(ctx: HandlerContext,
                                request: PushTelemetryRequest) -> HandlerResult:
    client_id = request.client_instance_id
    if client_id is None or client_id in _RESERVED_IDS:
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST)
    now = _now_ms()
    instance = ctx.broker.telemetry.instance(client_id, now)
    try:
        error = _push_error(instance, request, now)
    finally:
        instance.terminating = request.terminating
    return ctx.response(throttle_time_ms=0, error_code=error)


def _push_error(instance: ClientInstance, request: PushTelemetryRequest, now: int) -> int:
    if instance.terminating:
        return ErrorCode.INVALID_REQUEST
    # a push right after asking is fine (clients add jitter), else one per interval
    if instance.last_get_ms <= instance.last_push_ms and \
            now - instance.last_push_ms < PUSH_INTERVAL_MS and not request.terminating:
        return ErrorCode.THROTTLING_QUOTA_EXCEEDED
    instance.last_push_ms = now
    if request.subscription_id != instance.subscription_id:
        return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    if not 0 <= request.compression_type <= 4:  # Kafka: any codec it knows
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    if request.metrics is not None and len(request.metrics) > TELEMETRY_MAX_BYTES:
        return ErrorCode.TELEMETRY_TOO_LARGE
    return 0
