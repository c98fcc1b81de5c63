"""A test cluster's nodes are distinct brokers to real clients: each its own id and rack."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from tests.cli.conftest import run_cli
from trio_broker.broker.server.cluster_model import rack_alternated, rack_aware_replicas
from trio_broker.cli import main
from trio_broker.client.blocking import BlockingClient
from trio_broker.testing import ThreadedBroker, ThreadedCluster

RACKS = ["a", "b", "c"]
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _broker_configs(admin: AdminClient, node_id: int) -> dict[str, str | None]:
    resource = ConfigResource(ResourceType.BROKER, str(node_id))
    entries = admin.describe_configs([resource])[resource].result(10)
    return {name: entry.value for name, entry in entries.items()}


@pytest.mark.broker_config(brokers=3, racks=RACKS)
def test_each_broker_describes_its_own_id_and_rack(kafka_cluster: ThreadedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    for k, rack in enumerate(RACKS):
        configs = _broker_configs(admin, k)
        assert (configs["broker.id"], configs["node.id"], configs["broker.rack"]) == (
            str(k), str(k), rack)


@pytest.mark.broker_config(brokers=3)
def test_without_racks_each_broker_still_has_its_own_id(kafka_cluster: ThreadedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    for k in range(3):
        configs = _broker_configs(admin, k)
        assert (configs["broker.id"], configs["broker.rack"]) == (str(k), None)


@pytest.mark.broker_config(brokers=3, racks=RACKS)
def test_describe_cluster_names_the_racks(kafka_cluster: ThreadedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    nodes = admin.describe_cluster().result(10).nodes
    assert sorted((n.id, n.rack) for n in nodes) == [(0, "a"), (1, "b"), (2, "c")]


@pytest.mark.broker_config(brokers=3, racks=RACKS)
def test_metadata_names_the_racks(kafka_cluster: ThreadedCluster) -> None:
    # confluent-kafka's list_topics() does not expose a broker's rack: the project's client does
    with BlockingClient(kafka_cluster.bootstrap_servers) as client:
        brokers = client.metadata([]).brokers.values()
    assert sorted((b.node_id, b.rack) for b in brokers) == [(0, "a"), (1, "b"), (2, "c")]


@pytest.mark.broker_config(brokers=3, racks=RACKS)
def test_a_per_broker_dynamic_config_stays_that_brokers(kafka_cluster: ThreadedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    resource = ConfigResource(ResourceType.BROKER, "1", {"log.cleaner.threads": "2"})
    admin.alter_configs([resource])[resource].result(10)
    assert _broker_configs(admin, 1)["log.cleaner.threads"] == "2"
    assert _broker_configs(admin, 0)["log.cleaner.threads"] == "1"
    assert _broker_configs(admin, 2)["broker.rack"] == "c"


@pytest.mark.broker_config(brokers=3, racks="a,b,c")
def test_cluster_describe_shows_the_racks(kafka_cluster: ThreadedCluster,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "describe", "-o", "json",
                 "--bootstrap-server", kafka_cluster.bootstrap_servers]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted((b["id"], b["rack"]) for b in doc["brokers"]) == [(0, "a"), (1, "b"), (2, "c")]
    assert [(b.node_id, b.rack) for b in kafka_cluster.brokers] == [(0, "a"), (1, "b"), (2, "c")]


def test_serve_refuses_racks_that_do_not_name_every_broker(tmp_path: Path) -> None:
    done = run_cli("serve", "--brokers", "3", "--racks", "a,b",
                   "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                   "--override", f"log.dirs={tmp_path / 'data'}")
    assert (done.returncode, done.stderr) == (
        2, "trio-broker serve: error: racks names 2 racks for a cluster of 3 brokers: "
           "give one per broker\n")
    done = run_cli("serve", "--racks", "a", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                   "--override", f"log.dirs={tmp_path / 'data'}")
    assert done.returncode == 2
    assert "--racks needs --brokers" in done.stderr


def test_rack_aware_placement_is_kafkas() -> None:
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers (start index
    # and shift 0: a seed of 0)
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({k: v for k, v in racks.items() if k != 5}) == [0, 3, 1, 4, 2]
    assert {p: rack_aware_replicas(racks, 0, p, 3) for p in range(7)} == {
        0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3],
        6: [0, 4, 2]}


def _placement(cluster: ThreadedCluster, topic: str, partitions: int,
               replication: int) -> dict[int, list[tuple[int, str | None]]]:
    """partition -> its replicas (id, rack), leader first, as confluent-kafka describes them."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions, replication)])[topic].result(10)
    found = admin.describe_topics(TopicCollection([topic]))[topic].result(10)
    out = {}
    for p in found.partitions:
        rest = [r for r in p.replicas if r.id != p.leader.id]
        out[p.id] = [(p.leader.id, p.leader.rack)] + [(r.id, r.rack) for r in rest]
    return out


