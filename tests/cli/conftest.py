"""The CLI tests' brokers and runners: a SASL_SSL broker, the real ``trio-broker`` process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from tests.security_files import TlsFiles, password
from trio_broker.testing import ThreadedBroker


@pytest.fixture(scope="package")
def sasl_ssl_broker(tmp_path_factory: pytest.TempPathFactory, tls_files: TlsFiles,
                    users_file: Path) -> Iterator[ThreadedBroker]:
    """A broker whose only listener is SASL_SSL (SCRAM-SHA-256 and PLAIN)."""
    broker = ThreadedBroker(listeners="SASL_SSL://127.0.0.1:0",
                            log_dirs=str(tmp_path_factory.mktemp("cli-sasl-ssl")),
                            ssl_certfile=str(tls_files.server_pem),
                            sasl_credentials_file=str(users_file),
                            sasl_enabled_mechanisms="PLAIN,SCRAM-SHA-256",
                            connection_failed_authentication_delay_ms=0,
                            group_initial_rebalance_delay_ms=0,
                            shutdown_timeout_ms=1000).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="package")
def client_properties(tmp_path_factory: pytest.TempPathFactory, tls_files: TlsFiles) -> Path:
    """Kafka client settings for ``sasl_ssl_broker``, as ``--command-config`` takes them."""
    path = tmp_path_factory.mktemp("cli-client") / "client.properties"
    path.write_text(f"security.protocol=SASL_SSL\n"
                    f"ssl.ca.location={tls_files.ca_pem}\n"
                    f"sasl.mechanism=SCRAM-SHA-256\n"
                    f"sasl.username=alice\n"
                    f"sasl.password={password('alice')}\n")
    return path


@pytest.fixture(scope="package")
def secure_librdkafka(sasl_ssl_broker: ThreadedBroker, tls_files: TlsFiles) -> dict[str, str]:
    """confluent-kafka settings for ``sasl_ssl_broker``."""
    return {"bootstrap.servers": sasl_ssl_broker.bootstrap_servers,
            "security.protocol": "SASL_SSL", "ssl.ca.location": str(tls_files.ca_pem),
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
            "sasl.password": password("alice")}


@attrs.frozen
class Done:
    returncode: int
    stdout: str
    stderr: str


#: run ``trio-broker ARGS`` as a process; stdout is a pipe, never a terminal
Cli = Callable[..., Done]


def run_cli(*args: str, stdin: str | None = None, pipe: str | None = None,
            timeout: float = 60, env: dict[str, str] | None = None) -> Done:
    """``python -m trio_broker ARGS`` (optionally ``| PIPE`` through bash with ``pipefail``,
    so the status is the CLI's own unless the pipe's reader failed), with a narrow ``COLUMNS``
    so anything that squeezed tables to the terminal width would show it."""
    environ = {**os.environ, "COLUMNS": "40", "PYTHONUNBUFFERED": "1", **(env or {})}
    command = [sys.executable, "-m", "trio_broker", *args]
    if pipe is not None:
        quoted = " ".join(_quote(a) for a in command)
        done = subprocess.run(["bash", "-c", f"set -o pipefail; {quoted} | {pipe}"], input=stdin,
                              capture_output=True, text=True, timeout=timeout, env=environ,
                              check=False)
    else:
        done = subprocess.run(command, input=stdin, capture_output=True, text=True,
                              timeout=timeout, env=environ, check=False)
    return Done(done.returncode, done.stdout, done.stderr)


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\"'\"'") + "'"


@pytest.fixture
def secure_cli(sasl_ssl_broker: ThreadedBroker, client_properties: Path) -> Cli:
    """``secure_cli("topics", "list")``: the CLI against ``sasl_ssl_broker``."""
    def run(*args: str, **kw: object) -> Done:
        return run_cli(*args, "--bootstrap-server", sasl_ssl_broker.bootstrap_servers,
                       "--command-config", str(client_properties), **kw)  # type: ignore[arg-type]

    return run
