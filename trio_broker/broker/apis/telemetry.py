"""GetTelemetrySubscriptions v0 and PushTelemetry v0 (KIP-714): client metrics, received.

Why served and advertised: Kafka passes what clients push to a metrics reporter plugin; this
broker is its own receiver. A client is told the metrics of the CLIENT_METRICS subscriptions
that match it (``server/client_metrics.py``; ``telemetry.subscribe.all`` adds all metrics for
every client), pushes them compressed as OTLP, and the broker decodes them
(``server/otlp.py``) and keeps them per client instance (``server/telemetry_state.py``) for
``/metrics`` and the console. A client no subscription matches is told no metrics at Kafka's
default interval (5 minutes), as Kafka answers it, and pushes nothing.

Kafka's checks, in Kafka's order (``ClientMetricsManager``): a Get before the push interval
is throttled (unless the last answer was UNKNOWN_SUBSCRIPTION_ID or
UNSUPPORTED_COMPRESSION_TYPE, after which a client must ask again); a push is refused after a
terminating push (INVALID_REQUEST), before its interval (THROTTLING_QUOTA_EXCEEDED, a
terminating push excepted), for a subscription the client no longer has (UNKNOWN_SUBSCRIPTION_ID,
also once the subscriptions changed), for a codec Kafka does not know
(UNSUPPORTED_COMPRESSION_TYPE), over ``telemetry.max.bytes`` (TELEMETRY_TOO_LARGE), and for a
payload that does not decode (INVALID_RECORD).

Why cumulative (``delta_temporality`` false) where Kafka asks for deltas: Kafka's reporters
forward to OTLP back ends that sum deltas; Prometheus scrapes totals, which a cumulative push
gives as they are. A client that pushes deltas anyway is summed here.
"""

from __future__ import annotations

import logging
import uuid

from ...protocol.errors import ErrorCode
from ..server import client_metrics as cm
from ..server.bodies import GetTelemetrySubscriptionsRequest, PushTelemetryRequest
from ..server.context import HandlerContext, HandlerResult
from ..server.telemetry_state import PUSH_INTERVAL_MS, ClientInstance, record

LOGGER = logging.getLogger(__name__)

#: codecs a client may push with: zstd, lz4, gzip, snappy (Kafka's order)
ACCEPTED_COMPRESSION_TYPES = [4, 3, 1, 2]
_ZERO_ID = uuid.UUID(int=0)
_RESERVED_IDS = (_ZERO_ID, uuid.UUID(int=1))
#: errors after which a client asks again at once, and is not throttled for it
_ASK_AGAIN = (ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)


def _client(ctx: HandlerContext, instance_id: uuid.UUID) -> dict[str, str]:
    name, version = ctx.broker.telemetry.software_of(ctx.connection_id)
    return {cm.CLIENT_INSTANCE_ID: str(instance_id), cm.CLIENT_ID: ctx.client_id,
            cm.CLIENT_SOFTWARE_NAME: name, cm.CLIENT_SOFTWARE_VERSION: version,
            cm.CLIENT_SOURCE_ADDRESS: ctx.client_host,
            cm.CLIENT_SOURCE_PORT: str(ctx.request.client_port)}


def _new_instance(ctx: HandlerContext, instance_id: uuid.UUID, now: int) -> ClientInstance:
    """The instance with the subscription that matches it now (Kafka's union of the matching
    subscriptions' metrics at the shortest of their intervals)."""
    broker = ctx.broker
    client = _client(ctx, instance_id)
    matching = [s for s in broker.client_metrics.subscriptions() if s.matches(client)]
    if broker.config.telemetry_subscribe_all:
        matching.append(cm.subscribe_all(broker.config.telemetry_subscribe_all_interval_ms))
    metrics: tuple[str, ...] = ()
    interval = PUSH_INTERVAL_MS
    if matching:
        names = {m for s in matching for m in s.metrics}
        # KIP-714: one empty prefix asks for every metric
        metrics = ("",) if cm.ALL_SUBSCRIBED_METRICS in names else tuple(sorted(names))
        interval = min(s.interval_ms for s in matching)
    instance = ClientInstance(instance_id, now, requested_metrics=metrics,
                              push_interval_ms=interval,
                              subscriptions_version=broker.client_metrics.version)
    instance.client_id = client[cm.CLIENT_ID]
    instance.software_name = client[cm.CLIENT_SOFTWARE_NAME]
    instance.software_version = client[cm.CLIENT_SOFTWARE_VERSION]
    instance.source = (ctx.client_host, ctx.request.client_port)
    return instance


