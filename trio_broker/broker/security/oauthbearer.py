"""SASL/OAUTHBEARER on the server (RFC 7628, KIP-255, KIP-768): the client's bearer token,
validated.

Why two modes, as Kafka has them: without ``sasl.oauthbearer.jwks.endpoint.url`` tokens are
Kafka's default "unsecured JWS" (``alg: none``, for development: anyone may claim any
principal), validated for their claims only (Kafka's ``OAuthBearerUnsecuredValidatorCallback
Handler``); with a JWKS given as a ``file:`` URL, a token must be signed (RS256/RS384/RS512) by a
key of that set, and expiry, issuer and audience are checked with
``sasl.oauthbearer.clock.skew.seconds`` (Kafka's ``OAuthBearerValidatorCallbackHandler``). The
principal is ``User:<sub>`` (``sasl.oauthbearer.sub.claim.name``); the token's expiry bounds
the session for re-authentication (KIP-368).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import attrs

# cryptography is imported when a signed token or a JWKS is first read, not by every broker
# that merely could offer OAUTHBEARER: its import would lengthen every start
# (docs/benchmarks.md, "Start-up").
_HASHES = {"RS256": "SHA256", "RS384": "SHA384", "RS512": "SHA512"}




class OAuthBearerError(Exception):
    """A token refused; ``str()`` is what the client is told."""


@attrs.frozen
class OAuthSettings:
    """The ``sasl.oauthbearer.*`` keys the broker reads."""

    jwks_url: str | None = None
    sub_claim: str = "sub"
    scope_claim: str = "scope"
    clock_skew_s: int = 30
    expected_audience: Sequence[str] = ()
    expected_issuer: str | None = None

    @property
    def jwks_path(self) -> Path | None:
        return jwks_file(self.jwks_url) if self.jwks_url else None


def jwks_file(url: str) -> Path:
    """The file a ``sasl.oauthbearer.jwks.endpoint.url`` names (``file:`` URLs only)."""
    parsed = urlparse(url)
    if parsed.scheme != "file":
        raise OAuthBearerError("only file: URLs are read (the broker has no HTTP client)")
    return Path(unquote(parsed.path))


def read_jwks(path: Path) -> dict[str | None, Any]:
    """The RSA public keys of a JWKS file by ``kid``; a set without one is refused."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        keys: dict[str | None, Any] = {}
        for jwk in doc.get("keys", []) if isinstance(doc, dict) else ():
            if jwk.get("kty") == "RSA":
                numbers = rsa.RSAPublicNumbers(int.from_bytes(_b64(jwk["e"]), "big"),
                                               int.from_bytes(_b64(jwk["n"]), "big"))
                keys[jwk.get("kid")] = numbers.public_key()
    except (OSError, ValueError, KeyError, AttributeError, TypeError) as exc:
        raise OAuthBearerError(f"The JWKS cannot be read: {exc}") from None
    if not keys:
        raise OAuthBearerError(f"The JWKS {path} holds no RSA key")
    return keys


