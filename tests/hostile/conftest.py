"""Fixtures for the hostile-conditions suite: certificates, SASL users, file descriptor counts."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import trustme

from trio_broker.security import add_user

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


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    d = tmp_path_factory.mktemp("tls")
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


@pytest.fixture(scope="session")
def users_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sasl") / "users.json"
    for user in USERS:
        add_user(path, user, password(user))
    # Not NFKC-normalised on purpose: clients hash the UTF-8 bytes as typed (no SASLprep).
    add_user(path, "ligature", LIGATURE_PASSWORD)
    return path


def vm_rss_kb(pid: int | str = "self") -> int:
    """Resident set size of a process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS line")


def vm_hwm_kb(pid: int | str = "self") -> int:
    """Peak resident set size of a process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM line")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def fd_limit() -> Iterator[int]:
    """Raise the soft open-files limit to the hard limit for a connection flood."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 65536
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    try:
        yield target
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
