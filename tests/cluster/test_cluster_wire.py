"""Each node of a test cluster answers as that node of a Kafka cluster would, on the wire."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.wire import RawClient, fetch_body, produce
from trio_broker.broker.server.cluster_model import GROUP_KEY
from trio_broker.client.core.fetch import parse_fetch
from trio_broker.client.core.groups import join_group_request, list_groups_request
from trio_broker.client.core.metadata import metadata_request
from trio_broker.client.core.produce import produce_request
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.records import build_batch
from trio_broker.testing import Cluster, open_cluster

BATCH = build_batch([(b"k", b"v")])


async def client_to(cluster: Cluster, node_id: int) -> RawClient:
    b = cluster.brokers[node_id]
    return await RawClient.connect(b.host, b.port)


async def metadata(client: RawClient, topics: list[str] | None, version: int = 12) -> Any:
    return await client.request(ApiKey.Metadata, version,
                                body=metadata_request(version, topics))


def make_topic(cluster: Cluster, name: str, partitions: int = 3) -> None:
    cluster.state.logs.create_topic(name, partitions, {})


async def test_metadata_lists_every_live_broker_and_each_partitions_replicas(
        tmp_path: Path) -> None:
    async with open_cluster(3, log_dirs=str(tmp_path)) as cluster:
        make_topic(cluster, "t")
        client = await client_to(cluster, 1)
        body = await metadata(client, ["t"])
        assert sorted((b.node_id, b.port) for b in body.brokers) == sorted(
            (b.node_id, b.port) for b in cluster.brokers)
        [topic] = body.topics
        assert sorted(p.leader_id for p in topic.partitions) == [0, 1, 2]
        for p in topic.partitions:
            assert sorted(p.replica_nodes) == [0, 1, 2]
            assert sorted(p.isr_nodes) == [0, 1, 2]
            assert p.offline_replicas == []
        await cluster.stop_broker(2)
        body = await metadata(client, ["t"])
        assert sorted(b.node_id for b in body.brokers) == [0, 1]
        for p in body.topics[0].partitions:
            assert p.leader_id in (0, 1)
            assert 2 not in p.isr_nodes
            assert p.offline_replicas == [2]
        await client.aclose()


async def test_produce_to_a_follower_names_the_leader(tmp_path: Path) -> None:
    async with open_cluster(3, log_dirs=str(tmp_path)) as cluster:
        make_topic(cluster, "t", 1)
        leader = cluster.model.partition("t", 0).leader
        follower = (leader + 1) % 3
        client = await client_to(cluster, follower)
        body = await client.request(ApiKey.Produce, 10, body=produce_request(
            10, [("t", 0, BATCH)], acks=-1, timeout_ms=1000))
        [part] = body.responses[0].partition_responses
        assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert part.current_leader.leader_id == leader
        assert [(n.node_id, n.port) for n in body.node_endpoints] == [
            (leader, cluster.brokers[leader].port)]
        leader_client = await client_to(cluster, leader)
        assert (await produce(leader_client, "t", {0: BATCH}, acks=-1))[0] == (0, 0)
        await client.aclose()
        await leader_client.aclose()


async def test_a_moved_leader_fences_the_old_epoch_and_the_old_leader(tmp_path: Path) -> None:
    async with open_cluster(3, log_dirs=str(tmp_path)) as cluster:
        make_topic(cluster, "t", 1)
        old = cluster.model.partition("t", 0).leader
        epoch = cluster.model.leader_epoch("t", 0)
        new = (old + 1) % 3
        assert cluster.move_leader("t", 0, new) == epoch + 1
        for node, stale_epoch, error in [(old, -1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
                                         (new, epoch, ErrorCode.FENCED_LEADER_EPOCH),
                                         (new, epoch + 1, ErrorCode.NONE)]:
            client = await client_to(cluster, node)
            request = fetch_body("t", {0: 0}, version=12)
            request.topics[0].partitions[0].current_leader_epoch = stale_epoch
            _, parts = parse_fetch(await client.request(ApiKey.Fetch, 12, body=request))
            [part] = parts.values()
            assert part.error == error, (node, stale_epoch)
            await client.aclose()


async def test_group_requests_to_a_node_that_does_not_coordinate_are_refused(
        tmp_path: Path) -> None:
    async with open_cluster(3, log_dirs=str(tmp_path)) as cluster:
        coordinator = cluster.model.coordinator_for(GROUP_KEY, "g")
        other = (coordinator + 1) % 3
        client = await client_to(cluster, other)
        found = await client.request(ApiKey.FindCoordinator, 3, key="g", key_type=0)
        assert (found.error_code, found.node_id) == (0, coordinator)
        assert found.port == cluster.brokers[coordinator].port
        body = await client.request(ApiKey.JoinGroup, 5, body=join_group_request(
            5, "g", "", session_timeout_ms=10000, rebalance_timeout_ms=10000,
            protocols=[("range", b"")]))
        assert body.error_code == ErrorCode.NOT_COORDINATOR
        await client.aclose()


async def test_acks_all_needs_min_insync_replicas_in_sync(tmp_path: Path) -> None:
    async with open_cluster(3, log_dirs=str(tmp_path)) as cluster:
        cluster.state.logs.create_topic("t", 1, {"min.insync.replicas": "2"})
        leader = cluster.model.partition("t", 0).leader
        others = [n for n in range(3) if n != leader]
        client = await client_to(cluster, leader)
        assert (await produce(client, "t", {0: BATCH}, acks=-1))[0][0] == 0
        await cluster.stop_broker(others[0])
        assert (await produce(client, "t", {0: BATCH}, acks=-1))[0][0] == 0
        await cluster.stop_broker(others[1])
        assert (await produce(client, "t", {0: BATCH}, acks=-1))[0][0] == (
            ErrorCode.NOT_ENOUGH_REPLICAS)
        assert (await produce(client, "t", {0: BATCH}, acks=1))[0][0] == 0
        await cluster.start_broker(others[1])
        assert (await produce(client, "t", {0: BATCH}, acks=-1))[0][0] == 0
        await client.aclose()


async def test_a_stopped_broker_drops_its_connections_and_restarts_on_its_port(
        tmp_path: Path) -> None:
    async with open_cluster(2, log_dirs=str(tmp_path)) as cluster:
        port = cluster.brokers[1].port
        client = await client_to(cluster, 1)
        await cluster.stop_broker(1)
        assert await client.is_closed_by_peer()
        with pytest.raises(OSError, match="connect"):
            await trio.open_tcp_stream("127.0.0.1", port)
        await cluster.start_broker(1)
        assert cluster.brokers[1].port == port
        again = await client_to(cluster, 1)
        body = await metadata(again, None)
        assert sorted(b.node_id for b in body.brokers) == [0, 1]
        await again.aclose()


async def test_injected_errors_come_in_order_then_the_real_answer(tmp_path: Path) -> None:
    async with open_cluster(3, log_dirs=str(tmp_path)) as cluster:
        make_topic(cluster, "t", 1)
        leader = cluster.model.partition("t", 0).leader
        cluster.inject("Produce", ["NOT_LEADER_OR_FOLLOWER", 7])
        cluster.inject(ApiKey.Produce, ["INVALID_RECORD"], node_id=(leader + 1) % 3)
        client = await client_to(cluster, leader)
        codes = [(await produce(client, "t", {0: BATCH}, acks=-1))[0][0] for _ in range(3)]
        assert codes == [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT, 0]
        # the fault for the other node is still pending
        assert cluster.faults.pending() == {"Produce": 1}
        cluster.clear_faults()
        assert cluster.faults.pending() == {}
        await client.aclose()


async def test_injected_disconnect_closes_the_connection_count_times(tmp_path: Path) -> None:
    async with open_cluster(2, log_dirs=str(tmp_path)) as cluster:
        cluster.inject("Metadata", disconnect=True, count=2)
        for _ in range(2):
            client = await client_to(cluster, 0)
            await client.send(ApiKey.Metadata, 12, body=metadata_request(12, None))
            assert await client.is_closed_by_peer()
        client = await client_to(cluster, 0)
        assert len((await metadata(client, None)).brokers) == 2
        await client.aclose()
        with pytest.raises(ValueError, match="either errors or disconnect"):
            cluster.inject("Metadata")
        with pytest.raises(ValueError, match="unknown error"):
            cluster.inject("Produce", ["NO_SUCH_ERROR"])
        with pytest.raises(ValueError, match="no broker 5"):
            cluster.set_latency(5, 10)


async def test_latency_delays_one_node_and_requests_are_logged(tmp_path: Path) -> None:
    async with open_cluster(2, log_dirs=str(tmp_path)) as cluster:
        cluster.set_latency(1, 200)
        slow, fast = await client_to(cluster, 1), await client_to(cluster, 0)
        started = time.monotonic()
        await metadata(fast, None)
        fast_s = time.monotonic() - started
        started = time.monotonic()
        await metadata(slow, None)
        slow_s = time.monotonic() - started
        assert slow_s >= 0.2 > fast_s
        records = cluster.requests()
        assert [(r.node_id, r.api, r.version, r.client_id) for r in records[-2:]] == [
            (0, "Metadata", 12, "raw-client"), (1, "Metadata", 12, "raw-client")]
        cluster.clear_faults()
        started = time.monotonic()
        await metadata(slow, None)
        assert time.monotonic() - started < 0.2
        await slow.aclose()
        await fast.aclose()


async def test_each_node_lists_the_groups_it_coordinates(tmp_path: Path) -> None:
    async with open_cluster(3, log_dirs=str(tmp_path),
                            group_initial_rebalance_delay_ms=0) as cluster:
        names = [f"group-{i}" for i in range(12)]
        for name in names:
            coordinator = cluster.model.coordinator_for(GROUP_KEY, name)
            client = await client_to(cluster, coordinator)
            joined = await client.request(ApiKey.JoinGroup, 3, body=join_group_request(
                3, name, "", session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
                protocols=[("range", b"")]))
            assert joined.error_code == 0
            await client.aclose()
        listed: list[str] = []
        for node in range(3):
            client = await client_to(cluster, node)
            body = await client.request(ApiKey.ListGroups, 3, body=list_groups_request(3))
            here = [g.group_id for g in body.groups]
            assert all(cluster.model.coordinator_for(GROUP_KEY, g) == node for g in here)
            listed += here
            await client.aclose()
        assert sorted(listed) == sorted(names)