def _instance(ctx: HandlerContext, instance_id: uuid.UUID, now: int) -> ClientInstance:
    state = ctx.broker.telemetry
    found = state.get(instance_id, now)
    if found is not None and found.subscriptions_version == ctx.broker.client_metrics.version:
        state.heard_on(found, ctx.connection_id)
        return found
    fresh = _new_instance(ctx, instance_id, now)
    if found is not None:  # the subscriptions changed: keep its times, series and error
        fresh.last_get_ms, fresh.last_push_ms = found.last_get_ms, found.last_push_ms
        fresh.last_error, fresh.terminating = found.last_error, found.terminating
        fresh.terminated_ms = found.terminated_ms
        fresh.series, fresh.dropped_series = found.series, found.dropped_series
    state.heard_on(fresh, ctx.connection_id)
    return state.put(instance_id, fresh)


async def handle_get_telemetry_subscriptions(
        ctx: HandlerContext, request: GetTelemetrySubscriptionsRequest) -> HandlerResult:
    instance_id = request.client_instance_id
    if instance_id is None or instance_id == _ZERO_ID:
        instance_id = uuid.uuid4()
    now = ctx.broker.now_ms()
    instance = _instance(ctx, instance_id, now)
    if now - max(instance.last_get_ms, instance.last_push_ms) < instance.push_interval_ms \
            and instance.last_error not in _ASK_AGAIN:
        instance.last_error = ErrorCode.THROTTLING_QUOTA_EXCEEDED
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED)
    instance.last_get_ms = now
    instance.last_error = 0
    return ctx.response(
        throttle_time_ms=0, error_code=0, client_instance_id=instance_id,
        subscription_id=instance.subscription_id,
        accepted_compression_types=ACCEPTED_COMPRESSION_TYPES,
        push_interval_ms=instance.push_interval_ms,
        telemetry_max_bytes=ctx.broker.config.telemetry_max_bytes, delta_temporality=False,
        requested_metrics=list(instance.requested_metrics))


async def handle_push_telemetry(ctx: HandlerContext,
                                request: PushTelemetryRequest) -> HandlerResult:
    instance_id = request.client_instance_id
    if instance_id is None or instance_id in _RESERVED_IDS:
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST)
    now = ctx.broker.now_ms()
    instance = _instance(ctx, instance_id, now)
    error = _push_error(ctx, instance, request, now)
    instance.last_error = error
    if request.terminating and not instance.terminating:
        instance.terminating, instance.terminated_ms = True, now
    return ctx.response(throttle_time_ms=0, error_code=error)


def _push_error(ctx: HandlerContext, instance: ClientInstance, request: PushTelemetryRequest,
                now: int) -> int:
    if instance.terminating:
        return ErrorCode.INVALID_REQUEST
    # a push right after asking is fine (clients add jitter), else one per interval
    if instance.last_get_ms <= instance.last_push_ms and \
            now - instance.last_push_ms < instance.push_interval_ms and not request.terminating:
        return ErrorCode.THROTTLING_QUOTA_EXCEEDED
    instance.last_push_ms = now
    if request.subscription_id != instance.subscription_id:
        return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    if not 0 <= request.compression_type <= 4:  # Kafka: any codec it knows
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    max_bytes = ctx.broker.config.telemetry_max_bytes
    if request.metrics is not None and len(request.metrics) > max_bytes:
        return ErrorCode.TELEMETRY_TOO_LARGE
    if request.metrics:
        from ..server.otlp import InvalidMetrics, decode

        try:
            # decompressed, a payload may be larger than on the wire, within reason
            points = decode(request.compression_type, request.metrics, 16 * max_bytes)
        except InvalidMetrics as exc:
            LOGGER.debug("Client instance %s pushed metrics that do not decode: %s",
                         request.client_instance_id, exc)
            return ErrorCode.INVALID_RECORD
        record(instance, [((p.name, p.labels), p.kind, p.value, p.delta) for p in points])
    return 0
