"""TLS for ``SSL://`` and ``SASL_SSL://`` listeners: one server ``SSLContext`` from PEM files.

Why PEM files and these names: Python's ``ssl`` module loads PEM, and Kafka accepts PEM key
stores too (``ssl.keystore.type=PEM``), so ``ssl.keystore.location`` / ``ssl.truststore.location``
are accepted as aliases of ``ssl.certfile`` / ``ssl.cafile`` (a PEM key store holds the chain and
the key in one file). ``ssl.client.auth`` keeps Kafka's values: ``none``, ``requested`` (verify a
certificate if the client sends one), ``required``.
"""

from __future__ import annotations

import ssl
from typing import Any

from .x500 import subject_name

__all__ = ["TLSConfigError", "peer_principal", "server_ssl_context"]

_VERIFY_MODES = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                 "required": ssl.CERT_REQUIRED}
_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class TLSConfigError(ValueError):
    """The ``ssl.*`` settings cannot produce a working context; one line, names the key."""


def server_ssl_context(config: Any) -> ssl.SSLContext:
    """Build the listeners' server context from ``config`` (a ``BrokerConfig``)."""
    if not config.ssl_certfile:
        raise TLSConfigError("ssl.certfile (or ssl.keystore.location) must be set for an SSL or "
                             "SASL_SSL listener")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = []
    for name in (p.strip() for p in config.ssl_enabled_protocols.split(",")):
        if not name:
            continue
        if name not in _PROTOCOLS:
            raise TLSConfigError(f"ssl.enabled.protocols={config.ssl_enabled_protocols!r}: "
                                 f"expected a list of {', '.join(_PROTOCOLS)}")
        versions.append(_PROTOCOLS[name])
    if not versions:
        raise TLSConfigError("ssl.enabled.protocols is empty")
    ctx.minimum_version = min(versions)
    ctx.maximum_version = max(versions)
    try:
        ctx.load_cert_chain(config.ssl_certfile, config.ssl_keyfile or None,
                            password=config.ssl_key_password or None)
    except (OSError, ssl.SSLError) as exc:
        raise TLSConfigError(f"ssl.certfile={config.ssl_certfile!r} / ssl.keyfile="
                             f"{config.ssl_keyfile!r}: cannot load the certificate and key "
                             f"({exc})") from None
    mode = _VERIFY_MODES[config.ssl_client_auth]
    if config.ssl_cafile:
        try:
            ctx.load_verify_locations(cafile=config.ssl_cafile)
        except (OSError, ssl.SSLError) as exc:
            raise TLSConfigError(f"ssl.cafile={config.ssl_cafile!r}: cannot load ({exc})") from None
    elif mode != ssl.CERT_NONE:
        raise TLSConfigError(f"ssl.client.auth={config.ssl_client_auth}: needs ssl.cafile to "
                             "verify client certificates")
    ctx.verify_mode = mode
    if config.ssl_cipher_suites:
        try:
            ctx.set_ciphers(config.ssl_cipher_suites)
        except ssl.SSLError as exc:
            raise TLSConfigError(f"ssl.cipher.suites={config.ssl_cipher_suites!r}: {exc}") from None
    # Kafka clients never resume sessions across brokers; tickets only cost memory here.
    ctx.options |= ssl.OP_NO_TICKET
    return ctx


def peer_principal(ssl_object: Any) -> str | None:
    """Kafka's default SSL principal: ``User:`` + the client certificate's subject DN, as Java's
    ``X500Principal.getName()`` prints it (``x500.py``). A subject that cannot be read raises
    ValueError: the connection is closed rather than served as ANONYMOUS."""
    try:
        der = ssl_object.getpeercert(binary_form=True)
    except (ValueError, AttributeError):
        return None
    if not der:
        return None
    try:
        name = subject_name(der)
    except (IndexError, UnicodeDecodeError) as exc:
        raise ValueError(f"unreadable certificate subject: {exc}") from None
    return f"User:{name}" if name else None
