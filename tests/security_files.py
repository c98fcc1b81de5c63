"""Certificates and SASL users for tests of secured listeners (the fixtures ``tls_files`` and
``users_file`` in ``tests/conftest.py`` make them once per session)."""

from __future__ import annotations

from pathlib import Path

import attrs
import trustme

from trio_broker.broker.security import add_user

#: users every SASL test broker knows (password = user name + "-secret")
USERS = ("alice", "bob")
LIGATURE_PASSWORD = "\ufb01le-\u210c"  # NFKC would turn this into "file-H"


def password(user: str) -> str:
    return f"{user}-secret"


@attrs.frozen
class TlsFiles:
    ca: trustme.CA
    ca_pem: Path
    server_pem: Path  # chain and key in one file (Kafka's PEM key store)
    server_cert: Path
    server_key: Path
    client_pem: Path  # a client certificate signed by the same CA, CN=client-one


def make_tls_files(d: Path) -> TlsFiles:
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    server.private_key_and_cert_chain_pem.write_to_path(d / "server.pem")
    server.cert_chain_pems[0].write_to_path(d / "server-cert.pem")
    server.private_key_pem.write_to_path(d / "server-key.pem")
    ca.cert_pem.write_to_path(d / "ca.pem")
    client = ca.issue_cert("client-one@example.com", common_name="client-one")
    client.private_key_and_cert_chain_pem.write_to_path(d / "client.pem")
    return TlsFiles(ca, d / "ca.pem", d / "server.pem", d / "server-cert.pem",
                    d / "server-key.pem", d / "client.pem")


def make_users_file(path: Path) -> Path:
    for user in USERS:
        add_user(path, user, password(user))
    # Not NFKC-normalised on purpose: clients hash the UTF-8 bytes as typed (no SASLprep).
    add_user(path, "ligature", LIGATURE_PASSWORD)
    return path
