"""The REST proxy in front of a test cluster: records whose leader moved are sent again, as
Kafka's producer sends them, and each record is written once."""

from __future__ import annotations

import json
from types import SimpleNamespace

import httpx
import trio

from trio_broker.broker.rest_proxy import serve_rest_proxy
from trio_broker.testing import open_cluster


async def test_produce_follows_a_moved_leader() -> None:
    async with open_cluster(3) as cluster, trio.open_nursery() as nursery:
        config = cluster.state.config.evolve(rest_proxy_listener="http://127.0.0.1:0")
        # what the proxy reads of a broker's state: the first node's address, the cluster id,
        # the metrics its requests are counted in
        first = cluster.brokers[0]
        state = SimpleNamespace(endpoints={"PLAINTEXT": (first.host, first.port)},
                                cluster_id=cluster.state.cluster_id,
                                metrics=cluster.state.metrics)
        host, port = await nursery.start(serve_rest_proxy, config, state)
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=30) as rest:
            cluster_id = (await rest.get("/v3/clusters")).json()["data"][0]["cluster_id"]
            base = f"/v3/clusters/{cluster_id}"
            created = await rest.post(f"{base}/topics", json={
                "topic_name": "moving", "partitions_count": 1, "replication_factor": 3})
            assert created.status_code == 201, created.text
            url = f"{base}/topics/moving/records"
            body = "".join(json.dumps({"value": {"data": i}}) for i in range(100))
            first = await rest.post(url, content=body,
                                    headers={"content-type": "application/json"})
            assert first.text.count('"error_code":200') == 100
            # the leader moves, and the first Produce requests are answered as a broker that
            # has just lost the leadership answers them
            old = cluster.model.partition("moving", 0).leader
            cluster.move_leader("moving", 0, (old + 1) % 3)
            cluster.inject("Produce", ["NOT_LEADER_OR_FOLLOWER"] * 2)
            second = await rest.post(url, content=body,
                                     headers={"content-type": "application/json"})
            reports = [json.loads(line) for line in second.text.split("\r\n")[:-1]]
            assert [r["error_code"] for r in reports] == [200] * 100
            assert [r["offset"] for r in reports] == list(range(100, 200))
            # what cannot be written after the resends is reported, with a retriable code
            cluster.inject("Produce", ["NOT_LEADER_OR_FOLLOWER"] * 6)
            failed = await rest.post(url, json={"value": {"data": "x"}})
            assert (failed.status_code, failed.json()["error_code"]) == (500, 500)
        nursery.cancel_scope.cancel()
