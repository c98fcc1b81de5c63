"""Server-side SASL for ``SASL_PLAINTEXT`` / ``SASL_SSL`` listeners (Kafka's
``SaslServerAuthenticator``): one state machine per connection.

Why a state machine that the network layer consults on every request: before authentication a
connection may only negotiate, so anything else is refused before it reaches a handler, costs
nothing and closes the connection. States and the requests each one accepts::

    HANDSHAKE ── ApiVersions (any number), SaslHandshake(mechanism enabled) ──> AUTHENTICATE
        │ SaslHandshake(unknown mechanism): UNSUPPORTED_SASL_MECHANISM ──> FAILED
    AUTHENTICATE ── SaslAuthenticate(token) ... (SCRAM: two tokens, PLAIN: one) ──> COMPLETE
        │ bad token or credentials: SASL_AUTHENTICATION_FAILED ──> FAILED
    COMPLETE ── every API; SaslHandshake/SaslAuthenticate again: ILLEGAL_SASL_STATE
    FAILED ── nothing: the network layer sends the error after
              connection.failed.authentication.delay.ms and closes the connection

After SaslHandshake v0 the tokens arrive bare (``authenticate_bare``), not in SaslAuthenticate
requests. With ``connections.max.reauth.ms`` (KIP-368) a session lasts that long (an
OAUTHBEARER session no longer than its token), announced in ``session_lifetime_ms``; before it
ends the client sends SaslHandshake (same mechanism) and SaslAuthenticate again on the same
connection (COMPLETE -> AUTHENTICATE -> COMPLETE, the principal may not change); once it has
ended, any other request closes the connection.
"""

from __future__ import annotations

import enum
import logging
import secrets
import time
from collections.abc import Sequence

import attrs
import trio

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from .credentials import CredentialStore
from .oauthbearer import (
    OAuthBearerError,
    OAuthBearerValidator,
    OAuthSettings,
    oauth_settings,
    parse_client_message,
)
from .scram import MECHANISMS as SCRAM_MECHANISMS
from .scram import ScramError, ScramServer

LOGGER = logging.getLogger(__name__)

__all__ = ["SUPPORTED_MECHANISMS", "SaslAuthenticationError", "SaslAuthenticator", "SaslSettings",
           "SaslState", "oauth_settings"]

SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, "OAUTHBEARER")
_NEGOTIATION_KEYS = frozenset({ApiKey.ApiVersions, ApiKey.SaslHandshake})
_AUTHENTICATE_KEYS = frozenset({ApiKey.SaslAuthenticate})
_INVALID_PLAIN = "Authentication failed: Invalid username or password"


class SaslAuthenticationError(Exception):
    """A login was refused; ``str()`` is what the client is told."""


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


@attrs.define(eq=False)
class SaslSettings:
    """What every connection of a SASL listener shares."""

    mechanisms: Sequence[str]
    credentials: CredentialStore
    failed_authentication_delay_s: float = 0.1
    #: largest frame accepted before authentication (sasl.server.max.receive.size)
    max_receive_size: int = 524_288
    #: keys the made-up salts shown for unknown SCRAM users (per broker run)
    fake_salt_key: bytes = attrs.field(factory=lambda: secrets.token_bytes(32))
    #: connections.max.reauth.ms: session lifetime (KIP-368); 0 = sessions never end
    reauth_ms: int = 0
    #: the sasl.oauthbearer.* keys
    oauth: OAuthSettings = attrs.field(factory=OAuthSettings)
    oauth_validator: OAuthBearerValidator = attrs.field(default=attrs.Factory(
        lambda self: OAuthBearerValidator(self.oauth), takes_self=True))
    #: the worker threads PLAIN's PBKDF2s run in, one at a time: failed logins cost no more
    #: than one core however many connections send them, and never take the threads that
    #: storage work runs in (``costly`` says which logins go here)
    plain_limiter: trio.CapacityLimiter = attrs.field(factory=lambda: trio.CapacityLimiter(1))


