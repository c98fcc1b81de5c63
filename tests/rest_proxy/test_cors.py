"""CORS: off unless origins are configured (no browser page may read the proxy's answers);
configured, a preflight is answered before authentication and answers carry the origin."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from trio_broker.testing import ThreadedBroker

ORIGIN = "http://dashboard.example"


def test_off_by_default(rest: httpx.Client) -> None:
    answer = rest.get("/v3/clusters", headers={"origin": ORIGIN})
    assert answer.status_code == 200
    assert "access-control-allow-origin" not in answer.headers
    preflight = rest.options("/v3/clusters", headers={
        "origin": ORIGIN, "access-control-request-method": "GET"})
    assert "access-control-allow-origin" not in preflight.headers


@pytest.mark.broker_config(rest_proxy_listener="http://127.0.0.1:0",
                           rest_proxy_access_control_allow_origin=ORIGIN,
                           rest_proxy_access_control_allow_methods="GET,POST")
def test_configured_origins(kafka_broker: ThreadedBroker) -> None:
    with httpx.Client(base_url=kafka_broker.rest_proxy_url) as rest:
        preflight = rest.options("/v3/clusters", headers={
            "origin": ORIGIN, "access-control-request-method": "POST",
            "access-control-request-headers": "content-type"})
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == ORIGIN
        assert set(preflight.headers["access-control-allow-methods"].split(", ")) == {
            "GET", "POST"}
        answer = rest.get("/v3/clusters", headers={"origin": ORIGIN})
        assert answer.headers["access-control-allow-origin"] == ORIGIN
        other = rest.get("/v3/clusters", headers={"origin": "http://evil.example"})
        assert "access-control-allow-origin" not in other.headers
        refused = rest.options("/v3/clusters", headers={
            "origin": ORIGIN, "access-control-request-method": "DELETE"})
        assert refused.status_code == 400


def test_served_under_kafka_of_the_console_listener(tmp_path: Path) -> None:
    """``kafka.rest.enable``: the API under ``/kafka`` of the console's listener, as
    Confluent Server serves it; its links keep the prefix; the console is unchanged."""
    from trio_broker.testing import TEST_DEFAULTS

    broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                               "http_listener": "http://127.0.0.1:0",
                               "kafka_rest_enable": True}).start()
    try:
        assert broker.broker is not None
        assert broker.broker.http_address is not None
        host, port = broker.broker.http_address
        base = f"http://{host}:{port}"
        clusters = httpx.get(f"{base}/kafka/v3/clusters")
        assert clusters.status_code == 200, clusters.text
        cluster = clusters.json()["data"][0]
        assert cluster["metadata"]["self"].startswith(f"{base}/kafka/v3/clusters/")
        created = httpx.post(f"{cluster['metadata']['self']}/topics",
                             json={"topic_name": "mounted"})
        assert created.status_code == 201, created.text
        produced = httpx.post(f"{cluster['metadata']['self']}/topics/mounted/records",
                              json={"value": {"type": "STRING", "data": "hi"}})
        assert produced.json()["error_code"] == 200
        assert httpx.get(f"{base}/").status_code == 200  # the console itself
        assert f'href="{base}/kafka/v3/openapi.json"' in httpx.get(f"{base}/").text
    finally:
        broker.stop()


def test_kafka_rest_enable_without_a_console_says_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``kafka.rest.enable`` with no ``http.listener`` serves nothing: one warning names why."""
    from trio_broker.testing import TEST_DEFAULTS

    with caplog.at_level("WARNING", logger="trio_broker.broker.rest_proxy"):
        broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                                   "kafka_rest_enable": True}).start()
        broker.stop()
    assert any("http.listener is not set" in r.getMessage() for r in caplog.records)
