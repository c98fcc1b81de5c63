"""Consumer groups over v3: a confluent-kafka consumer's group, its members and its lag."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from confluent_kafka import Consumer, Producer, TopicPartition

from trio_broker.testing import ThreadedBroker

GROUP_FIELDS = {"kind", "metadata", "cluster_id", "consumer_group_id", "is_simple",
                "partition_assignor", "state", "type", "is_mixed_consumer_group",
                "coordinator", "consumers", "lag_summary"}
CONSUMER_FIELDS = {"kind", "metadata", "cluster_id", "consumer_group_id", "consumer_id",
                   "instance_id", "client_id", "assignments"}
LAG_FIELDS = {"kind", "metadata", "cluster_id", "consumer_group_id", "topic_name",
              "partition_id", "current_offset", "log_end_offset", "lag", "consumer_id",
              "instance_id", "client_id"}
SUMMARY_FIELDS = {"kind", "metadata", "cluster_id", "consumer_group_id", "max_lag_consumer_id",
                  "max_lag_instance_id", "max_lag_client_id", "max_lag_topic_name",
                  "max_lag_partition_id", "max_lag", "total_lag", "max_lag_consumer",
                  "max_lag_partition"}


def test_group_members_and_lag(rest: httpx.Client, cluster: str, kafka_broker: ThreadedBroker,
                               unique_topic: Callable[[str], str]) -> None:
    topic, group = unique_topic("rest-lag"), unique_topic("rest-group")
    assert rest.post(f"{cluster}/topics", json={"topic_name": topic,
                                                "partitions_count": 2}).status_code == 201
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for partition, count in ((0, 10), (1, 4)):
        for i in range(count):
            producer.produce(topic, b"v%d" % i, partition=partition)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                         "group.id": group, "client.id": "lag-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "partition.assignment.strategy": "range"})
    try:
        consumer.subscribe([topic])
        for _ in range(100):
            if consumer.assignment():
                break
            consumer.poll(0.1)
        consumer.commit(offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 4)],
                        asynchronous=False)
        base = f"{cluster}/consumer-groups/{group}"

        found = rest.get(base).json()
        assert set(found) == GROUP_FIELDS
        assert (found["kind"], found["consumer_group_id"], found["state"],
                found["partition_assignor"], found["is_simple"], found["type"]) == (
            "KafkaConsumerGroup", group, "STABLE", "range", False, "CLASSIC")
        assert found["metadata"]["resource_name"].endswith(f"/consumer-group={group}")
        listed = rest.get(f"{cluster}/consumer-groups").json()
        assert listed["kind"] == "KafkaConsumerGroupList"
        assert group in {g["consumer_group_id"] for g in listed["data"]}

        consumers = rest.get(f"{base}/consumers").json()
        assert consumers["kind"] == "KafkaConsumerList"
        [member] = consumers["data"]
        assert set(member) == CONSUMER_FIELDS
        assert member["client_id"] == "lag-reader"
        assert rest.get(f"{base}/consumers/{member['consumer_id']}").json() == member
        assigned = rest.get(member["assignments"]["related"]).json()
        assert assigned["kind"] == "KafkaConsumerAssignmentList"
        assert [(a["kind"], a["topic_name"], a["partition_id"], a["consumer_id"])
                for a in assigned["data"]] == [
            ("KafkaConsumerAssignment", topic, p, member["consumer_id"]) for p in (0, 1)]
        assert rest.get(assigned["data"][0]["lag"]["related"]).json()["lag"] == 7

        lags = rest.get(f"{base}/lags").json()
        assert lags["kind"] == "KafkaConsumerLagList"
        assert all(set(row) == LAG_FIELDS for row in lags["data"])
        assert [(r["partition_id"], r["current_offset"], r["log_end_offset"], r["lag"],
                 r["consumer_id"], r["client_id"]) for r in lags["data"]] == [
            (0, 3, 10, 7, member["consumer_id"], "lag-reader"),
            (1, 4, 4, 0, member["consumer_id"], "lag-reader")]
        one = rest.get(f"{base}/lags/{topic}/partitions/0").json()
        assert one == lags["data"][0]
        assert one["metadata"]["resource_name"].endswith(
            f"/consumer-group={group}/lag={topic}/partition=0")

        summary = rest.get(f"{base}/lag-summary").json()
        assert set(summary) == SUMMARY_FIELDS
        assert (summary["kind"], summary["max_lag"], summary["total_lag"],
                summary["max_lag_topic_name"], summary["max_lag_partition_id"],
                summary["max_lag_consumer_id"]) == (
            "KafkaConsumerGroupLagSummary", 7, 7, topic, 0, member["consumer_id"])
    finally:
        consumer.close()
    after = rest.get(f"{cluster}/consumer-groups/{group}").json()
    assert (after["state"], rest.get(f"{cluster}/consumer-groups/{group}/consumers").json()[
        "data"]) == ("EMPTY", [])


def test_a_consumer_protocol_group(rest: httpx.Client, cluster: str, kafka_broker: ThreadedBroker,
                                   unique_topic: Callable[[str], str]) -> None:
    """A KIP-848 group (confluent-kafka with ``group.protocol=consumer``) is described as
    Confluent's proxy describes one: type CONSUMER, its members and their assignments."""
    topic, group = unique_topic("rest-kip848"), unique_topic("rest-kip848-group")
    assert rest.post(f"{cluster}/topics", json={"topic_name": topic,
                                                "partitions_count": 2}).status_code == 201
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                         "group.id": group, "group.protocol": "consumer",
                         "client.id": "kip848-client"})
    try:
        consumer.subscribe([topic])
        described: dict = {}
        for _ in range(100):
            consumer.poll(0.1)
            answer = rest.get(f"{cluster}/consumer-groups/{group}")
            if answer.status_code == 200:
                described = answer.json()
                if described["state"] == "STABLE":
                    break
        assert (described["type"], described["state"], described["is_simple"],
                described["is_mixed_consumer_group"]) == ("CONSUMER", "STABLE", False, False)
        assert set(described) == GROUP_FIELDS
        listed = rest.get(f"{cluster}/consumer-groups/{group}/consumers").json()
        assert "data" in listed, listed
        [member] = listed["data"]
        assert member["client_id"] == "kip848-client"
        assignments = rest.get(f"{cluster}/consumer-groups/{group}/consumers/"
                               f"{member['consumer_id']}/assignments").json()["data"]
        assert sorted(a["partition_id"] for a in assignments) == [0, 1]
    finally:
        consumer.close()
