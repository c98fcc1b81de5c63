"""v3 resources compared field by field with the shapes of Confluent's API reference: the
cluster, brokers, topics, configs, partitions; and the documented error answers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

#: the fields of each kind, as Confluent's v3 reference shows them in its example responses
CLUSTER_FIELDS = {"kind", "metadata", "cluster_id", "controller", "acls", "brokers",
                  "broker_configs", "consumer_groups", "topics", "partition_reassignments"}
BROKER_FIELDS = {"kind", "metadata", "cluster_id", "broker_id", "host", "port", "rack",
                 "configs", "partition_replicas"}
TOPIC_FIELDS = {"kind", "metadata", "cluster_id", "topic_name", "is_internal",
                "replication_factor", "partitions_count", "partitions", "configs",
                "partition_reassignments", "authorized_operations"}
TOPIC_CONFIG_FIELDS = {"kind", "metadata", "cluster_id", "topic_name", "name", "value",
                       "is_default", "is_read_only", "is_sensitive", "source", "synonyms"}
REPLICA_FIELDS = {"kind", "metadata", "cluster_id", "topic_name", "partition_id", "broker_id",
                  "is_leader", "is_in_sync", "broker"}
CLUSTER_CONFIG_FIELDS = {"kind", "metadata", "cluster_id", "config_type", "name", "value",
                         "is_default", "is_read_only", "is_sensitive", "source", "synonyms"}
PARTITION_FIELDS = {"kind", "metadata", "cluster_id", "topic_name", "partition_id", "leader",
                    "replicas", "reassignment"}


def test_cluster_and_brokers(rest: httpx.Client, kafka_broker: ThreadedBroker) -> None:
    assert kafka_broker.broker is not None
    cluster_id = kafka_broker.broker.state.cluster_id
    listing = rest.get("/v3/clusters").json()
    assert listing["kind"] == "KafkaClusterList"
    assert listing["metadata"] == {"self": f"{kafka_broker.rest_proxy_url}/v3/clusters",
                                   "next": None}
    [cluster] = listing["data"]
    assert set(cluster) == CLUSTER_FIELDS
    url = f"{kafka_broker.rest_proxy_url}/v3/clusters/{cluster_id}"
    assert cluster["kind"] == "KafkaCluster"
    assert cluster["metadata"] == {"self": url, "resource_name": f"crn:///kafka={cluster_id}"}
    assert cluster["cluster_id"] == cluster_id
    node = kafka_broker.broker.config.node_id
    assert cluster["controller"] == {"related": f"{url}/brokers/{node}"}
    assert cluster["topics"] == {"related": f"{url}/topics"}
    assert rest.get(f"/v3/clusters/{cluster_id}").json() == cluster

    brokers = rest.get(f"/v3/clusters/{cluster_id}/brokers").json()
    assert brokers["kind"] == "KafkaBrokerList"
    [broker] = brokers["data"]
    assert set(broker) == BROKER_FIELDS
    host, port = kafka_broker.bootstrap_servers.rsplit(":", 1)
    assert (broker["broker_id"], broker["host"], broker["port"], broker["rack"]) == (
        node, host, int(port), None)
    assert broker["metadata"]["resource_name"] == f"crn:///kafka={cluster_id}/broker={node}"
    assert rest.get(f"/v3/clusters/{cluster_id}/brokers/{node}").json() == broker

    config = rest.get(f"/v3/clusters/{cluster_id}/brokers/{node}/configs/num.io.threads")
    assert config.status_code == 200
    body = config.json()
    assert body["kind"] == "KafkaBrokerConfig"
    assert (body["broker_id"], body["name"]) == (node, "num.io.threads")
    configs = rest.get(f"/v3/clusters/{cluster_id}/brokers/{node}/configs").json()
    assert configs["kind"] == "KafkaBrokerConfigList"
    assert "num.io.threads" in {c["name"] for c in configs["data"]}


def test_topic_lifecycle(rest: httpx.Client, cluster: str,
                         unique_topic: Callable[[str], str]) -> None:
    name = unique_topic("rest")
    created = rest.post(f"{cluster}/topics", json={
        "topic_name": name, "partitions_count": 3, "replication_factor": 1,
        "configs": [{"name": "cleanup.policy", "value": "compact"},
                    {"name": "retention.ms", "value": "86400000"}]})
    assert created.status_code == 201, created.text
    topic = created.json()
    assert set(topic) == TOPIC_FIELDS
    assert topic["kind"] == "KafkaTopic"
    cluster_id = cluster.rsplit("/", 1)[1]
    assert topic["metadata"]["resource_name"] == f"crn:///kafka={cluster_id}/topic={name}"
    assert (topic["topic_name"], topic["partitions_count"], topic["replication_factor"],
            topic["is_internal"]) == (name, 3, 1, False)
    assert topic["configs"]["related"].endswith(f"{cluster}/topics/{name}/configs")
    assert rest.get(f"{cluster}/topics/{name}").json() == topic
    names = {t["topic_name"] for t in rest.get(f"{cluster}/topics").json()["data"]}
    assert name in names

    partitions = rest.get(f"{cluster}/topics/{name}/partitions").json()
    assert partitions["kind"] == "KafkaPartitionList"
    assert [p["partition_id"] for p in partitions["data"]] == [0, 1, 2]
    partition = rest.get(f"{cluster}/topics/{name}/partitions/2").json()
    assert set(partition) == PARTITION_FIELDS
    assert partition["metadata"]["resource_name"].endswith(f"/topic={name}/partition=2")
    assert partition["leader"]["related"].endswith(f"/topics/{name}/partitions/2/replicas/0")
    # the links lead somewhere: the leader, the partition's replicas, the broker's replicas
    leader = rest.get(partition["leader"]["related"]).json()
    assert set(leader) == REPLICA_FIELDS
    assert (leader["kind"], leader["topic_name"], leader["partition_id"], leader["broker_id"],
            leader["is_leader"], leader["is_in_sync"]) == ("KafkaReplica", name, 2, 0, True, True)
    assert leader["metadata"]["resource_name"].endswith(
        f"/topic={name}/partition=2/replica=0")
    replicas = rest.get(partition["replicas"]["related"]).json()
    assert (replicas["kind"], replicas["data"]) == ("KafkaReplicaList", [leader])
    held = rest.get(f"{cluster}/brokers/0/partition-replicas").json()["data"]
    assert [(r["topic_name"], r["partition_id"]) for r in held
            if r["topic_name"] == name] == [(name, 0), (name, 1), (name, 2)]
    assert rest.get(f"{cluster}/topics/{name}/partitions/2/replicas/7").status_code == 404
    # no reassignment in progress: empty lists, and none for the partition
    for scope in (name, "-"):
        moving = rest.get(f"{cluster}/topics/{scope}/partitions/-/reassignment").json()
        assert (moving["kind"], moving["data"]) == ("KafkaReassignmentList", [])
    none = rest.get(f"{cluster}/topics/{name}/partitions/2/reassignment")
    assert (none.status_code, none.json()["error_code"]) == (404, 404)
    missing = rest.get(f"{cluster}/topics/no-such-topic/partitions/-/reassignment")
    assert (missing.status_code, missing.json()["error_code"]) == (404, 40403)

    config = rest.get(f"{cluster}/topics/{name}/configs/cleanup.policy").json()
    assert set(config) == TOPIC_CONFIG_FIELDS
    assert (config["kind"], config["value"], config["is_default"], config["source"]) == (
        "KafkaTopicConfig", "compact", False, "DYNAMIC_TOPIC_CONFIG")
    assert config["synonyms"][0] == {"name": "cleanup.policy", "value": "compact",
                                     "source": "DYNAMIC_TOPIC_CONFIG"}
    assert config["metadata"]["resource_name"].endswith(
        f"/topic={name}/config=cleanup.policy")

    # PUT sets one config, DELETE resets one, configs:alter does several: the rest stay
    assert rest.put(f"{cluster}/topics/{name}/configs/max.message.bytes",
                    json={"value": "2000000"}).status_code == 204
    assert rest.delete(f"{cluster}/topics/{name}/configs/retention.ms").status_code == 204
    assert rest.post(f"{cluster}/topics/{name}/configs:alter", json={"data": [
        {"name": "cleanup.policy", "operation": "DELETE"},
        {"name": "segment.ms", "value": "3600000"}]}).status_code == 204
    listed = rest.get(f"{cluster}/topics/{name}/configs").json()
    assert listed["kind"] == "KafkaTopicConfigList"
    overrides = {c["name"]: c["value"] for c in listed["data"]
                 if c["source"] == "DYNAMIC_TOPIC_CONFIG"}
    assert overrides == {"max.message.bytes": "2000000", "segment.ms": "3600000"}
    reset = rest.get(f"{cluster}/topics/{name}/configs/cleanup.policy").json()
    assert (reset["value"], reset["is_default"]) == ("delete", True)

    assert rest.delete(f"{cluster}/topics/{name}").status_code == 204
    gone = rest.get(f"{cluster}/topics/{name}")
    assert (gone.status_code, gone.json()["error_code"]) == (404, 40403)


def test_documented_errors(rest: httpx.Client, cluster: str,
                           unique_topic: Callable[[str], str]) -> None:
    def error(response: httpx.Response) -> tuple[int, int]:
        body = response.json()
        assert set(body) == {"error_code", "message"}
        assert body["message"]
        return response.status_code, body["error_code"]

    assert error(rest.get("/v3/clusters/no-such-cluster/topics")) == (404, 404)
    assert error(rest.get(f"{cluster}/topics/no-such-topic")) == (404, 40403)
    assert error(rest.get(f"{cluster}/topics/no-such-topic/partitions")) == (404, 40403)
    assert error(rest.delete(f"{cluster}/topics/no-such-topic")) == (404, 40403)
    assert error(rest.get(f"{cluster}/no-such-resource")) == (404, 404)
    assert error(rest.get(f"{cluster}/consumer-groups/no-such-group")) == (404, 404)
    name = unique_topic("rest-err")
    assert rest.post(f"{cluster}/topics", json={"topic_name": name}).status_code == 201
    assert error(rest.get(f"{cluster}/topics/{name}/partitions/7")) == (404, 404)
    assert error(rest.get(f"{cluster}/topics/{name}/configs/no.such.config")) == (404, 404)
    # Kafka refused it: Confluent's 40002, with Kafka's message
    exists = rest.post(f"{cluster}/topics", json={"topic_name": name})
    assert error(exists) == (400, 40002)
    assert exists.json()["message"] == f"Topic '{name}' already exists."
    assert error(rest.post(f"{cluster}/topics", json={
        "topic_name": unique_topic("rest-err"), "partitions_count": 0})) == (400, 40002)
    assert error(rest.put(f"{cluster}/topics/{name}/configs/no.such.config",
                          json={"value": "1"})) == (400, 40002)
    # the request itself is wrong: the HTTP status
    assert error(rest.post(f"{cluster}/topics", content=b"{not json",
                           headers={"content-type": "application/json"})) == (400, 400)
    assert error(rest.post(f"{cluster}/topics", json={"partitions_count": 1})) == (400, 400)
    assert error(rest.post(f"{cluster}/topics", content=b"topic_name=x",
                           headers={"content-type": "text/plain"})) == (415, 415)
    assert error(rest.patch(f"{cluster}/topics")) == (405, 405)
    # DNS rebinding: a Host that is none of the proxy's names
    assert error(rest.get("/v3/clusters", headers={"host": "evil.example"})) == (421, 421)


def test_cluster_wide_broker_configs(tmp_path: Path) -> None:
    """``/broker-configs``: the dynamic defaults every broker takes (Kafka's broker resource
    without a name), set, read and reset over HTTP, seen by the broker itself."""
    broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                               "rest_proxy_listener": "http://127.0.0.1:0"}).start()
    try:
        with httpx.Client(base_url=broker.rest_proxy_url, timeout=30) as rest:
            cluster_id = rest.get("/v3/clusters").json()["data"][0]["cluster_id"]
            base = f"/v3/clusters/{cluster_id}/broker-configs"
            assert rest.put(f"{base}/log.retention.ms",
                            json={"value": "3600000"}).status_code == 204
            found = rest.get(f"{base}/log.retention.ms").json()
            assert set(found) == CLUSTER_CONFIG_FIELDS
            assert (found["kind"], found["config_type"], found["value"], found["source"]) == (
                "KafkaClusterConfig", "BROKER", "3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
            assert found["metadata"] == {
                "self": f"{broker.rest_proxy_url}{base}/log.retention.ms",
                "resource_name": f"crn:///kafka={cluster_id}/broker-config=log.retention.ms"}
            listed = rest.get(base).json()
            assert listed["kind"] == "KafkaClusterConfigList"
            assert "log.retention.ms" in {c["name"] for c in listed["data"]}
            # broker 0 takes the default
            own = rest.get(f"/v3/clusters/{cluster_id}/brokers/0/configs/log.retention.ms")
            assert (own.json()["value"], own.json()["source"]) == (
                "3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
            assert rest.post(f"{base}:alter", json={"data": [
                {"name": "log.retention.ms", "operation": "DELETE"}]}).status_code == 204
            assert rest.get(f"{base}/log.retention.ms").status_code == 404
    finally:
        broker.stop()
