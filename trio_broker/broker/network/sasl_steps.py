"""The connection task's SASL steps that are not requests: a failed login's answer, and the
bare tokens that follow SaslHandshake v0.

Why apart from ``socket_server.py``: they run once per login, never per request, and keep the
connection loop's module to the loop.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import trio

from ..metrics import BrokerMetrics
from .connection import Connection
from .request_channel import Request, Response, SendResponse

if TYPE_CHECKING:
    from ..security.sasl import SaslSettings

LOGGER = logging.getLogger("trio_broker.broker.network.socket_server")


async def fail_authentication(conn: Connection, request: Request, response: Response,
                              settings: SaslSettings | None, metrics: BrokerMetrics) -> str:
    """Answer a failed login after the configured delay, then close (KIP-306)."""
    assert settings is not None
    LOGGER.info("closing connection %s from %s: SASL authentication failed", conn.id,
                conn.client_host)
    await trio.sleep(settings.failed_authentication_delay_s)
    if isinstance(response, SendResponse):
        await conn.stream.send_all(response.data)
        metrics.bytes_out.inc(len(response.data))
    metrics.request_metrics.record_timings(request.header.api_key, request, time.monotonic_ns())
    return "authentication_failed"


async def raw_sasl_token(conn: Connection, token: bytes, settings: SaslSettings | None,
                         metrics: BrokerMetrics) -> bool:
    """A bare SASL token (after SaslHandshake v0); a failed one is not answered (Kafka)."""
    sasl = conn.sasl
    assert sasl is not None
    assert settings is not None
    token = bytes(token)
    limiter = settings.plain_limiter if sasl.costly(token) else None
    try:  # PLAIN costs a PBKDF2 of a few milliseconds: keep it off the event loop
        data = await trio.to_thread.run_sync(sasl.authenticate_bare, token, limiter=limiter)
    except Exception:  # a bug stays in this connection, as a handler's would
        LOGGER.exception("bare SASL token failed; closing connection %s", conn.id)
        return False
    if data is None:
        LOGGER.info("closing connection %s: SASL authentication failed", conn.id)
        await trio.sleep(settings.failed_authentication_delay_s)
        return False
    await conn.stream.send_all(data)
    metrics.bytes_out.inc(len(data))
    conn.raw_sasl = not sasl.complete  # then back to Kafka requests
    return True
