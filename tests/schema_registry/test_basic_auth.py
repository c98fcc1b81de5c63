"""The registry behind HTTP basic authentication as the broker's SASL users, with the broker's
ACLs deciding what each may do on each subject (docs/schema-registry.md, "Users and
permissions"); through confluent-kafka's SchemaRegistryClient and plain HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tests.security_files import password
from trio_broker.broker.security import add_user
from trio_broker.testing import ThreadedBroker

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
STRING = json.dumps({"type": "string"})


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[ThreadedBroker]:
    users = tmp_path / "users.json"
    for user in ("admin", "alice", "bob"):
        add_user(users, user, password(user), mechanisms=("SCRAM-SHA-256",), iterations=4096)
    broker = ThreadedBroker(listeners="SASL_PLAINTEXT://127.0.0.1:0",
                            log_dirs=str(tmp_path / "data"), sasl_credentials_file=str(users),
                            sasl_enabled_mechanisms="SCRAM-SHA-256",
                            authorizer_class_name=AUTHORIZER, super_users="User:admin",
                            connection_failed_authentication_delay_ms=0,
                            shutdown_timeout_ms=1000,
                            schema_registry_listener="http://127.0.0.1:0",
                            schema_registry_authentication_method="BASIC").start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers,
                             "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "admin",
                             "sasl.password": password("admin")})
        grants = [AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL,
                             "User:alice", "*", op, AclPermissionType.ALLOW)
                  for op in (AclOperation.DESCRIBE, AclOperation.WRITE)]
        grants.append(AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL,
                                 "User:bob", "*", AclOperation.DESCRIBE,
                                 AclPermissionType.ALLOW))
        for future in admin.create_acls(grants).values():
            future.result(30)
        yield broker
    finally:
        broker.stop()


def _client(broker: ThreadedBroker, user: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": broker.schema_registry_url,
                                 "basic.auth.user.info": f"{user}:{password(user)}"})


def test_users_and_subject_permissions(secured: ThreadedBroker) -> None:
    url = secured.schema_registry_url
    anonymous = httpx.get(f"{url}/subjects")
    assert (anonymous.status_code, anonymous.json()["error_code"]) == (401, 401)
    assert anonymous.headers["www-authenticate"] == 'Basic realm="SchemaRegistry"'
    assert httpx.get(f"{url}/subjects", auth=("alice", "wrong")).status_code == 401

    admin, alice, bob = (_client(secured, u) for u in ("admin", "alice", "bob"))
    # alice may write orders' subjects; bob only read them; nobody but admin the others
    schema_id = alice.register_schema("orders-value", Schema(STRING, "AVRO"))
    admin.register_schema("payments-value", Schema(STRING, "AVRO"))
    assert bob.get_latest_version("orders-value").schema_id == schema_id
    with pytest.raises(SchemaRegistryError) as refused:
        bob.register_schema("orders-value", Schema(json.dumps({"type": "long"}), "AVRO"))
    assert (refused.value.http_status_code, refused.value.error_code) == (403, 40301)
    with pytest.raises(SchemaRegistryError) as hidden:
        alice.get_latest_version("payments-value")
    assert hidden.value.error_code == 40301
    with pytest.raises(SchemaRegistryError) as admin_only:
        alice.delete_subject("orders-value")
    assert admin_only.value.error_code == 40301
    with pytest.raises(SchemaRegistryError) as global_config:
        alice.set_compatibility(level="NONE")
    assert global_config.value.error_code == 40301

    # lists show what the user may read; an id is readable through a readable subject
    assert alice.get_subjects() == ["orders-value"]
    assert sorted(admin.get_subjects()) == ["orders-value", "payments-value"]
    assert bob.get_schema(schema_id).schema_str == '"string"'
    assert [v.subject for v in bob.get_schema_versions(schema_id)] == ["orders-value"]
    # so is a GUID; one only an unreadable subject holds is refused
    shared = alice.register_schema_full_response("orders-value", Schema(STRING, "AVRO")).guid
    assert shared is not None
    assert bob.get_schema_by_guid(shared).schema_str == '"string"'
    secret = admin.register_schema_full_response("payments-key", Schema('"long"', "AVRO")).guid
    with pytest.raises(SchemaRegistryError) as by_guid:
        bob.get_schema_by_guid(str(secret))
    assert by_guid.value.error_code == 40301
    assert admin.delete_subject("orders-value") == [1]
