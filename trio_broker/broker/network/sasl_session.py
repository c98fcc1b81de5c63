"""A SASL listener's connection's SASL session: its authenticator, and the steps its connection
task takes for it outside the request path (Kafka's ``SaslServerAuthenticator`` on its
``KafkaChannel``).

Why an object per connection: the authenticator (``security/sasl.py``) is a sans-IO state
machine; what it asks of the connection (refuse a request before authentication, answer a
failed login after a delay and close, read the bare tokens that follow SaslHandshake v0, as
before KIP-152) reads and writes that connection's stream, and belongs to that connection only.
A plain listener's connection has none and pays nothing for it.
"""

from __future__ import annotations

import logging
import time

import trio

from ...protocol.api_keys import ApiKey
from ...protocol.errors import RemoteProtocolError
from ...protocol.messages import RequestHeader
from ..metrics import BrokerMetrics
from ..security.sasl import SaslAuthenticator, SaslSettings
from .request_channel import Request, Response, SendResponse

LOGGER = logging.getLogger(__name__)


class SaslSession:
    """One connection's SASL: the state machine and the connection-side steps it needs."""

    __slots__ = ("_client_host", "_connection_id", "_metrics", "_stream", "authenticator",
                 "bare_tokens")

    def __init__(self, settings: SaslSettings, stream: trio.abc.Stream, connection_id: str,
                 client_host: str, metrics: BrokerMetrics) -> None:
        self.authenticator = SaslAuthenticator(settings)
        #: after SaslHandshake v0: the next frames are bare SASL tokens, not requests
        self.bare_tokens = False
        self._stream = stream
        self._connection_id = connection_id
        self._client_host = client_host
        self._metrics = metrics

    def check_allowed(self, header: RequestHeader) -> None:
        """Refuse a request the session's state does not allow: it closes the connection
        before a handler sees it."""
        sasl = self.authenticator
        if not sasl.allows(header.api_key):
            raise RemoteProtocolError(
                f"{header.api_name} request during SASL {sasl.state.value} (only ApiVersions, "
                "SaslHandshake and SaslAuthenticate are allowed before authentication)",
                reason="authentication_required")

    def answered(self, header: RequestHeader) -> None:
        """A request's answer was written: after SaslHandshake v0, bare tokens follow."""
        if (header.api_key == ApiKey.SaslHandshake and header.api_version == 0
                and self.authenticator.awaits_token):
            self.bare_tokens = True

    async def receive_bare_token(self, token: bytes | bytearray) -> bool:
        """Answer a bare SASL token; False when the login failed (Kafka does not answer it:
        the connection is closed after ``connection.failed.authentication.delay.ms``)."""
        sasl = self.authenticator
        token = bytes(token)
        limiter = sasl.settings.plain_limiter if sasl.costly(token) else None
        try:  # PLAIN costs a PBKDF2 of a few milliseconds: keep it off the event loop
            data = await trio.to_thread.run_sync(sasl.authenticate_bare, token, limiter=limiter)
        except Exception:  # a bug stays in this connection, as a handler's would
            LOGGER.exception("bare SASL token failed; closing connection %s",
                             self._connection_id)
            return False
        if data is None:
            LOGGER.info("closing connection %s: SASL authentication failed", self._connection_id)
            await trio.sleep(sasl.settings.failed_authentication_delay_s)
            return False
        await self._stream.send_all(data)
        self._metrics.bytes_out.inc(len(data))
        self.bare_tokens = not sasl.complete  # then back to Kafka requests
        return True

    async def answer_failed_login(self, request: Request, response: Response) -> str:
        """Answer a failed login after the configured delay (KIP-306); the reason to close."""
        LOGGER.info("closing connection %s from %s: SASL authentication failed",
                    self._connection_id, self._client_host)
        await trio.sleep(self.authenticator.settings.failed_authentication_delay_s)
        if isinstance(response, SendResponse):
            await self._stream.send_all(response.data)
            self._metrics.bytes_out.inc(len(response.data))
        self._metrics.request_metrics.record_timings(request.header.api_key, request,
                                                     time.monotonic_ns())
        return "authentication_failed"


__all__ = ["SaslSession"]
