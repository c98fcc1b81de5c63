"""TLS and SASL for the broker's listeners.

``tls`` builds the server ``SSLContext``; ``sasl`` is the per-connection authentication state
machine (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); ``scram`` implements the server side of RFC
5802/7677 (the client side is the client core's, ``client_core.sasl``); and
``credentials`` reads and edits the SCRAM-hashed user file; ``oauthbearer`` validates
OAUTHBEARER tokens; ``acl`` and ``acl_store`` are the ACL authorizer; ``client_quotas`` the
client quotas.
"""

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