def parse_client_message(token: bytes) -> tuple[str | None, str]:
    """(authorization id, bearer token) of RFC 7628's initial client response."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise OAuthBearerError("Invalid OAUTHBEARER client message: not UTF-8") from None
    gs2, sep, rest = text.partition("\x01")
    parts = gs2.split(",")
    if not sep or len(parts) < 3 or parts[0] not in ("n", "y"):
        raise OAuthBearerError("Invalid OAUTHBEARER client message")
    authzid = parts[1][2:] if parts[1].startswith("a=") else None
    fields = dict(kv.partition("=")[::2] for kv in rest.split("\x01") if kv)
    auth = fields.get("auth", "")
    scheme, _, bearer = auth.partition(" ")
    if scheme.lower() != "bearer" or not bearer:
        raise OAuthBearerError("Invalid OAUTHBEARER client message: no bearer token")
    return authzid or None, bearer.strip()


def _b64(part: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise OAuthBearerError("Invalid token: not base64url") from None


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json(part: str) -> dict[str, Any]:
    # NaN, Infinity and numbers past a double's range (1e400) are not JSON numbers (RFC 8259),
    # and as a claim they would fail arithmetic later instead of failing the login
    try:
        value = json.loads(_b64(part), parse_float=_finite, parse_constant=_no_constant)
    except (ValueError, RecursionError):  # (json.loads recurses once per level of nesting)
        raise OAuthBearerError("Invalid token: not JSON") from None
    if not isinstance(value, dict):
        raise OAuthBearerError("Invalid token: not a JSON object")
    return value


#: the latest expiry a session lifetime can carry (an int64 of milliseconds, as Kafka's long)
_MAX_EXPIRY_MS = 2**63 - 1


class OAuthBearerValidator:
    """Validates tokens; returns (principal name, expiry in epoch ms)."""

    def __init__(self, settings: OAuthSettings) -> None:
        self.settings = settings
        self._jwks: tuple[tuple[int, int], dict[str | None, Any]] | None = None

    def validate(self, token: str, now_s: float | None = None) -> tuple[str, int]:
        now = time.time() if now_s is None else now_s
        parts = token.split(".")
        if len(parts) != 3:
            raise OAuthBearerError("Invalid token: expected three dot-separated parts")
        header, claims = _json(parts[0]), _json(parts[1])
        settings = self.settings
        path = settings.jwks_path
        skew = settings.clock_skew_s if path is not None else 0
        if path is None:
            if header.get("alg") != "none":
                raise OAuthBearerError("Unsecured tokens only (alg none): no JWKS is set")
        else:
            self._verify(path, header, f"{parts[0]}.{parts[1]}".encode(), _b64(parts[2]))
        exp = claims.get("exp")
        if not isinstance(exp, int | float) or isinstance(exp, bool) or not math.isfinite(exp):
            raise OAuthBearerError("Invalid token: no exp claim")
        if not 0 <= exp * 1000 <= _MAX_EXPIRY_MS:
            raise OAuthBearerError("Invalid token: the exp claim is out of range")
        if exp + skew <= now:
            raise OAuthBearerError("The token has expired")
        iat = claims.get("iat")
        if isinstance(iat, int | float) and iat - skew > now:
            raise OAuthBearerError("The token was issued in the future")
        sub = claims.get(settings.sub_claim)
        if not isinstance(sub, str) or not sub.strip():
            raise OAuthBearerError(f"Invalid token: no {settings.sub_claim} claim")
        if settings.expected_issuer is not None and claims.get("iss") != settings.expected_issuer:
            raise OAuthBearerError("The token's issuer is not the expected one")
        if settings.expected_audience:
            aud = claims.get("aud")
            auds = [aud] if isinstance(aud, str) else [
                a for a in (aud if isinstance(aud, list) else []) if isinstance(a, str)]
            if not set(auds) & set(settings.expected_audience):
                raise OAuthBearerError("The token's audience is not an expected one")
        return sub, int(exp * 1000)

    def _keys(self, path: Path) -> dict[str | None, Any]:
        """The set's keys, read again whenever the file is replaced or changed."""
        try:
            st = path.stat()
        except OSError as exc:
            raise OAuthBearerError(f"The JWKS cannot be read: {exc}") from None
        version = (st.st_ino, st.st_mtime_ns)
        if self._jwks is None or self._jwks[0] != version:
            self._jwks = (version, read_jwks(path))
        return self._jwks[1]

    def _verify(self, path: Path, header: dict[str, Any], signed: bytes,
                signature: bytes) -> None:
        hash_name = _HASHES.get(str(header.get("alg")))
        if hash_name is None:
            raise OAuthBearerError(f"Unsupported token algorithm {header.get('alg')!r}")
        keys = self._keys(path)
        key = keys.get(header.get("kid")) if header.get("kid") in keys else (
            next(iter(keys.values())) if len(keys) == 1 and "kid" not in header else None)
        if key is None:
            raise OAuthBearerError("No key of the JWKS matches the token's kid")
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        algorithm: type[hashes.HashAlgorithm] = getattr(hashes, hash_name)
        try:
            key.verify(signature, signed, padding.PKCS1v15(), algorithm())
        except InvalidSignature:
            raise OAuthBearerError("The token's signature is not valid") from None


def oauth_settings(config: Any) -> OAuthSettings:
    """The OAUTHBEARER settings of a ``BrokerConfig`` (its ``sasl_oauthbearer_*`` attributes)."""
    audience = config.sasl_oauthbearer_expected_audience or ""
    return OAuthSettings(
        jwks_url=config.sasl_oauthbearer_jwks_endpoint_url or None,
        sub_claim=config.sasl_oauthbearer_sub_claim_name,
        clock_skew_s=config.sasl_oauthbearer_clock_skew_seconds,
        expected_audience=tuple(a.strip() for a in audience.split(",") if a.strip()),
        expected_issuer=config.sasl_oauthbearer_expected_issuer or None)
