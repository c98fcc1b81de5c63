"""v3 ACLs over HTTP on a broker with Kafka's authorizer, checked through confluent-kafka."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ACL_FIELDS = {"kind", "metadata", "cluster_id", "resource_type", "resource_name",
              "pattern_type", "principal", "host", "operation", "permission"}


@pytest.fixture
def acl_proxy(tmp_path: Path) -> Iterator[tuple[ThreadedBroker, httpx.Client, str]]:
    # the proxy's client is User:ANONYMOUS on the PLAINTEXT listener: here a super user
    broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                               "rest_proxy_listener": "http://127.0.0.1:0",
                               "authorizer_class_name": AUTHORIZER,
                               "super_users": "User:ANONYMOUS"}).start()
    try:
        with httpx.Client(base_url=broker.rest_proxy_url, timeout=30) as client:
            cluster_id = client.get("/v3/clusters").json()["data"][0]["cluster_id"]
            yield broker, client, f"/v3/clusters/{cluster_id}"
    finally:
        broker.stop()


def test_create_search_delete(acl_proxy: tuple[ThreadedBroker, httpx.Client, str]) -> None:
    broker, rest, cluster = acl_proxy
    acl = {"resource_type": "TOPIC", "resource_name": "orders-", "pattern_type": "PREFIXED",
           "principal": "User:alice", "host": "*", "operation": "READ", "permission": "ALLOW"}
    created = rest.post(f"{cluster}/acls", json=acl)
    assert (created.status_code, created.content) == (201, b"")
    assert rest.post(f"{cluster}/acls", json={**acl, "resource_type": "GROUP",
                                              "resource_name": "billing",
                                              "pattern_type": "LITERAL"}).status_code == 201

    # what Kafka's own admin client sees
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    seen = admin.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(timeout=10)
    assert {(b.restype, b.name, b.resource_pattern_type) for b in seen} == {
        (ResourceType.TOPIC, "orders-", ResourcePatternType.PREFIXED),
        (ResourceType.GROUP, "billing", ResourcePatternType.LITERAL)}

    listed = rest.get(f"{cluster}/acls", params={"resource_type": "TOPIC"}).json()
    assert listed["kind"] == "KafkaAclList"
    assert listed["metadata"]["self"].endswith(f"{cluster}/acls?resource_type=TOPIC")
    [found] = listed["data"]
    assert set(found) == ACL_FIELDS
    assert {k: found[k] for k in acl} == acl
    assert found["kind"] == "KafkaAcl"
    assert "resource_name=orders-" in found["metadata"]["self"]
    assert len(rest.get(f"{cluster}/acls").json()["data"]) == 2

    deleted = rest.delete(f"{cluster}/acls", params={"resource_type": "GROUP"})
    assert deleted.status_code == 200
    assert [a["resource_name"] for a in deleted.json()["data"]] == ["billing"]
    assert [a["resource_name"] for a in rest.get(f"{cluster}/acls").json()["data"]] == [
        "orders-"]


def test_batch_create(acl_proxy: tuple[ThreadedBroker, httpx.Client, str]) -> None:
    """``POST .../acls:batch``: several ACLs in one CreateAcls, as Confluent's batch."""
    _, rest, cluster = acl_proxy
    acls = [{"resource_type": "TOPIC", "resource_name": name, "pattern_type": "LITERAL",
             "principal": "User:bob", "host": "*", "operation": "WRITE",
             "permission": "ALLOW"} for name in ("a", "b", "c")]
    created = rest.post(f"{cluster}/acls:batch", json={"data": acls})
    assert (created.status_code, created.content) == (201, b"")
    listed = rest.get(f"{cluster}/acls", params={"principal": "User:bob"}).json()["data"]
    assert sorted(a["resource_name"] for a in listed) == ["a", "b", "c"]
    bad = rest.post(f"{cluster}/acls:batch", json={"data": [{**acls[0], "operation": "FLY"}]})
    assert (bad.status_code, bad.json()["error_code"]) == (400, 400)
    empty = rest.post(f"{cluster}/acls:batch", json={"data": []})
    assert empty.status_code == 400


def test_acl_errors(acl_proxy: tuple[ThreadedBroker, httpx.Client, str],
                    rest: httpx.Client, cluster: str) -> None:
    _, secured, secured_cluster = acl_proxy
    # a bare DELETE would remove every ACL: the resource type is required
    assert secured.delete(f"{secured_cluster}/acls").status_code == 400
    bad = secured.post(f"{secured_cluster}/acls", json={
        "resource_type": "TOPIC", "resource_name": "t", "pattern_type": "LITERAL",
        "principal": "User:alice", "host": "*", "operation": "FLY", "permission": "ALLOW"})
    assert (bad.status_code, bad.json()["error_code"]) == (400, 400)
    # Kafka refuses it (ANY is no operation to grant): 40002 with Kafka's message
    refused = secured.post(f"{secured_cluster}/acls", json={
        "resource_type": "TOPIC", "resource_name": "t", "pattern_type": "LITERAL",
        "principal": "User:alice", "host": "*", "operation": "ANY", "permission": "ALLOW"})
    assert (refused.status_code, refused.json()["error_code"]) == (400, 40002)
    # the session broker has no authorizer: Kafka's SECURITY_DISABLED
    disabled = rest.get(f"{cluster}/acls")
    assert (disabled.status_code, disabled.json()["error_code"]) == (400, 40002)