class SaslAuthenticator:
    """One connection's SASL state."""

    __slots__ = (
        "_mechanism",
        "_reauthenticating",
        "_scram",
        "_session_end",
        "principal",
        "reauthentications",
        "session_lifetime_ms",
        "settings",
        "state",
    )

    def __init__(self, settings: SaslSettings) -> None:
        self.settings = settings
        self.state = SaslState.HANDSHAKE
        self._mechanism: str | None = None
        self._scram: ScramServer | None = None
        #: "User:<name>" once authenticated
        self.principal: str | None = None
        #: what SaslAuthenticate announces (KIP-368); 0: the session does not end
        self.session_lifetime_ms = 0
        self._session_end: float | None = None
        self._reauthenticating = False
        self.reauthentications = 0

    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def failed(self) -> bool:
        return self.state is SaslState.FAILED

    @property
    def awaits_token(self) -> bool:
        """A mechanism was chosen and its first token is expected."""
        return self.state is SaslState.AUTHENTICATE

    def allows(self, api_key: int) -> bool:
        """Whether a request with ``api_key`` may be processed in the current state."""
        state = self.state
        if state is SaslState.COMPLETE:
            end = self._session_end
            return end is None or time.monotonic() < end or api_key == ApiKey.SaslHandshake
        if state is SaslState.HANDSHAKE:
            return api_key in _NEGOTIATION_KEYS
        if state is SaslState.AUTHENTICATE:
            return api_key in _AUTHENTICATE_KEYS
        return False

    @property
    def accepts_handshake(self) -> bool:
        """Before authentication, or (re-authentication enabled) once it is complete."""
        return self.state is SaslState.HANDSHAKE or (
            self.state is SaslState.COMPLETE and self.settings.reauth_ms > 0)

    def handshake(self, mechanism: str) -> tuple[ErrorCode, list[str]]:
        """SaslHandshake: (error, enabled mechanisms)."""
        enabled = list(self.settings.mechanisms)
        if not self.accepts_handshake:
            return ErrorCode.ILLEGAL_SASL_STATE, enabled
        if self.state is SaslState.COMPLETE:  # re-authentication (KIP-368)
            if mechanism != self._mechanism:
                LOGGER.info("re-authentication asked for %s, the session used %s", mechanism,
                            self._mechanism)
                self.state = SaslState.FAILED
                return ErrorCode.ILLEGAL_SASL_STATE, enabled
            self._reauthenticating = True
        if mechanism not in enabled:
            LOGGER.info("SASL handshake asked for mechanism %r; enabled: %s", mechanism,
                        ", ".join(enabled))
            self.state = SaslState.FAILED
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled
        self._mechanism = mechanism
        if mechanism in SCRAM_MECHANISMS:
            self.settings.credentials.maybe_reload()
            store = self.settings.credentials
            self._scram = ScramServer(mechanism, lambda user: store.scram(user, mechanism),
                                      fake_salt_key=self.settings.fake_salt_key)
        self.state = SaslState.AUTHENTICATE
        return ErrorCode.NONE, enabled

    def authenticate(self, token: bytes) -> tuple[ErrorCode, str | None, bytes]:
        """SaslAuthenticate: (error, error message, server token).

        PLAIN costs one PBKDF2 (a few ms) when ``costly``: callers run this off the event loop,
        in ``settings.plain_limiter`` then.
        """
        if self.state is not SaslState.AUTHENTICATE:
            return (ErrorCode.ILLEGAL_SASL_STATE,
                    f"SaslAuthenticate request received in state {self.state.value}", b"")
        try:
            if self._mechanism == "PLAIN":
                reply = self._plain(token)
            elif self._mechanism == "OAUTHBEARER":
                reply = self._oauthbearer(token)
            else:
                assert self._scram is not None
                reply = self._scram.evaluate(token)
                if self._scram.complete:
                    assert self._scram.username is not None
                    self._succeeded(self._scram.username)
        except (ScramError, SaslAuthenticationError, OAuthBearerError) as exc:
            self.state = SaslState.FAILED
            LOGGER.info("SASL %s authentication failed: %s", self._mechanism, exc)
            return ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc), b""
        return ErrorCode.NONE, None, reply

    def costly(self, token: bytes) -> bool:
        """Whether ``authenticate(token)`` costs a PBKDF2: a PLAIN login not verified before."""
        if self._mechanism != "PLAIN" or self.state is not SaslState.AUTHENTICATE:
            return False
        parts = token.split(b"\x00")
        if len(parts) != 3:
            return False
        try:
            username, password = parts[1].decode("utf-8"), parts[2].decode("utf-8")
        except UnicodeDecodeError:
            return False
        return not self.settings.credentials.plain_verified(username, password)

    def authenticate_bare(self, token: bytes) -> bytes | None:
        """A token after SaslHandshake v0: the size-prefixed answer frame, or None when the
        login failed (Kafka then closes without an answer). Costs what ``authenticate`` costs."""
        error, _, reply = self.authenticate(token)
        return None if error else len(reply).to_bytes(4, "big") + reply

    def _plain(self, token: bytes) -> bytes:
        # message = [authzid] UTF8NUL authcid UTF8NUL passwd (RFC 4616)
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        store = self.settings.credentials
        store.maybe_reload()
        if not store.verify_plain(username, password):
            raise SaslAuthenticationError(_INVALID_PLAIN)
        self._succeeded(username)
        return b""

    def _oauthbearer(self, token: bytes) -> bytes:
        authzid, bearer = parse_client_message(token)
        subject, expiry_ms = self.settings.oauth_validator.validate(bearer)
        if authzid is not None and authzid != subject:
            raise SaslAuthenticationError("Authentication failed: the authorization id is not "
                                          "the token's principal")
        self._succeeded(subject, expiry_ms)
        return b""

    def _succeeded(self, username: str, expiry_ms: int | None = None) -> None:
        principal = f"User:{username}"
        if self._reauthenticating and principal != self.principal:
            raise SaslAuthenticationError("Authentication failed: re-authentication may not "
                                          "change the principal")
        self.state = SaslState.COMPLETE
        self.principal = principal
        self._scram = None
        if self._reauthenticating:
            self.reauthentications += 1
            LOGGER.info("SASL %s re-authentication of %s", self._mechanism, principal)
        self._reauthenticating = False
        lifetime = self.settings.reauth_ms
        if lifetime > 0 and expiry_ms is not None:
            lifetime = max(1, min(lifetime, expiry_ms - int(time.time() * 1000)))
        self.session_lifetime_ms = lifetime
        self._session_end = time.monotonic() + lifetime / 1000 if lifetime > 0 else None
        LOGGER.debug("SASL %s authentication succeeded for %s", self._mechanism, username)
