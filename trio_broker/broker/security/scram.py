"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the server side, sans-IO (the
client side is ``client.core.sasl``, shared by every client face).

Why a state machine: SCRAM is exactly two round trips and every message may only
arrive in one state. The server never sees or stores a password: it keeps, per user and
mechanism, the salt, the iteration count, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))``
and ``ServerKey = HMAC(SaltedPassword, "Server Key")`` (Kafka's ``ScramCredential``).

Exchange (no channel binding, as Kafka)::

    client-first   n,[a=authzid],n=user,r=cnonce[,ext]
    server-first   r=cnonce+snonce,s=base64(salt),i=iterations
    client-final   c=base64("n,,"),r=cnonce+snonce,p=base64(ClientKey XOR ClientSignature)
    server-final   v=base64(HMAC(ServerKey, AuthMessage))

``AuthMessage`` is client-first-bare + "," + server-first + "," + client-final-without-proof.
An unknown user gets a made-up salt that is stable per user name and fails at the proof, so
the exchange does not reveal which user names exist (RFC 5802 section 9).
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import secrets
from collections.abc import Callable

import attrs

__all__ = [
    "MAX_ITERATIONS",
    "MECHANISMS",
    "MECHANISM_TYPES",
    "MIN_ITERATIONS",
    "ScramCredential",
    "ScramError",
    "ScramServer",
    "credential_from_salted_password",
    "make_credential",
]

#: mechanism name -> hashlib name
MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: Kafka's ScramMechanism type numbers, as Describe/AlterUserScramCredentials carry them
MECHANISM_TYPES: dict[int, str] = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
#: Kafka refuses fewer iterations than this
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384  # Kafka's upper bound as well


class ScramError(Exception):
    """The exchange failed; ``str()`` is safe to send to the client."""


@attrs.frozen
class ScramCredential:
    """What the server stores for one user and mechanism (never the password)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hash_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}") from None


def _hmac(hash_name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hash_name).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi() of RFC 5802: PBKDF2 with the mechanism's HMAC."""
    # No SASLprep: Kafka and librdkafka hash the UTF-8 bytes as given, and so must we.
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password.encode("utf-8"), salt,
                               iterations)


def make_credential(mechanism: str, password: str, *, salt: bytes | None = None,
                    iterations: int = MIN_ITERATIONS) -> ScramCredential:
    """The stored form of ``password`` for ``mechanism`` (a fresh random salt by default)."""
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations={iterations}: expected {MIN_ITERATIONS}..{MAX_ITERATIONS}")
    salt = secrets.token_bytes(32) if salt is None else salt
    return credential_from_salted_password(
        mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations)


def credential_from_salted_password(mechanism: str, salt: bytes, salted: bytes,
                                    iterations: int) -> ScramCredential:
    """The stored form from ``SaltedPassword`` = Hi(password, salt, iterations), which is what
    AlterUserScramCredentials carries (the broker never sees the password)."""
    hash_name = _hash_name(mechanism)
    client_key = _hmac(hash_name, salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=hashlib.new(hash_name, client_key).digest(),
        server_key=_hmac(hash_name, salted, b"Server Key"),
        iterations=iterations,
    )


