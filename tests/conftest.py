"""Shared test helpers: the broker fixtures come from the trio_broker pytest plugin."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.mock_cluster import MockCluster
from tests.native_build import stale
from tests.security_files import TlsFiles, make_tls_files, make_users_file

# Property tests draw the same examples on every run (a failure replays exactly, and its
# reproduction blob is printed); HYPOTHESIS_PROFILE=explore draws new ones, for local hunting.
settings.register_profile("replayable", derandomize=True, print_blob=True, database=None)
settings.register_profile("explore", print_blob=True, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "replayable"))


def pytest_sessionstart(session: pytest.Session) -> None:
    """A compiled module older than its source would be tested in place of the source."""
    changed = stale()
    if changed:
        names = ", ".join(path.name for path in changed)
        pytest.exit(f"changed since `make native` compiled them: {names}; run `make native` "
                    "(or `make test`)", returncode=4)


@pytest.fixture
def mock_cluster() -> Iterator[MockCluster]:
    """librdkafka's mock cluster with three brokers (a Kafka that is not ours)."""
    cluster = MockCluster(3)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate."""
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def users_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SASL credentials file with ``security_files.USERS`` and ``ligature``."""
    return make_users_file(tmp_path_factory.mktemp("sasl") / "users.json")


@pytest.fixture
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """``tmpfs("2m")`` mounts a real tmpfs of that size (a disk that really fills up).

    Mounting needs root (as CI has): a failed mount fails the test with the reason, since a
    full disk cannot be made honestly without it and a skip would hide what the test checks.
    """
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        point = tmp_path / f"tmpfs-{len(mounted)}"
        point.mkdir()
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                                 str(point)], capture_output=True, check=False)
        if result.returncode != 0:
            pytest.fail(f"cannot mount a {size} tmpfs (needs root): "
                        f"{result.stderr.decode().strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", "-l", str(point)], check=False)
