"""TLS and SASL for the broker's listeners, the ACL authorizer and client quotas.

``tls`` builds the server ``SSLContext``; ``sasl`` is the per-connection authentication state
machine (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER); ``scram`` implements the server side
of RFC 5802/7677 (the client side is the client core's, ``client.core.sasl``); and
``credentials`` reads and edits the SCRAM-hashed user file; ``oauthbearer`` validates
OAUTHBEARER tokens; ``acl`` and ``acl_store`` are the ACL authorizer; ``client_quotas`` the
client quotas; ``patterns`` compiles the regular expressions clients send (RE2, bounded);
``password_encoder`` encrypts the passwords stored as dynamic broker configs (Kafka's
``PasswordEncoder``).

The names below are imported on first use: a broker without TLS or SASL listeners imports
``acl`` and ``client_quotas`` (every broker authorizes and applies quotas), not the rest.

May import the protocol; nothing else of the broker (config, in the same layer, imports it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...lazy_names import lazy_names

_LAZY = {
    "CredentialsError": "credentials",
    "CredentialStore": "credentials",
    "add_user": "credentials",
    "remove_user": "credentials",
    "SUPPORTED_MECHANISMS": "sasl",
    "SaslAuthenticator": "sasl",
    "SaslSettings": "sasl",
    "SaslState": "sasl",
    "ScramServer": "scram",
    "TLSConfigError": "tls",
    "server_ssl_context": "tls",
}

__all__ = sorted(_LAZY)

if TYPE_CHECKING:
    from .credentials import CredentialsError as CredentialsError
    from .credentials import CredentialStore as CredentialStore
    from .credentials import add_user as add_user
    from .credentials import remove_user as remove_user
    from .sasl import SUPPORTED_MECHANISMS as SUPPORTED_MECHANISMS
    from .sasl import SaslAuthenticator as SaslAuthenticator
    from .sasl import SaslSettings as SaslSettings
    from .sasl import SaslState as SaslState
    from .scram import ScramServer as ScramServer
    from .tls import TLSConfigError as TLSConfigError
    from .tls import server_ssl_context as server_ssl_context


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
