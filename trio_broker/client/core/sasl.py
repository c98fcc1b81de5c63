"""Client-side SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, unsecured OAUTHBEARER) as sans-IO
steps, over SaslHandshake v1 and SaslAuthenticate, in the order Kafka's clients use: after
ApiVersions, before any other request::

    auth = SaslAuthentication(credentials, "the broker at h:9093")
    step = auth.first()                       # SaslHandshake
    while step is not None:
        body = <send step.build(version of step.api_key), wait for its response>
        step = auth.receive(body)             # raises on refusal

SCRAM messages come from ``scramp`` (RFC 5802/7677), with one change Kafka requires: Kafka's
clients and brokers hash the password's UTF-8 bytes as typed, with no SASLprep (the broker's
credential file is written the same way), so the password given to ``scramp`` is the raw bytes.
The server's final signature is checked: a broker that does not know the password cannot
pretend it does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import make_request
from .errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    describe_code,
    error_for,
)
from .oauthbearer import client_first_message

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class SaslCredentials(NamedTuple):
    mechanism: str
    #: the user (OAUTHBEARER: the principal its token names)
    username: str
    password: str
    #: OAUTHBEARER: the unsecured token's JAAS options (``oauthbearer.py``)
    token_options: Mapping[str, str] | None = None


class SaslStep(NamedTuple):
    """One request to send: its API key and a body builder taking the negotiated version."""

    api_key: int
    build: Callable[[int], Any]


class _RawPassword:
    """What ``scramp`` hashes: the password's UTF-8 bytes as typed (Kafka's rule, not SASLprep).
    """

    def __init__(self, password: str) -> None:
        self._raw = password.encode()

    def __bytes__(self) -> bytes:
        return self._raw


def _scramp() -> Any:
    """``scramp``, imported on first use: it pulls in asn1crypto, a slow import
    (docs/benchmarks.md, "Start-up") that every process that opens a connection (each Spark
    worker) would otherwise pay for."""
    import scramp

    return scramp


class ScramClient:
    """The client's messages of one SCRAM exchange (RFC 5802/7677, hashed as Kafka hashes)."""

    def __init__(self, mechanism: str, username: str, password: str, *,
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        scramp = _scramp()
        try:
            # scramp's username check (SASLprep) stays; only the password hashing is Kafka's
            self._scram = scramp.ScramClient([mechanism], username, "unused", c_nonce=nonce)
        except scramp.ScramException as exc:
            raise ValueError(f"SASL username {username!r}: {exc}") from None
        self._scram.password = _RawPassword(password)
        self._first: bytes | None = None

    def first_message(self) -> bytes:
        if self._first is None:
            self._first = str(self._scram.get_client_first()).encode()
        return self._first

    def final_message(self, server_first: bytes) -> bytes:
        """The proof; ``SaslAuthenticationFailedError`` when the server's message is invalid."""
        try:
            self._scram.set_server_first(bytes(server_first).decode())
            return str(self._scram.get_client_final()).encode()
        except (_scramp().ScramException, UnicodeDecodeError, ValueError) as exc:
            raise SaslAuthenticationFailedError(f"invalid SCRAM server first message: {exc}"
                                                ) from None

    def verify_server_final(self, server_final: bytes) -> None:
        """Raise ``SaslAuthenticationFailedError`` unless the server proved it knows the
        credential."""
        try:
            self._scram.set_server_final(bytes(server_final).decode())
        except (_scramp().ScramException, UnicodeDecodeError, ValueError) as exc:
            raise SaslAuthenticationFailedError(f"SCRAM server proof rejected: {exc}"
                                                ) from None


def _authenticate(token: bytes) -> SaslStep:
    return SaslStep(ApiKey.SaslAuthenticate,
                    lambda version: make_request(ApiKey.SaslAuthenticate, version,
                                                 auth_bytes=token))


class SaslAuthentication:
    """One login: the handshake, then one (PLAIN) or two (SCRAM) authentication tokens."""

    def __init__(self, credentials: SaslCredentials, where: str, *,
                 nonce: str | None = None) -> None:
        if credentials.mechanism not in SASL_MECHANISMS:
            raise ValueError(f"SASL mechanism {credentials.mechanism!r} is not supported "
                             f"(use {', '.join(SASL_MECHANISMS)})")
        self.credentials = credentials
        self.where = where
        self.complete = False
        self._stage = "handshake"
        self._scram: ScramClient | None = None
        if credentials.mechanism.startswith("SCRAM-"):
            self._scram = ScramClient(credentials.mechanism, credentials.username,
                                      credentials.password, nonce=nonce)

    def first(self) -> SaslStep:
        mechanism = self.credentials.mechanism
        return SaslStep(ApiKey.SaslHandshake,
                        lambda version: make_request(ApiKey.SaslHandshake, version,
                                                     mechanism=mechanism))

    def receive(self, body: Any) -> SaslStep | None:
        """The next request to send, or None once authenticated."""
        stage = self._stage
        if stage == "handshake":
            self._check_handshake(body)
            if self.credentials.mechanism == "OAUTHBEARER":
                self._stage = "oauthbearer"
                return _authenticate(client_first_message(self.credentials.token_options or {}))
            if self._scram is None:
                self._stage = "plain"
                creds = self.credentials
                return _authenticate(f"\0{creds.username}\0{creds.password}".encode())
            self._stage = "scram-first"
            return _authenticate(self._scram.first_message())
        self._check_authenticate(body)
        scram = self._scram
        if stage == "scram-first" and scram is not None:
            self._stage = "scram-final"
            try:
                return _authenticate(scram.final_message(body.auth_bytes))
            except SaslAuthenticationFailedError as exc:
                raise SaslAuthenticationFailedError(f"{self.where}: {exc}") from None
        if stage == "scram-final" and scram is not None:
            try:
                scram.verify_server_final(body.auth_bytes)
            except SaslAuthenticationFailedError as exc:
                raise SaslAuthenticationFailedError(f"{self.where}: {exc}") from None
        self._stage = "done"
        self.complete = True
        return None

    def _check_handshake(self, body: Any) -> None:
        code = body.error_code
        if code == ErrorCode.NONE:
            return
        mechanism = self.credentials.mechanism
        if code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            enabled = ", ".join(body.mechanisms or ()) or "none"
            raise UnsupportedSaslMechanismError(
                f"{self.where} does not enable SASL mechanism {mechanism} (enabled: {enabled})")
        if code == ErrorCode.ILLEGAL_SASL_STATE:
            raise IllegalSaslStateError(
                f"{self.where} refused the SASL handshake: is it a SASL listener? "
                "(check security.protocol)")
        raise error_for(code, f"SaslHandshake with {self.where}: {describe_code(code)}")

    def _check_authenticate(self, body: Any) -> None:
        code = body.error_code
        if code == ErrorCode.NONE:
            return
        detail = body.error_message or describe_code(code)
        if code == ErrorCode.SASL_AUTHENTICATION_FAILED:
            raise SaslAuthenticationFailedError(
                f"{self.where} refused the login of {self.credentials.username!r} "
                f"({self.credentials.mechanism}): {detail}")
        raise error_for(code, f"SaslAuthenticate with {self.where}: {detail}")


__all__ = ["SASL_MECHANISMS", "SaslAuthentication", "SaslCredentials", "SaslStep", "ScramClient"]
