"""A SASL_PLAINTEXT broker with the ACL authorizer on, and users admin (a super user), alice
and bob."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security_files import password
from trio_broker.broker.security import add_user
from trio_broker.testing import ThreadedBroker

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
MECHANISM = "SCRAM-SHA-256"


@pytest.fixture(scope="module")
def acl_users(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("acl-users") / "users.json"
    for user in ("admin", "alice", "bob"):
        add_user(path, user, password(user), mechanisms=(MECHANISM,), iterations=4096)
    return path


def start_acl_broker(data: Path, users: Path, **extra: object) -> ThreadedBroker:
    return ThreadedBroker(listeners="SASL_PLAINTEXT://127.0.0.1:0", log_dirs=str(data),
                          sasl_credentials_file=str(users), sasl_enabled_mechanisms=MECHANISM,
                          authorizer_class_name=AUTHORIZER, super_users="User:admin",
                          group_initial_rebalance_delay_ms=0, shutdown_timeout_ms=1000,
                          **extra).start()


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory, acl_users: Path
               ) -> Iterator[ThreadedBroker]:
    broker = start_acl_broker(tmp_path_factory.mktemp("acl-broker"), acl_users)
    yield broker
    broker.stop()