def verify_password(mechanism: str, credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` matches ``credential`` (used by PLAIN; costs one PBKDF2)."""
    candidate = make_credential(mechanism, password, salt=credential.salt,
                                iterations=credential.iterations)
    return hmac.compare_digest(candidate.stored_key, credential.stored_key)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise ScramError(f"Invalid SCRAM {what}: not base64") from None


def _attributes(message: str, what: str) -> list[tuple[str, str]]:
    out = []
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=" or not part[0].isalpha():
            raise ScramError(f"Invalid SCRAM {what}")
        out.append((part[0], part[2:]))
    return out


def _decode_saslname(name: str) -> str:
    """RFC 5802 saslname: "=2C" is a comma, "=3D" an equals sign, any other "=" is invalid."""
    out = []
    i = 0
    while i < len(name):
        if name[i] == "=":
            escape = {"=2C": ",", "=3D": "="}.get(name[i:i + 3])
            if escape is None:
                raise ScramError("Invalid SCRAM user name")
            out.append(escape)
            i += 3
        else:
            out.append(name[i])
            i += 1
    if not out:
        raise ScramError("Invalid SCRAM user name")
    return "".join(out)


class _ServerState(enum.Enum):
    RECEIVE_CLIENT_FIRST = 1
    RECEIVE_CLIENT_FINAL = 2
    COMPLETE = 3
    FAILED = 4


class ScramServer:
    """One server-side SCRAM exchange.

    ``lookup(user)`` returns the user's credential for this mechanism, or None; ``fake_salt``
    makes the salt shown for unknown users stable (pass a per-broker secret).
    """

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None], *,
                 fake_salt_key: bytes = b"", nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._hash_name = _hash_name(mechanism)
        self._lookup = lookup
        self._fake_salt_key = fake_salt_key or secrets.token_bytes(32)
        self._server_nonce = nonce or secrets.token_urlsafe(24)
        self._state = _ServerState.RECEIVE_CLIENT_FIRST
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        #: the authenticated user name, once ``complete``
        self.username: str | None = None

    @property
    def complete(self) -> bool:
        return self._state is _ServerState.COMPLETE

    def evaluate(self, token: bytes) -> bytes:
        """Process one client message, return the server's reply; raises ScramError."""
        try:
            if self._state is _ServerState.RECEIVE_CLIENT_FIRST:
                return self._client_first(token)
            if self._state is _ServerState.RECEIVE_CLIENT_FINAL:
                return self._client_final(token)
        except ScramError:
            self._state = _ServerState.FAILED
            raise
        self._state = _ServerState.FAILED
        raise ScramError("SCRAM exchange already finished")

    def _text(self, token: bytes) -> str:
        try:
            return token.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("Invalid SCRAM message: not UTF-8") from None

    def _client_first(self, token: bytes) -> bytes:
        text = self._text(token)
        # gs2-header: cbind-flag "," [authzid] ","
        flag, sep, rest = text.partition(",")
        authzid_part, sep2, bare = rest.partition(",")
        if not sep or not sep2 or flag not in ("n", "y"):
            raise ScramError("Invalid SCRAM client first message (channel binding is not "
                             "supported)")
        attrs_ = _attributes(bare, "client first message")
        if len(attrs_) < 2 or attrs_[0][0] != "n" or attrs_[1][0] != "r" or not attrs_[1][1]:
            raise ScramError("Invalid SCRAM client first message")
        if any(k == "m" for k, _ in attrs_):
            raise ScramError("SCRAM mandatory extensions are not supported")
        username = _decode_saslname(attrs_[0][1])
        if authzid_part and (not authzid_part.startswith("a=")
                             or _decode_saslname(authzid_part[2:]) != username):
            raise ScramError("Authentication failed: Client requested an authorization id "
                             "that is different from username")
        client_nonce = attrs_[1][1]
        if not all(0x21 <= ord(c) <= 0x7E and c != "," for c in client_nonce):
            raise ScramError("Invalid SCRAM nonce")
        credential = self._lookup(username)
        if credential is None:
            # Go on with a made-up credential so the reply does not reveal the user is unknown.
            salt = _hmac(self._hash_name, self._fake_salt_key, username.encode())[:32]
            credential = ScramCredential(salt, b"\x00", b"\x00", MIN_ITERATIONS)
            self.username = None
        else:
            self.username = username
        self._credential = credential
        self._client_first_bare = bare
        self._nonce = client_nonce + self._server_nonce
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        self._state = _ServerState.RECEIVE_CLIENT_FINAL
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        text = self._text(token)
        without_proof, sep, proof_part = text.rpartition(",")
        if not sep or not proof_part.startswith("p="):
            raise ScramError("Invalid SCRAM client final message")
        attrs_ = dict(_attributes(without_proof, "client final message"))
        if _unb64(attrs_.get("c", ""), "channel binding") not in (b"n,,", b"y,,"):
            raise ScramError("Invalid SCRAM client final message: channel binding")
        if not hmac.compare_digest(attrs_.get("r", "").encode(), self._nonce.encode()):
            raise ScramError("Invalid SCRAM client final message: nonce mismatch")
        proof = _unb64(proof_part[2:], "client proof")
        credential = self._credential
        assert credential is not None
        auth_message = ",".join((self._client_first_bare, self._server_first, without_proof))
        signature = _hmac(self._hash_name, credential.stored_key, auth_message.encode())
        if len(proof) != len(signature) or self.username is None:
            self.username = None
            raise ScramError(f"Authentication failed during authentication due to invalid "
                             f"credentials with SASL mechanism {self.mechanism}")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        computed = hashlib.new(self._hash_name, client_key).digest()
        if not hmac.compare_digest(computed, credential.stored_key):
            self.username = None
            raise ScramError(f"Authentication failed during authentication due to invalid "
                             f"credentials with SASL mechanism {self.mechanism}")
        server_signature = _hmac(self._hash_name, credential.server_key, auth_message.encode())
        self._state = _ServerState.COMPLETE
        return f"v={_b64(server_signature)}".encode()
