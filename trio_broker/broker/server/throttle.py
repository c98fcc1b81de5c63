"""Client quotas on the request path: what a finished request cost, and its throttle time.

Why after the handler: Kafka records a Produce by its request size, a Fetch by what it answers
and every request by its handler time (``request_percentage``), then answers at once with
``throttle_time_ms`` and mutes the connection for that long (``ThrottledChannel``), so a
well-behaved client waits and a careless one is slowed anyway; no handler task waits. A
throttled fetch answers no data (the bytes are taken back from its sensor), as Kafka's does.
"""

from __future__ import annotations

import time
from typing import Any

from ...protocol.api_keys import ApiKey
from ..security.client_quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE
from ..storage.file_region import close_regions
from .bodies import ResponseBody
from .context import RequestContext
from .state import BrokerState

#: APIs the request quota never throttles (Kafka's exempt list: a client must be able to log in)
_EXEMPT = frozenset({ApiKey.ApiVersions, ApiKey.SaslHandshake, ApiKey.SaslAuthenticate})


def throttle_ms(broker: BrokerState, request: RequestContext, body: ResponseBody | None,
                request_bytes: int, handler_ns: int) -> int:
    """Record the request on its quotas and return the throttle time in ms (0: none); sets
    ``throttle_time_ms`` in ``body`` (and empties a throttled fetch's answer)."""
    quotas = broker.quotas
    if not quotas.enabled:
        return 0
    header = request.header
    api = header.api_key
    principal = request.principal
    user = principal.partition(":")[2] if principal else None
    client = header.client_id or ""
    now_ms = time.monotonic() * 1000
    throttle = 0
    if api == ApiKey.Produce:
        throttle = quotas.record(PRODUCER_BYTE_RATE, user, client, request_bytes, now_ms)
    elif api == ApiKey.Fetch and body is not None:
        fetched: Any = body
        size = sum(len(p.records or b"") for t in fetched.responses for p in t.partitions)
        throttle = quotas.record(CONSUMER_BYTE_RATE, user, client, size, now_ms)
        if throttle:  # a throttled fetch's answer carries no data
            quotas.unrecord(CONSUMER_BYTE_RATE, user, client, size, now_ms)
            close_regions(fetched.responses)  # records read as file regions are not sent
            fetched.responses = []
    if api not in _EXEMPT:
        throttle = max(throttle, quotas.record(REQUEST_PERCENTAGE, user, client,
                                               handler_ns * 100 / 1e9, now_ms))
    if throttle and body is not None and hasattr(body, "throttle_time_ms"):
        body.throttle_time_ms = throttle
    return throttle