@pytest.mark.broker_config(brokers=3, racks=RACKS)
def test_replicas_span_every_rack_and_leaders_spread(kafka_cluster: ThreadedCluster) -> None:
    placed = _placement(kafka_cluster, "racked", 6, 3)
    assert sorted(placed) == list(range(6))
    for replicas in placed.values():
        assert sorted(rack for _, rack in replicas) == RACKS
        assert [RACKS[i] for i, _ in replicas] == [rack for _, rack in replicas]
    leaders = [replicas[0][0] for replicas in placed.values()]
    assert sorted(leaders.count(k) for k in range(3)) == [2, 2, 2]


@pytest.mark.broker_config(brokers=6, racks=["a", "a", "b", "b", "c", "c"])
def test_two_brokers_per_rack_still_span_three_racks(kafka_cluster: ThreadedCluster) -> None:
    placed = _placement(kafka_cluster, "racked", 12, 3)
    for replicas in placed.values():
        assert sorted(rack for _, rack in replicas) == ["a", "b", "c"]
    leaders = [replicas[0][0] for replicas in placed.values()]
    assert sorted(leaders.count(k) for k in range(6)) == [2] * 6


@pytest.mark.broker_config(brokers=4, racks=["a", "a", "b", "b"])
def test_more_replicas_than_racks_use_every_rack(kafka_cluster: ThreadedCluster) -> None:
    for replicas in _placement(kafka_cluster, "racked", 8, 3).values():
        assert {rack for _, rack in replicas} == {"a", "b"}
        assert len({i for i, _ in replicas}) == 3


@pytest.mark.broker_config(brokers=3)
def test_without_racks_replicas_are_consecutive_nodes(kafka_cluster: ThreadedCluster) -> None:
    for replicas in _placement(kafka_cluster, "unracked", 6, 2).values():
        first, second = (i for i, _ in replicas)
        assert second == (first + 1) % 3


def _consume(consumer: Consumer, n: int) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    return got


def _fetches(cluster: ThreadedCluster, node_id: int) -> int:
    return sum(r.api == "Fetch" and r.node_id == node_id for r in cluster.requests())


@pytest.mark.broker_config(brokers=3, racks=RACKS, **{"replica.selector.class": SELECTOR})
def test_a_consumer_fetches_from_a_replica_in_its_rack(kafka_cluster: ThreadedCluster) -> None:
    topic = "near"
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(10)
    kafka_cluster.move_leader(topic, 0, 0)  # the leader on rack a, the consumer on rack b
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    first = [b"r%d" % i for i in range(10)]
    for value in first:
        producer.produce(topic, value)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": kafka_cluster.bootstrap_servers,
                         "group.id": "near", "client.rack": "b",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        assert _consume(consumer, 10) == first
        assert _fetches(kafka_cluster, 1) > 0  # rack b's node served them
        # the consumer goes back to the leader as soon as node 1's connection drops
        from_leader = _fetches(kafka_cluster, 0)
        kafka_cluster.stop_broker(1)
        second = [b"s%d" % i for i in range(10)]
        for value in second:
            producer.produce(topic, value)
        assert producer.flush(10) == 0
        assert _consume(consumer, 10) == second
        assert _fetches(kafka_cluster, 0) > from_leader
        assert _fetches(kafka_cluster, 2) == 0
    finally:
        consumer.close()


@pytest.mark.broker_config(brokers=3, racks=RACKS)
def test_without_the_selector_the_leader_serves(kafka_cluster: ThreadedCluster) -> None:
    topic = "far"
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(10)
    kafka_cluster.move_leader(topic, 0, 0)
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    producer.produce(topic, b"one")
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": kafka_cluster.bootstrap_servers,
                         "group.id": "far", "client.rack": "b",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        assert _consume(consumer, 1) == [b"one"]
        assert _fetches(kafka_cluster, 1) == 0
    finally:
        consumer.close()


@pytest.mark.broker_config(**{"broker.rack": "r1"})
def test_one_broker_names_its_rack(kafka_broker: ThreadedBroker) -> None:
    with BlockingClient(kafka_broker.bootstrap_servers) as client:
        assert [b.rack for b in client.metadata([]).brokers.values()] == ["r1"]
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    assert [n.rack for n in admin.describe_cluster().result(10).nodes] == ["r1"]
