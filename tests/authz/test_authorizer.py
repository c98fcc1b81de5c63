"""Kafka's authorizer decisions, on the authorizer alone (no sockets): patterns, implications,
DENY winning, hosts, super users, the no-ACL default, filters, and the ACL file."""

from __future__ import annotations

import json

import pytest

from trio_broker.broker.config import ConfigError, build_config
from trio_broker.broker.security.acl import (
    AclBinding,
    AclFilter,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    validate_binding,
)
from trio_broker.broker.security.acl_store import ACL_FILE, AclStore, AclStoreError

T, G, C, X = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
              ResourceType.TRANSACTIONAL_ID)
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
Op = Operation


def acl(rtype: ResourceType, name: str, principal: str, op: Operation,
        permission: Permission = ALLOW, *, pattern: PatternType = LIT,
        host: str = "*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


def authorizer(*bindings: AclBinding, **kw: object) -> Authorizer:
    a = Authorizer(**kw)  # type: ignore[arg-type]
    a.replace_all(bindings)
    return a


ALICE, BOB = "User:alice", "User:bob"


def test_literal_prefixed_and_wildcard_patterns():
    a = authorizer(acl(T, "orders", ALICE, Op.READ),
                   acl(T, "logs-", ALICE, Op.WRITE, pattern=PRE),
                   acl(T, "*", BOB, Op.READ))
    assert a.authorize(ALICE, "h", Op.READ, T, "orders")
    assert not a.authorize(ALICE, "h", Op.READ, T, "orders2")  # literal is exact
    assert a.authorize(ALICE, "h", Op.WRITE, T, "logs-app")
    assert not a.authorize(ALICE, "h", Op.WRITE, T, "log")
    assert a.authorize(BOB, "h", Op.READ, T, "anything")
    assert not a.authorize(BOB, "h", Op.WRITE, T, "anything")
    assert not a.authorize(ALICE, "h", Op.READ, G, "orders")  # another resource type


def test_implied_operations():
    a = authorizer(acl(T, "t", ALICE, Op.WRITE), acl(T, "u", ALICE, Op.ALTER_CONFIGS),
                   acl(T, "v", ALICE, Op.ALL))
    assert a.authorize(ALICE, "h", Op.DESCRIBE, T, "t")  # WRITE implies DESCRIBE
    assert not a.authorize(ALICE, "h", Op.READ, T, "t")
    assert a.authorize(ALICE, "h", Op.DESCRIBE_CONFIGS, T, "u")
    assert not a.authorize(ALICE, "h", Op.DESCRIBE, T, "u")
    assert all(a.authorize(ALICE, "h", op, T, "v") for op in (Op.READ, Op.DELETE, Op.ALTER))
    assert a.authorized_operations(ALICE, "h", T, "t") == {Op.WRITE, Op.DESCRIBE}


def test_deny_wins_and_denies_only_its_operation():
    a = authorizer(acl(T, "t", ALICE, Op.ALL), acl(T, "t", ALICE, Op.WRITE, DENY),
                   acl(T, "p-", "User:*", Op.READ, pattern=PRE),
                   acl(T, "p-secret", ALICE, Op.READ, DENY))
    assert not a.authorize(ALICE, "h", Op.WRITE, T, "t")
    assert a.authorize(ALICE, "h", Op.READ, T, "t")
    assert a.authorize(ALICE, "h", Op.DESCRIBE, T, "t")  # DENY WRITE does not deny DESCRIBE
    assert not authorizer(acl(T, "t", ALICE, Op.READ), acl(T, "t", ALICE, Op.DESCRIBE, DENY)
                          ).authorize(ALICE, "h", Op.DESCRIBE, T, "t")
    # a prefixed ALLOW and a literal DENY (a user wildcard ALLOW too)
    assert not a.authorize(ALICE, "h", Op.READ, T, "p-secret")
    assert a.authorize(BOB, "h", Op.READ, T, "p-secret")


def test_hosts_and_principals():
    a = authorizer(acl(T, "t", ALICE, Op.READ, host="10.0.0.1"),
                   acl(T, "t", "User:*", Op.DESCRIBE))
    assert a.authorize(ALICE, "10.0.0.1", Op.READ, T, "t")
    assert not a.authorize(ALICE, "127.0.0.1", Op.READ, T, "t")
    assert a.authorize(BOB, "127.0.0.1", Op.DESCRIBE, T, "t")
    assert a.authorize(None, "127.0.0.1", Op.DESCRIBE, T, "t")  # User:ANONYMOUS is a user
    assert not a.authorize("Group:x", "127.0.0.1", Op.DESCRIBE, T, "t")


def test_super_users_and_the_no_acl_default():
    strict = authorizer(acl(T, "t", ALICE, Op.READ), super_users=["User:admin"])
    assert strict.authorize("User:admin", "h", Op.DELETE, T, "t")
    assert not strict.authorize(BOB, "h", Op.READ, T, "free")  # no ACL: denied
    loose = authorizer(acl(T, "t", ALICE, Op.READ), allow_if_no_acl=True)
    assert loose.authorize(BOB, "h", Op.READ, T, "free")  # no ACL names it
    assert not loose.authorize(BOB, "h", Op.READ, T, "t")  # some ACL names it


def test_authorize_by_resource_type():
    a = authorizer(acl(T, "t", ALICE, Op.WRITE), acl(T, "x-", BOB, Op.WRITE, pattern=PRE),
                   acl(T, "x-", BOB, Op.WRITE, DENY, pattern=PRE))
    assert a.authorize_any(ALICE, "h", Op.WRITE, T)
    assert not a.authorize_any(BOB, "h", Op.WRITE, T)  # its only ALLOW is covered by a DENY
    assert not a.authorize_any("User:carol", "h", Op.WRITE, T)


def test_filters():
    bindings = [acl(T, "orders", ALICE, Op.READ), acl(T, "ord", BOB, Op.WRITE, pattern=PRE),
                acl(T, "*", BOB, Op.DESCRIBE), acl(G, "g", ALICE, Op.READ)]
    def matched(f: AclFilter) -> list[AclBinding]:
        return [b for b in bindings if f.matches(b)]
    assert matched(AclFilter()) == bindings
    assert matched(AclFilter(T, "orders", PatternType.MATCH)) == bindings[:3]
    assert matched(AclFilter(T, "orders", PatternType.ANY)) == bindings[:1]
    assert matched(AclFilter(T, "ord", PRE)) == bindings[1:2]
    assert matched(AclFilter(principal=ALICE)) == [bindings[0], bindings[3]]
    assert matched(AclFilter(operation=Op.WRITE, permission=ALLOW)) == bindings[1:2]
    assert AclFilter(ResourceType.UNKNOWN).invalid()


@pytest.mark.parametrize("binding", [
    acl(ResourceType.ANY, "t", ALICE, Op.READ),
    acl(T, "t", ALICE, Op.ANY),
    acl(T, "t", ALICE, Op.READ, Permission.ANY),
    acl(T, "t", ALICE, Op.READ, pattern=PatternType.MATCH),
    acl(T, "", ALICE, Op.READ),
    acl(C, "other", ALICE, Op.ALTER),
    acl(T, "t", "alice", Op.READ),
    acl(G, "g", ALICE, Op.WRITE),
])
def test_bindings_kafka_refuses(binding):
    assert validate_binding(binding) is not None


def test_acl_file_survives_and_is_replaced_atomically(tmp_path):
    store = AclStore(tmp_path / ACL_FILE)
    store.add([acl(T, "t", ALICE, Op.READ), acl(G, "g-", BOB, Op.READ, pattern=PRE)])
    again = AclStore(tmp_path / ACL_FILE)
    assert again.acls == store.acls
    assert len(again.acls) == 2
    assert again.authorize(BOB, "h", Op.READ, G, "g-1")
    [gone] = again.delete([AclFilter(principal=ALICE)])
    assert [b.principal for b in gone] == [ALICE]
    assert len(AclStore(tmp_path / ACL_FILE).acls) == 1
    assert [p.name for p in tmp_path.iterdir()] == [ACL_FILE]  # no temp file left
    (tmp_path / ACL_FILE).write_text(json.dumps({"acls": [{"name": "x"}]}))
    with pytest.raises(AclStoreError):  # refuse to start rather than lose every ACL
        AclStore(tmp_path / ACL_FILE)


def test_authorizer_config(tmp_path):
    with pytest.raises(ConfigError, match=r"authorizer\.class\.name"):
        build_config({"log.dirs": str(tmp_path), "authorizer.class.name": "com.example.Mine"})
    config = build_config({"log.dirs": str(tmp_path), "super.users": "User:a;User:b",
                           "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                           "allow.everyone.if.no.acl.found": "true"})
    assert config.allow_everyone_if_no_acl_found is True
    assert config.super_users == "User:a;User:b"
