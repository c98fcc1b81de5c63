"""Basic authentication: each request runs as the broker's SASL user its credentials name,
so the authorizer's ACLs decide what it may do over HTTP as over Kafka's protocol."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.security_files import password
from trio_broker.broker.security import add_user
from trio_broker.testing import ThreadedBroker

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(proxy URL, cluster path) of a SASL broker with ACLs and basic authentication."""
    users = tmp_path / "users.json"
    for user in ("admin", "alice", "bob"):
        add_user(users, user, password(user), mechanisms=("SCRAM-SHA-256",), iterations=4096)
    broker = ThreadedBroker(listeners="SASL_PLAINTEXT://127.0.0.1:0",
                            log_dirs=str(tmp_path / "data"), sasl_credentials_file=str(users),
                            sasl_enabled_mechanisms="PLAIN,SCRAM-SHA-256",
                            authorizer_class_name=AUTHORIZER, super_users="User:admin",
                            connection_failed_authentication_delay_ms=0,
                            group_initial_rebalance_delay_ms=0, shutdown_timeout_ms=1000,
                            rest_proxy_listener="http://127.0.0.1:0",
                            rest_proxy_authentication_method="BASIC").start()
    try:
        url = broker.rest_proxy_url
        listing = httpx.get(f"{url}/v3/clusters", auth=("admin", password("admin")))
        assert listing.status_code == 200, listing.text
        yield url, f"/v3/clusters/{listing.json()['data'][0]['cluster_id']}"
    finally:
        broker.stop()


def _as(url: str, user: str, secret: str | None = None) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=30,
                        auth=(user, secret if secret is not None else password(user)))


def test_requests_run_as_their_user(secured: tuple[str, str]) -> None:
    url, cluster = secured
    anonymous = httpx.get(f"{url}/v3/clusters")
    assert (anonymous.status_code, anonymous.json()["error_code"]) == (401, 401)
    assert anonymous.headers["www-authenticate"] == 'Basic realm="trio-broker"'
    wrong = httpx.get(f"{url}/v3/clusters", auth=("alice", "not her password"))
    assert wrong.status_code == 401
    assert httpx.get(f"{url}/v3/clusters", auth=("mallory", "x")).status_code == 401

    with _as(url, "admin") as admin, _as(url, "alice") as alice, _as(url, "bob") as bob:
        for name in ("open", "secret"):
            assert admin.post(f"{cluster}/topics", json={"topic_name": name}).status_code == 201
        for operation in ("DESCRIBE", "WRITE"):
            assert admin.post(f"{cluster}/acls", json={
                "resource_type": "TOPIC", "resource_name": "open", "pattern_type": "LITERAL",
                "principal": "User:alice", "host": "*", "operation": operation,
                "permission": "ALLOW"}).status_code == 201

        names = {t["topic_name"] for t in alice.get(f"{cluster}/topics").json()["data"]}
        assert names == {"open"}
        assert {t["topic_name"] for t in admin.get(f"{cluster}/topics").json()["data"]} >= {
            "open", "secret"}
        record = {"value": {"type": "STRING", "data": "hello"}}
        written = alice.post(f"{cluster}/topics/open/records", json=record)
        assert (written.status_code, written.json()["error_code"]) == (200, 200)
        for client, topic in ((alice, "secret"), (bob, "open")):
            refused = client.post(f"{cluster}/topics/{topic}/records", json=record)
            assert (refused.status_code, refused.json()["error_code"]) == (403, 40301)
        denied = bob.post(f"{cluster}/topics", json={"topic_name": "bobs"})
        assert (denied.status_code, denied.json()["error_code"]) == (403, 40301)

        # a v2 consumer instance belongs to the user who made it
        created = alice.post("/consumers/g", content=b'{"name": "mine"}',
                             headers={"content-type": "application/vnd.kafka.v2+json"})
        assert created.status_code == 200, created.text
        path = "/consumers/g/instances/mine/subscription"
        assert alice.get(path).status_code == 200
        assert bob.get(path).status_code == 404
        assert alice.delete("/consumers/g/instances/mine").status_code == 204
