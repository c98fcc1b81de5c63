"""``trio-broker acls`` with kafka-acls' options, against a broker with the authorizer."""

from __future__ import annotations

import pytest
import trio

from tests.authz.conftest import MECHANISM
from tests.authz.wire_login import describe_all, login
from tests.security_files import password
from trio_broker.cli import main

TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
LITERAL, PREFIXED = 3, 4


def _as(user: str, broker) -> list[str]:
    return ["--bootstrap-server", broker.bootstrap_servers,
            "-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanism={MECHANISM}",
            "-X", f"sasl.username={user}",
            "-X", f"sasl.password={password(user)}"]


def _acls_of(broker, principal: str) -> list[tuple[object, ...]]:
    async def run() -> list[tuple[object, ...]]:
        return [a for a in await describe_all(await login(broker, "admin")) if a[3] == principal]
    return trio.run(run)


def test_add_list_remove(acl_broker, capsys):
    admin = _as("admin", acl_broker)
    assert main(["acls", "--add", "--allow-principal", "User:cli", "--operation", "Read",
                 "--operation", "Describe", "--topic", "orders", "--group", "billing",
                 *admin]) == 0
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, " \
           "patternType=LITERAL)`" in capsys.readouterr().out
    assert _acls_of(acl_broker, "User:cli") == [
        (TOPIC, "orders", LITERAL, "User:cli", "*", 3, 3),
        (TOPIC, "orders", LITERAL, "User:cli", "*", 8, 3),
        (GROUP, "billing", LITERAL, "User:cli", "*", 3, 3),
        (GROUP, "billing", LITERAL, "User:cli", "*", 8, 3)]
    assert main(["acls", "--list", "--topic", "orders", *admin]) == 0
    out = capsys.readouterr().out
    assert ("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
            "patternType=LITERAL)`: \n \t(principal=User:cli, host=*, operation=READ, "
            "permissionType=ALLOW)") in out
    assert "billing" not in out
    assert main(["acls", "--remove", "--group", "billing", "--operation", "Describe",
                 *admin]) == 0
    assert "Removed ACL" in capsys.readouterr().out
    assert [a[1:] for a in _acls_of(acl_broker, "User:cli") if a[0] == GROUP] == [
        ("billing", LITERAL, "User:cli", "*", 3, 3)]
    assert main(["acls", "--remove", "--topic", "orders", "--group", "billing", "--force",
                 *admin]) == 0
    assert _acls_of(acl_broker, "User:cli") == []


def test_producer_and_consumer_conveniences(acl_broker, capsys):
    admin = _as("admin", acl_broker)
    assert main(["acls", "--add", "--allow-principal", "User:conv", "--producer",
                 "--topic", "logs-", "--resource-pattern-type", "prefixed",
                 "--transactional-id", "tx-", "--idempotent", *admin]) == 0
    assert main(["acls", "--add", "--allow-principal", "User:conv", "--deny-principal",
                 "User:mallory", "--deny-host", "10.0.0.9", "--consumer", "--topic", "in",
                 "--group", "g", *admin]) == 0
    capsys.readouterr()
    found = _acls_of(acl_broker, "User:conv")
    assert {(a[0], a[1], a[2], a[5]) for a in found} == {
        (TOPIC, "logs-", PREFIXED, 4), (TOPIC, "logs-", PREFIXED, 8),
        (TOPIC, "logs-", PREFIXED, 5), (TXN, "tx-", PREFIXED, 4), (TXN, "tx-", PREFIXED, 8),
        (CLUSTER, "kafka-cluster", PREFIXED, 12),
        (TOPIC, "in", LITERAL, 3), (TOPIC, "in", LITERAL, 8), (GROUP, "g", LITERAL, 3)}
    denied = _acls_of(acl_broker, "User:mallory")
    assert {(a[1], a[4], a[6]) for a in denied} == {("in", "10.0.0.9", 2), ("g", "10.0.0.9", 2)}


def test_usage_errors_and_refusals(acl_broker, capsys):
    admin = _as("admin", acl_broker)
    assert main(["acls", "--add", "--topic", "t", *admin]) == 2
    assert "--allow-principal" in capsys.readouterr().err
    assert main(["acls", "--add", "--allow-principal", "User:x", "--operation", "Fly",
                 "--topic", "t", *admin]) == 2
    assert "unknown --operation" in capsys.readouterr().err
    assert main(["acls", "--add", "--allow-principal", "User:x", "--consumer", "--topic", "t",
                 *admin]) == 2
    assert "--consumer needs --group" in capsys.readouterr().err
    assert main(["acls", "--remove", *admin]) == 2
    capsys.readouterr()
    assert main(["acls", "--list", *_as("bob", acl_broker)]) == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in capsys.readouterr().err
    assert main(["acls", "--add", "--allow-principal", "User:bob", "--cluster",
                 *_as("bob", acl_broker)]) == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in capsys.readouterr().err


def test_help_shows_kafka_acls_option_names(capsys):
    with pytest.raises(SystemExit):
        main(["acls", "--help"])
    shown = capsys.readouterr().out
    for option in ("--add", "--remove", "--list", "--allow-principal", "--deny-principal",
                   "--allow-host", "--deny-host", "--operation", "--topic", "--group",
                   "--transactional-id", "--cluster", "--resource-pattern-type", "--producer",
                   "--consumer", "--principal", "--force", "--bootstrap-server",
                   "--command-config"):
        assert option in shown, option
