"""The client tools on a SASL_SSL listener: settings from ``--command-config`` and ``-X``."""

from __future__ import annotations

import io
import sys

from tests.security_files import password
from trio_broker.cli import main


def _one_line_error(err: str) -> str:
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    return err


def test_every_client_tool_reaches_a_sasl_ssl_listener(
        sasl_ssl_broker, tls_files, tmp_path, unique_topic, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    settings = tmp_path / "client.properties"
    settings.write_text(f"# as Kafka's tools take --command-config\n"
                        f"security.protocol=SASL_SSL\n"
                        f"ssl.ca.location={tls_files.ca_pem}\n"
                        f"sasl.mechanism=SCRAM-SHA-256\n"
                        f"sasl.username=alice\n"
                        f"sasl.password={password('alice')}\n")
    common = ["--bootstrap-server", sasl_ssl_broker.bootstrap_servers,
              "--command-config", str(settings)]
    topic = unique_topic("secure")

    assert main(["topics", "create", topic, "--partitions", "2", *common]) == 0
    assert capsys.readouterr().out == f"Created topic {topic}.\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a:1\nb:2\nc:3\n")))
    assert main(["produce", topic, "--key-separator", ":", *common]) == 0
    assert "Produced 3 record(s)" in capsys.readouterr().err
    assert main(["consume", topic, "--from-beginning", "--max-messages", "3",
                 "--property", "print.key=true", "--property", "key.separator=:",
                 *common]) == 0
    assert sorted(capsys.readouterr().out.splitlines()) == ["a:1", "b:2", "c:3"]
    assert main(["topics", "describe", topic, *common]) == 0
    assert f"Topic: {topic}  PartitionCount: 2" in capsys.readouterr().out
    assert main(["groups", "list", *common]) == 0
    capsys.readouterr()

    # -X wins over the file; only -X, with the protocol from the bootstrap prefix, works too
    assert main(["topics", "list", *common, "-X", "sasl.password=wrong"]) == 1
    assert "Authentication failed" in _one_line_error(capsys.readouterr().err)
    assert main(["topics", "list",
                 "--bootstrap-server", "SASL_SSL://" + sasl_ssl_broker.bootstrap_servers,
                 "-X", f"ssl.ca.location={tls_files.ca_pem}", "-X", "sasl.mechanism=PLAIN",
                 "-X", "sasl.username=bob", "-X", f"sasl.password={password('bob')}"]) == 0
    assert topic in capsys.readouterr().out


def test_bad_client_settings_are_bad_input(sasl_ssl_broker, tmp_path, capsys):
    bootstrap = ["--bootstrap-server", sasl_ssl_broker.bootstrap_servers]
    assert main(["topics", "list", *bootstrap, "-X", "no.such.key=1"]) == 2
    assert "unknown client config 'no.such.key'" in _one_line_error(capsys.readouterr().err)
    assert main(["consume", "t", *bootstrap, "-X", "security.protocol"]) == 2
    assert "expected KEY=VALUE" in _one_line_error(capsys.readouterr().err)
    assert main(["groups", "list", *bootstrap, "-X", "security.protocol=SASL_SSL",
                 "-X", "sasl.mechanism=PLAIN"]) == 2
    assert "needs sasl.username and sasl.password" in _one_line_error(capsys.readouterr().err)
    assert main(["produce", "t", *bootstrap,
                 "--command-config", str(tmp_path / "missing.properties")]) == 2
    assert "--command-config" in _one_line_error(capsys.readouterr().err)


def test_a_bad_setting_names_where_it_was_set(sasl_ssl_broker, tmp_path, capsys):
    bootstrap = ["--bootstrap-server", sasl_ssl_broker.bootstrap_servers]
    settings = tmp_path / "client.properties"
    settings.write_text("security.protocol=SASL_SSL\n"
                        f"ssl.ca.location={tmp_path / 'missing-ca.pem'}\n")
    assert main(["topics", "list", *bootstrap, "--command-config", str(settings)]) == 2
    err = _one_line_error(capsys.readouterr().err)
    assert f"{settings}:2: ssl.ca.location '{tmp_path / 'missing-ca.pem'}'" in err
    assert main(["cluster", "describe", *bootstrap, "-X", "sasl.mechanism=GSSAPI",
                 "-X", "security.protocol=SASL_PLAINTEXT"]) == 2
    err = _one_line_error(capsys.readouterr().err)
    assert "-X sasl.mechanism: sasl.mechanism GSSAPI is not supported" in err
    assert main(["delete-records", "--topic", "t", "--partition", "0", "--offset", "1",
                 *bootstrap, "-X", "no.such.key=1"]) == 2
    assert "-X no.such.key: unknown client config 'no.such.key'" in _one_line_error(
        capsys.readouterr().err)
