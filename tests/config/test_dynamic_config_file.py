"""Dynamic broker configs may hold passwords: their file is the broker user's only (0600), as
users.json and acls.json are, and a file an older broker left readable is tightened at start."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from trio_broker.broker.config.dynamic import DYNAMIC_CONFIG_FILE
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

SECRET_KEY = "listener.name.plaintext.ssl.key.password"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_secret_set_with_alter_configs_is_written_owner_only(tmp_path: Path) -> None:
    data = tmp_path / "data"
    old_umask = os.umask(0o022)
    try:
        broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(data)}).start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
                ConfigEntry(SECRET_KEY, "key-s3cret",
                            incremental_operation=AlterConfigOpType.SET)])
            admin.incremental_alter_configs([resource])[resource].result(10)
            described = admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")])
            entry = next(iter(described.values())).result(10)[SECRET_KEY]
            assert entry.is_sensitive
            assert entry.value is None
            del admin  # librdkafka reconnects (and logs) until the client is gone
        finally:
            broker.stop()
    finally:
        os.umask(old_umask)
    path = data / DYNAMIC_CONFIG_FILE
    assert "key-s3cret" in path.read_text()
    assert _mode(path) == 0o600
    assert not (data / (DYNAMIC_CONFIG_FILE + ".tmp")).exists()
    # a file left readable by others (as an older broker wrote it) is tightened at start
    path.chmod(0o644)
    broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(data)}).start()
    try:
        assert _mode(path) == 0o600
    finally:
        broker.stop()
