"""Dynamic broker configs may hold passwords: they are stored encrypted with
``password.encoder.secret`` in Kafka's format (refused without one, as Kafka refuses them), read
back at restart, re-encrypted by ``password.encoder.old.secret``, and a secret that cannot decrypt
them stops the start with one line; the file is the broker user's only (0600)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from trio_broker.broker.config import BrokerConfig
from trio_broker.broker.config.dynamic import DYNAMIC_CONFIG_FILE, DynamicBrokerConfigs
from trio_broker.broker.security.password_encoder import PasswordDecodeError, PasswordEncoder
from trio_broker.cli import main
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

SECRET_KEY = "listener.name.plaintext.ssl.key.password"
PASSWORD = "key-s3cret"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _set(broker: ThreadedBroker, entries: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in entries.items()])
    admin.incremental_alter_configs([resource])[resource].result(10)


def _stored(data: Path) -> dict[str, str]:
    return json.loads((data / DYNAMIC_CONFIG_FILE).read_text())["0"]


def _broker(data: Path, **settings: str) -> ThreadedBroker:
    return ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(data), **settings}).start()


def _per_broker(broker: ThreadedBroker) -> dict[str, str]:
    assert broker.broker is not None
    return dict(broker.broker.state.dynamic_configs.per_broker)


def test_a_dynamic_password_is_refused_without_password_encoder_secret(tmp_path: Path) -> None:
    broker = _broker(tmp_path / "data")
    try:
        with pytest.raises(KafkaException) as info:
            _set(broker, {SECRET_KEY: PASSWORD})
        error = info.value.args[0]
        assert error.code() == KafkaError.INVALID_REQUEST
        assert "Password encoder secret not configured" in error.str()
        assert SECRET_KEY not in _per_broker(broker)
    finally:
        broker.stop()
    path = tmp_path / "data" / DYNAMIC_CONFIG_FILE
    assert not path.exists() or PASSWORD not in path.read_text()


@pytest.mark.timeout(120)
def test_a_dynamic_password_is_stored_encrypted_read_back_and_rotated(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    old_umask = os.umask(0o022)
    try:
        broker = _broker(data, password_encoder_secret="first-secret")
        try:
            _set(broker, {SECRET_KEY: PASSWORD})
            admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            described = admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")])
            configs = next(iter(described.values())).result(10)
            assert configs[SECRET_KEY].is_sensitive
            assert configs[SECRET_KEY].value is None
            assert configs["password.encoder.secret"].is_sensitive
            assert configs["password.encoder.secret"].value is None
            encrypted = _stored(data)[SECRET_KEY]
            _set(broker, {"max.connections.per.ip": "77"})  # the password is left as it was
            assert _stored(data)[SECRET_KEY] == encrypted
            del admin  # librdkafka reconnects (and logs) until the client is gone
        finally:
            broker.stop()
    finally:
        os.umask(old_umask)
    path = data / DYNAMIC_CONFIG_FILE
    assert PASSWORD not in path.read_text()
    assert _mode(path) == 0o600
    assert PasswordEncoder("first-secret").decode(encrypted) == PASSWORD
    assert "encryptedPassword:" in encrypted
    assert "initializationVector:" in encrypted

    path.chmod(0o644)  # as an older broker left it: tightened at start
    broker = _broker(data, password_encoder_secret="first-secret")
    try:
        assert _per_broker(broker)[SECRET_KEY] == PASSWORD
        assert _mode(path) == 0o600
    finally:
        broker.stop()

    # a secret that cannot decrypt them, or none: one line, and no broker
    serve = ["serve", "--override", f"log.dirs={data}", "--override",
             "listeners=PLAINTEXT://127.0.0.1:0"]
    assert main([*serve, "--override", "password.encoder.secret=wrong"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"password.encoder.secret cannot decrypt {SECRET_KEY}" in err
    assert main(serve) == 2
    assert "holds encrypted passwords" in capsys.readouterr().err

    # rotation: the old secret decrypts, the new one re-encrypts, at start
    broker = _broker(data, password_encoder_secret="second-secret",
                     password_encoder_old_secret="first-secret")
    try:
        assert _per_broker(broker)[SECRET_KEY] == PASSWORD
    finally:
        broker.stop()
    rotated = _stored(data)[SECRET_KEY]
    assert PasswordEncoder("second-secret").decode(rotated) == PASSWORD
    with pytest.raises(PasswordDecodeError):
        PasswordEncoder("first-secret").decode(rotated)
    assert _mode(path) == 0o600


def test_a_password_an_older_broker_stored_in_clear_is_encrypted_once_a_secret_is_set(
        tmp_path: Path) -> None:
    (tmp_path / DYNAMIC_CONFIG_FILE).write_text(json.dumps(
        {"version": 1, "default": {}, "0": {SECRET_KEY: PASSWORD, "max.connections": "9"}}))
    without = DynamicBrokerConfigs.load(BrokerConfig().evolve(log_dirs=str(tmp_path)))
    assert without.per_broker[SECRET_KEY] == PASSWORD  # still read: nothing to decrypt it with
    assert PASSWORD in (tmp_path / DYNAMIC_CONFIG_FILE).read_text()
    static = BrokerConfig().evolve(log_dirs=str(tmp_path), password_encoder_secret="s")
    store = DynamicBrokerConfigs.load(static)
    assert store.per_broker == {SECRET_KEY: PASSWORD, "max.connections": "9"}
    stored = _stored(tmp_path)
    assert PASSWORD not in json.dumps(stored)
    assert stored["max.connections"] == "9"
    assert PasswordEncoder("s").decode(stored[SECRET_KEY]) == PASSWORD
