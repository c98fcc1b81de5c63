"""TLS and SASL settings under Kafka's client config names, resolved once for every face.

Keys (librdkafka's names, which Kafka's Python clients share)::

    security.protocol                      PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    ssl.ca.location                        CA certificates (PEM file or directory) to trust;
                                           unset: the system's
    ssl.certificate.location               client certificate (PEM), for listeners that ask
    ssl.key.location / ssl.key.password    its private key (default: in the certificate file)
    ssl.endpoint.identification.algorithm  https (default: the certificate must name the host)
                                           or none
    sasl.mechanism                         PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 (Kafka's
                                           default, GSSAPI, is not supported) | OAUTHBEARER
                                           (unsecured tokens, from sasl.jaas.config)
    sasl.username / sasl.password

and Kafka's Java client keys, read into those (``jaas.py``): ``sasl.jaas.config``,
``ssl.truststore.location`` / ``ssl.keystore.location`` of PEM stores (``ssl.*.type``,
``ssl.*.password``).

``ssl`` is the standard library's: building a context is configuration, not I/O; each face
wraps its own sockets with it (``trio.SSLStream``, ``SSLContext.wrap_socket``).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from .bootstrap import resolve_security_protocol
from .errors import ConfigError
from .jaas import JAVA_CLIENT_KEYS, OAUTHBEARER_OPTIONS, from_java_settings
from .oauthbearer import principal_of
from .sasl import SASL_MECHANISMS, SaslCredentials

#: the security keys and their defaults (``security.protocol`` None: from the bootstrap prefix)
SECURITY_DEFAULTS: dict[str, Any] = {
    "security.protocol": None,
    "ssl.ca.location": None,
    "ssl.certificate.location": None,
    "ssl.key.location": None,
    "ssl.key.password": None,
    "ssl.endpoint.identification.algorithm": "https",
    "sasl.mechanism": "GSSAPI",
    "sasl.username": None,
    "sasl.password": None,
    **dict.fromkeys(JAVA_CLIENT_KEYS),
}


class Security(NamedTuple):
    """What a face needs to open a connection: the protocol, a TLS context, SASL credentials."""

    protocol: str
    ssl_context: ssl.SSLContext | None
    sasl: SaslCredentials | None

    @classmethod
    def plaintext(cls) -> Security:
        return cls("PLAINTEXT", None, None)


def client_ssl_context(config: Mapping[str, Any]) -> ssl.SSLContext:
    """An ``SSLContext`` for connecting to brokers, from the ``ssl.*`` keys."""
    ca = config.get("ssl.ca.location")
    try:
        if ca is not None and os.path.isdir(str(ca)):
            context = ssl.create_default_context(capath=str(ca))
        else:
            context = ssl.create_default_context(cafile=None if ca is None else str(ca))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"ssl.ca.location {ca!r}: {_reason(exc)}") from None
    algorithm = str(config.get("ssl.endpoint.identification.algorithm") or "none").lower()
    if algorithm not in ("https", "none"):
        raise ConfigError(f"ssl.endpoint.identification.algorithm must be https or none, "
                          f"got {algorithm!r}")
    context.check_hostname = algorithm == "https"
    cert = config.get("ssl.certificate.location")
    if cert is not None:
        key = config.get("ssl.key.location")
        try:
            context.load_cert_chain(str(cert), None if key is None else str(key),
                                    config.get("ssl.key.password"))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"ssl.certificate.location {cert!r}: {_reason(exc)}") from None
    elif config.get("ssl.key.location") is not None:
        raise ConfigError("ssl.key.location needs ssl.certificate.location")
    return context


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def resolve_security(config: Mapping[str, Any], servers: str | Sequence[str]) -> Security:
    """The protocol (``security.protocol``, else the bootstrap prefix), a TLS context when it
    uses TLS, SASL credentials when it uses SASL; ``ConfigError`` when a piece is missing."""
    config = from_java_settings(config)
    protocol = resolve_security_protocol(config.get("security.protocol"), servers)
    context = client_ssl_context(config) if protocol in ("SSL", "SASL_SSL") else None
    sasl = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = str(config.get("sasl.mechanism") or "GSSAPI").upper()
        if mechanism not in SASL_MECHANISMS:
            raise ConfigError(f"sasl.mechanism {mechanism} is not supported with "
                              f"security.protocol={protocol}: use {', '.join(SASL_MECHANISMS)}")
        if mechanism == "OAUTHBEARER":
            options = config.get(OAUTHBEARER_OPTIONS)
            if options is None:
                raise ConfigError("sasl.mechanism=OAUTHBEARER needs sasl.jaas.config with "
                                  "org.apache.kafka.common.security.oauthbearer."
                                  "OAuthBearerLoginModule and its unsecuredLogin* options")
            return Security(protocol, context,
                            SaslCredentials(mechanism, principal_of(options), "", options))
        username, password = config.get("sasl.username"), config.get("sasl.password")
        if username is None or password is None:
            raise ConfigError(f"security.protocol={protocol} needs sasl.username and "
                              "sasl.password")
        sasl = SaslCredentials(mechanism, str(username), str(password))
    return Security(protocol, context, sasl)


__all__ = ["SECURITY_DEFAULTS", "Security", "client_ssl_context", "resolve_security"]
