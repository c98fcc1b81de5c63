"""A Java ``client.properties`` file as Kafka's tools take it: the login in ``sasl.jaas.config``
and the CA in a PEM trust store, through ``trio-broker produce`` and ``consume`` (real
processes), against a SASL_SSL broker with SCRAM and a SASL_PLAINTEXT one with OAUTHBEARER."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import run_cli
from tests.security_files import password
from trio_broker.testing import ThreadedBroker


def _java_properties(path: Path, lines: list[str]) -> Path:
    path.write_text("# a Java client's client.properties\n" + "\n".join(lines) + "\n")
    return path


def test_produce_and_consume_log_in_with_a_jaas_line(sasl_ssl_broker, tls_files, tmp_path,
                                                     unique_topic):
    settings = _java_properties(tmp_path / "client.properties", [
        "security.protocol=SASL_SSL",
        f"ssl.truststore.location={tls_files.ca_pem}",
        "ssl.truststore.type=PEM",
        "sasl.mechanism=SCRAM-SHA-256",
        # a continued line, as Kafka's documentation writes it
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\",
        f'    username="alice" password="{password("alice")}";'])
    topic = unique_topic("jaas")
    common = ["--bootstrap-server", sasl_ssl_broker.bootstrap_servers,
              "--command-config", str(settings)]
    done = run_cli("topics", "create", topic, *common)
    assert done.returncode == 0, done
    done = run_cli("produce", topic, *common, stdin="one\ntwo\n")
    assert (done.returncode, done.stderr) == (0, f"Produced 2 record(s) to {topic}.\n"), done
    done = run_cli("consume", topic, *common, "--from-beginning", "--max-messages", "2")
    assert done.returncode == 0, done
    assert done.stdout.splitlines() == ["one", "two"]

    wrong = _java_properties(tmp_path / "wrong.properties", [
        *settings.read_text().splitlines()[1:-1], '    username="alice" password="nope";'])
    done = run_cli("consume", topic, "--bootstrap-server", sasl_ssl_broker.bootstrap_servers,
                   "--command-config", str(wrong), "--max-messages", "1")
    assert done.returncode == 1
    assert "refused the login of 'alice' (SCRAM-SHA-256)" in done.stderr


def test_a_java_key_store_is_refused_in_one_line_naming_key_and_file(sasl_ssl_broker, tmp_path):
    jks = tmp_path / "client.truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))
    settings = _java_properties(tmp_path / "client.properties", [
        "security.protocol=SASL_SSL", f"ssl.truststore.location={jks}",
        "ssl.truststore.password=changeit", "sasl.mechanism=PLAIN",
        'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="bob" password="x";'])
    done = run_cli("produce", "t", "--bootstrap-server", sasl_ssl_broker.bootstrap_servers,
                   "--command-config", str(settings), stdin="x\n")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"ssl.truststore.location {jks}: not a PEM file" in done.stderr


@pytest.fixture
def oauth_broker(tmp_path: Path) -> Iterator[ThreadedBroker]:
    broker = ThreadedBroker(listeners="SASL_PLAINTEXT://127.0.0.1:0",
                            log_dirs=str(tmp_path / "oauth"),
                            sasl_enabled_mechanisms="OAUTHBEARER", shutdown_timeout_ms=1000,
                            connection_failed_authentication_delay_ms=10).start()
    yield broker
    broker.stop()


def test_an_unsecured_oauthbearer_jaas_line_logs_in(oauth_broker, tmp_path):
    settings = _java_properties(tmp_path / "client.properties", [
        "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=OAUTHBEARER",
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
        'required unsecuredLoginStringClaim_sub="alice";'])
    common = ["--bootstrap-server", oauth_broker.bootstrap_servers,
              "--command-config", str(settings)]
    done = run_cli("produce", "oauth", *common, stdin="token\n")
    assert (done.returncode, done.stderr) == (0, "Produced 1 record(s) to oauth.\n"), done
    done = run_cli("consume", "oauth", *common, "--from-beginning", "--max-messages", "1")
    assert (done.returncode, done.stdout) == (0, "token\n"), done
    expired = _java_properties(tmp_path / "expired.properties", [
        *settings.read_text().splitlines()[1:-1],
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
        'required unsecuredLoginStringClaim_sub="alice" unsecuredLoginLifetimeSeconds="-60";'])
    done = run_cli("produce", "oauth", "--bootstrap-server", oauth_broker.bootstrap_servers,
                   "--command-config", str(expired), stdin="x\n")
    assert done.returncode == 1
    assert "The token has expired" in done.stderr, done.stderr
