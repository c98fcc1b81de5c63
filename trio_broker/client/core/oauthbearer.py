"""Kafka's unsecured OAUTHBEARER login: the token ``OAuthBearerUnsecuredLoginCallbackHandler``
makes from the JAAS options, and RFC 7628's first client message carrying it.

Why unsecured only: a signed token comes from an identity provider, which this client does not
call; the unsecured JWS (``alg: none``) is what Kafka's own clients send in development, from
options a ``client.properties`` file already states::

    sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule \\
        required unsecuredLoginStringClaim_sub="alice";

Options (Kafka's names): ``unsecuredLoginStringClaim_<claim>``,
``unsecuredLoginNumberClaim_<claim>``, ``unsecuredLoginListClaim_<claim>`` (the first character
is the separator),
``unsecuredLoginPrincipalClaimName`` (default ``sub``), ``unsecuredLoginLifetimeSeconds``
(default 3600), ``unsecuredLoginExtension_<name>`` (SASL extensions). A token is made at each
login, so a re-login never sends an expired one.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping
from typing import Any

from .errors import ConfigError

_STRING, _NUMBER, _LIST = ("unsecuredLoginStringClaim_", "unsecuredLoginNumberClaim_",
                           "unsecuredLoginListClaim_")
_EXTENSION = "unsecuredLoginExtension_"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def principal_of(options: Mapping[str, str]) -> str:
    """The principal the token will name (``ConfigError`` when no claim names it)."""
    claim = options.get("unsecuredLoginPrincipalClaimName", "sub")
    name = options.get(_STRING + claim)
    if not name:
        raise ConfigError(f"sasl.jaas.config: the OAUTHBEARER login needs the principal claim: "
                          f"set {_STRING}{claim}")
    return name


def unsecured_token(options: Mapping[str, str], now_s: float | None = None) -> str:
    """A compact unsecured JWS: ``base64url(header).base64url(claims).`` (empty signature)."""
    now = time.time() if now_s is None else now_s
    try:
        lifetime_s = int(options.get("unsecuredLoginLifetimeSeconds", "3600"))
    except ValueError:
        raise ConfigError("sasl.jaas.config: unsecuredLoginLifetimeSeconds must be a whole "
                          "number of seconds") from None
    claims: dict[str, Any] = {"iat": round(now, 3), "exp": round(now + lifetime_s, 3)}
    for key, value in options.items():
        if key.startswith(_STRING):
            claims[key[len(_STRING):]] = value
        elif key.startswith(_NUMBER):
            try:
                claims[key[len(_NUMBER):]] = float(value) if "." in value else int(value)
            except ValueError:
                raise ConfigError(f"sasl.jaas.config: {key} is not a number: {value!r}") from None
        elif key.startswith(_LIST):
            claims[key[len(_LIST):]] = [x for x in value[1:].split(value[:1]) if x] if value else []
    principal_of(options)
    header = _b64url(json.dumps({"alg": "none"}, separators=(",", ":")).encode())
    body = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    return f"{header}.{body}."


def client_first_message(options: Mapping[str, str], now_s: float | None = None) -> bytes:
    """RFC 7628's ``n,,\\x01auth=Bearer <token>\\x01[key=value\\x01...]\\x01``."""
    extensions = "".join(f"{k[len(_EXTENSION):]}={v}\x01" for k, v in options.items()
                         if k.startswith(_EXTENSION))
    return f"n,,\x01auth=Bearer {unsecured_token(options, now_s)}\x01{extensions}\x01".encode()


__all__ = ["client_first_message", "principal_of", "unsecured_token"]
