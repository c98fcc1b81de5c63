"""``trio-broker schemas``: a Schema Registry's subjects, versions, compatibility, config and
mode over Confluent's REST API, checked against confluent-kafka's ``SchemaRegistryClient``."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from trio_broker.cli import main

USER = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
USER_2 = {"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}]}
USER_BAD = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "int"}]}


@pytest.fixture
def schema_files(tmp_path: Path) -> dict[str, Path]:
    files = {}
    for name, schema in (("user", USER), ("user2", USER_2), ("bad", USER_BAD)):
        files[name] = tmp_path / f"{name}.avsc"
        files[name].write_text(json.dumps(schema))
    files["proto"] = tmp_path / "order.proto"
    files["proto"].write_text('syntax = "proto3";\nmessage Order { string id = 1; }\n')
    return files


def _one_line_error(err: str) -> str:
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    return err


def test_register_list_get_check_and_delete(kafka_broker, schema_files, capsys):
    url = kafka_broker.schema_registry_url
    sr = ["--registry", url]
    assert main(["schemas", "register", "cli-users-value", str(schema_files["user"]),
                 "-o", "plain", *sr]) == 0
    first_id = int(capsys.readouterr().out)
    client = SchemaRegistryClient({"url": url})
    assert client.lookup_schema("cli-users-value", Schema(json.dumps(USER), "AVRO")
                                ).schema_id == first_id
    assert main(["schemas", "register", "cli-users-value", str(schema_files["user2"]), *sr]) == 0
    assert "Registered under cli-users-value with id" in capsys.readouterr().out
    assert main(["schemas", "register", "cli-orders-value", str(schema_files["proto"]),
                 *sr]) == 0  # .proto: PROTOBUF without --type
    capsys.readouterr()
    assert client.get_latest_version("cli-orders-value").schema.schema_type == "PROTOBUF"

    assert main(["schemas", "list", "--prefix", "cli-", "-o", "plain", *sr]) == 0
    assert capsys.readouterr().out.split() == ["cli-orders-value", "cli-users-value"]
    assert main(["schemas", "versions", "cli-users-value", "-o", "json", *sr]) == 0
    assert json.loads(capsys.readouterr().out) == [1, 2]
    assert main(["schemas", "get", "cli-users-value", "--version", "1", "-o", "json", *sr]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["id"], shown["version"], json.loads(shown["schema"])) == (first_id, 1, USER)
    assert main(["schemas", "get", "--id", str(first_id), "-o", "plain", *sr]) == 0
    assert json.loads(capsys.readouterr().out) == USER

    # an incompatible schema: exit 1 and the registry's reasons, as a CI gate uses it
    assert main(["schemas", "check", "cli-users-value", str(schema_files["bad"]), *sr]) == 1
    out = capsys.readouterr().out
    assert "Incompatible with cli-users-value (latest)." in out
    assert "TYPE_MISMATCH" in out
    assert main(["schemas", "check", "cli-users-value", str(schema_files["user2"]),
                 "-o", "plain", *sr]) == 0
    assert capsys.readouterr().out.splitlines() == ["compatible"]

    assert main(["schemas", "delete", "cli-users-value", "--version", "1", *sr]) == 0
    capsys.readouterr()
    assert client.get_versions("cli-users-value") == [2]
    assert main(["schemas", "versions", "cli-users-value", "--deleted", "-o", "plain", *sr]) == 0
    assert capsys.readouterr().out.split() == ["1", "2"]
    assert main(["schemas", "delete", "cli-users-value", "--version", "1", "--permanent",
                 *sr]) == 0
    assert "Permanently deleted cli-users-value version(s) 1." in capsys.readouterr().out


def test_config_and_mode(kafka_broker, capsys):
    sr = ["--registry", kafka_broker.schema_registry_url]
    assert main(["schemas", "config", "-o", "plain", *sr]) == 0
    assert capsys.readouterr().out == "BACKWARD\n"
    assert main(["schemas", "config", "cli-config-subject", "--set", "FULL_TRANSITIVE", *sr]) == 0
    assert capsys.readouterr().out == "cli-config-subject: FULL_TRANSITIVE (set)\n"
    client = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    assert client.get_compatibility("cli-config-subject") == "FULL_TRANSITIVE"
    assert main(["schemas", "mode", "cli-config-subject", "-o", "json", *sr]) == 0
    assert json.loads(capsys.readouterr().out) == {"mode": "READWRITE"}  # the global one


def test_errors_are_one_line(kafka_broker, tmp_path, capsys):
    sr = ["--registry", kafka_broker.schema_registry_url]
    assert main(["schemas", "get", "cli-no-such-subject", *sr]) == 1
    assert _one_line_error(capsys.readouterr().err) == (
        "trio-broker schemas: error: Subject 'cli-no-such-subject' not found. (40401)\n")
    assert main(["schemas", "register", "x", str(tmp_path / "missing.avsc"), *sr]) == 2
    assert "missing.avsc: No such file or directory" in _one_line_error(capsys.readouterr().err)
    (tmp_path / "broken.avsc").write_text("{not json")
    assert main(["schemas", "register", "cli-broken", str(tmp_path / "broken.avsc"), *sr]) == 1
    assert "(42201)" in _one_line_error(capsys.readouterr().err)
    assert main(["schemas", "register", "x", str(tmp_path / "broken.avsc"), "--reference",
                 "nocolon", *sr]) == 2
    assert "expected NAME=SUBJECT:VERSION" in _one_line_error(capsys.readouterr().err)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    assert main(["schemas", "list", "--registry", f"http://127.0.0.1:{closed}"]) == 1
    assert "cannot reach the Schema Registry at" in _one_line_error(capsys.readouterr().err)
    assert main(["schemas", "list", "--registry", "127.0.0.1:8081"]) == 2
    assert "expected http://host:port" in _one_line_error(capsys.readouterr().err)
