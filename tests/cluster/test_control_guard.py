"""The control endpoint answers only what a test suite sends: JSON writes, its own Host names, a
same-origin Origin, and the bearer token when one is set (a web page can send none of these)."""

from __future__ import annotations

import http.client
import json
from typing import Any

import trio

from trio_broker.testing import Cluster, open_cluster


async def call(cluster: Cluster, method: str, path: str, *, body: bytes | None = None,
               headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
    """One request to ``cluster``'s control endpoint (http.client in a thread, so the cluster's
    loop keeps serving); the Host header is exactly the one in ``headers`` (default: the bound
    address)."""
    assert cluster.control_address is not None
    host, port = cluster.control_address
    sent = {"Host": f"{host}:{port}", **(headers or {})}

    def run() -> tuple[int, dict[str, str], Any]:
        conn = http.client.HTTPConnection(host, port, timeout=10)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for name, value in sent.items():
                conn.putheader(name, value)
            if body is not None:
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            answer = conn.getresponse()
            raw = answer.read()
            return (answer.status, {k.lower(): v for k, v in answer.getheaders()},
                    json.loads(raw) if raw else None)
        finally:
            conn.close()

    return await trio.to_thread.run_sync(run)


async def test_a_cross_site_form_cannot_stop_a_broker_or_inject_faults() -> None:
    async with open_cluster(2, control_listener="http://127.0.0.1:0") as cluster:
        # what a web page can send without a CORS preflight: text/plain, form or no type at all
        for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
            headers = {} if content_type is None else {"Content-Type": content_type}
            status, _, answer = await call(cluster, "POST", "/v1/brokers/1/stop",
                                           headers=headers)
            assert status == 415, (content_type, answer)
            status, _, _ = await call(cluster, "POST", "/v1/faults", headers=headers,
                                      body=b'{"api": "Produce", "errors": [29]}')
            assert status == 415
        assert cluster.live(1)
        assert cluster.faults.pending() == {}
        json_type = {"Content-Type": "application/json; charset=utf-8"}
        status, _, answer = await call(cluster, "POST", "/v1/brokers/1/stop", headers=json_type)
        assert (status, answer) == (200, {"node_id": 1, "alive": False})
        assert not cluster.live(1)
        status, _, _ = await call(cluster, "DELETE", "/v1/faults", headers={
            "Content-Type": "text/plain"})
        assert status == 415
        status, _, _ = await call(cluster, "DELETE", "/v1/faults")
        assert status == 200


async def test_dns_rebinding_and_cross_origin_reads_are_refused() -> None:
    async with open_cluster(1, control_listener="http://127.0.0.1:0") as cluster:
        port = cluster.control_address[1] if cluster.control_address else 0
        status, _, answer = await call(cluster, "GET", "/v1/requests",
                                       headers={"Host": f"rebind.evil.example:{port}"})
        assert status == 421, answer
        assert "requests" not in (answer or {})
        # rebinding: the page's Origin names its own Host, still not one of the endpoint's
        status, _, _ = await call(cluster, "GET", "/v1/requests", headers={
            "Host": f"rebind.evil.example:{port}", "Origin": f"http://rebind.evil.example:{port}"})
        assert status == 421
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost"):
            status, _, answer = await call(cluster, "GET", "/v1/requests",
                                           headers={"Host": host})
            assert status == 200, host
            assert "requests" in answer
        status, _, _ = await call(cluster, "GET", "/v1/brokers", headers={
            "Origin": "http://evil.example"})
        assert status == 403
        status, _, _ = await call(cluster, "GET", "/v1/brokers", headers={"Origin": "null"})
        assert status == 403
        status, _, _ = await call(cluster, "GET", "/v1/brokers", headers={
            "Origin": f"http://127.0.0.1:{port}"})
        assert status == 200


async def test_a_wildcard_bind_answers_loopback_and_the_allowed_names_only() -> None:
    async with open_cluster(1, control_listener="http://0.0.0.0:0",
                            http_allowed_hosts="ci-runner.internal") as cluster:
        assert cluster.control_address is not None
        port = cluster.control_address[1]  # connecting to 0.0.0.0 reaches this host
        for host, expected in ((f"rebind.evil.example:{port}", 421), ("0.0.0.0", 421),
                               (f"ci-runner.internal:{port}", 200),
                               (f"CI-RUNNER.internal.:{port}", 200),
                               (f"127.0.0.1:{port}", 200)):
            status, _, _ = await call(cluster, "GET", "/v1/brokers", headers={"Host": host})
            assert status == expected, host


async def test_the_bearer_token_is_required_when_set() -> None:
    async with open_cluster(1, control_listener="http://127.0.0.1:0",
                            control_listener_token="s3cret-token") as cluster:
        for authorization in (None, "Bearer wrong", "Basic czNjcmV0LXRva2Vu", "Bearer s3cret"):
            headers = {} if authorization is None else {"Authorization": authorization}
            status, answer_headers, _ = await call(cluster, "GET", "/v1/brokers",
                                                   headers=headers)
            assert status == 401, authorization
            assert answer_headers["www-authenticate"].startswith("Bearer")
        status, _, answer = await call(cluster, "GET", "/v1/brokers",
                                       headers={"Authorization": "Bearer s3cret-token"})
        assert status == 200
        assert [b["node_id"] for b in answer["brokers"]] == [0]
