"""``__consumer_offsets`` and ``__transaction_state`` as Kafka has them, seen by real clients:
internal topics with Kafka's partition counts and configs, never made as ordinary topics,
refused to producers, and consumable, with Kafka's coordinator records at the partition
Kafka's ``partitionFor`` names (checked by a decoder written from Kafka's schemas)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import confluent_kafka
import kafka
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.coordinator.coordinator_records import (
    decode_group_value,
    decode_offset_value,
    decode_offsets_key,
    decode_txn_key,
    decode_txn_value,
)
from trio_broker.broker.coordinator.internal_topics import partition_for_key
from trio_broker.cli import main
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker, ThreadedCluster

OFFSETS = "__consumer_offsets"
TXN = "__transaction_state"


def _read_partition(bootstrap: str, topic: str, partition: int,
                    ) -> list[tuple[bytes, bytes | None]]:
    """Every record of one partition, from its start to its end, by kafka-python."""
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = kafka.TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        out: list[tuple[bytes, bytes | None]] = []
        deadline = time.monotonic() + 15
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                out += [(r.key, r.value) for r in records]
        assert consumer.position(tp) >= end, f"read {len(out)} records, not up to {end}"
        return out
    finally:
        consumer.close()


def _offsets_records(bootstrap: str, group: str) -> list[tuple[str, tuple[Any, ...], Any]]:
    """(kind, key, decoded value or None) of ``group``'s records in its partition."""
    out = []
    for key, value in _read_partition(bootstrap, OFFSETS, partition_for_key(group, 50)):
        kind, fields = decode_offsets_key(key)
        if fields[0] != group:
            continue
        decoded = (None if value is None else
                   decode_offset_value(value) if kind == "offset" else decode_group_value(value))
        out.append((kind, fields, decoded))
    return out


def _private_broker(data: Path) -> ThreadedBroker:
    return ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(data)}).start()


def test_internal_topics_are_never_ordinary_and_refuse_producers(tmp_path: Path) -> None:
    broker = _private_broker(tmp_path / "data")
    try:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        # kafka-python's admin Metadata (no auto-creation) names it unknown and makes nothing
        # (a group's FindCoordinator would make it, as in Kafka)
        kp_admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            [described] = kp_admin.describe_topics([OFFSETS])
        finally:
            kp_admin.close()
        assert described["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
        assert OFFSETS not in admin.list_topics(timeout=10).topics

        # a producer's Metadata (auto-creation allowed) makes it the way the coordinator does:
        # Kafka's partition count and configs, internal; and its Produce is refused
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "retries": 0,
                                             "linger.ms": 0})
        errors: list[Any] = []
        producer.produce(OFFSETS, key=b"k", value=b"v", partition=0,
                         on_delivery=lambda err, msg: errors.append(err))
        producer.flush(15)
        assert [e.code() for e in errors] == [confluent_kafka.KafkaError.TOPIC_EXCEPTION]
        assert len(admin.list_topics(timeout=10).topics[OFFSETS].partitions) == 50
        [description] = admin.describe_topics(
            confluent_kafka.TopicCollection([OFFSETS])).values()
        assert description.result(10).is_internal
        resource = ConfigResource(ConfigResource.Type.TOPIC, OFFSETS)
        configs = admin.describe_configs([resource])[resource].result(10)
        assert configs["cleanup.policy"].value == "compact"
        assert configs["compression.type"].value == "producer"
        assert configs["segment.bytes"].value == "104857600"
        assert _read_partition(bootstrap, OFFSETS, 0) == []
        # nor may a client delete its records
        [deleting] = admin.delete_records([TopicPartition(OFFSETS, 0, 0)]).values()
        with pytest.raises(confluent_kafka.KafkaException) as refused:
            deleting.result(10)
        assert refused.value.args[0].code() == confluent_kafka.KafkaError.TOPIC_EXCEPTION
    finally:
        broker.stop()


def test_commits_generations_and_deletions_are_kafka_records(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    broker = _private_broker(data)
    try:
        bootstrap = broker.bootstrap_servers
        broker.create_topic("t", 3)
        group = "lag-watched"
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "client.id": "watched-client"})
        consumer.subscribe(["t"])
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert len(consumer.assignment()) == 3
        consumer.commit(offsets=[TopicPartition("t", 0, 5), TopicPartition("t", 1, 7)],
                        asynchronous=False)
        consumer.commit(offsets=[TopicPartition("t", 0, 9, metadata="m")], asynchronous=False)
        fetched = consumer.committed([TopicPartition("t", p) for p in range(3)], timeout=10)
        committed = {tp.partition: tp.offset for tp in fetched if tp.offset >= 0}
        assert committed == {0: 9, 1: 7}

        records = _offsets_records(bootstrap, group)
        last = {fields: value for kind, fields, value in records if kind == "offset"}
        # the last record of each key is what OffsetFetch answers
        assert {fields[2]: value["offset"] for fields, value in last.items()} == committed
        # (confluent-kafka sends the metadata with its C string's NUL, and strips it on read)
        assert last[(group, "t", 0)]["metadata"].rstrip("\0") == fetched[0].metadata == "m"
        assert last[(group, "t", 0)]["version"] == 3
        generations = [value for kind, _, value in records if kind == "group" and value]
        assert generations
        assert generations[-1]["generation"] >= 1
        assert generations[-1]["protocol_type"] == "consumer"
        [member] = generations[-1]["members"]
        assert member["client_id"] == "watched-client"
        assert member["assignment"]  # the leader's assignment, as SyncGroup handed it out

        # what `trio-broker groups describe` shows is what the records say
        monkeypatch.setenv("COLUMNS", "250")
        assert main(["groups", "describe", group, "--bootstrap-server", bootstrap]) == 0
        described = capsys.readouterr().out
        assert (f"group {group}: state Stable, protocol consumer/{generations[-1]['protocol']}, "
                "1 members") in described
        rows = {tuple(cell.strip() for cell in line.strip("│ ").split("│")[:3])
                for line in described.splitlines() if line.startswith("│ t ")}
        assert rows == {("t", "0", "9"), ("t", "1", "7"), ("t", "2", "-")}

        # the last member left: the empty group's next generation
        consumer.close()
        records = _offsets_records(bootstrap, group)
        empty = [value for kind, _, value in records if kind == "group" and value][-1]
        assert empty["generation"] == generations[-1]["generation"] + 1
        assert empty["members"] == []

        # restarted, the topic is still internal with its records, and the offsets load
        broker.stop()
        broker = _private_broker(data)
        bootstrap = broker.bootstrap_servers
        assert len(AdminClient({"bootstrap.servers": bootstrap}).list_topics(
            timeout=10).topics[OFFSETS].partitions) == 50
        assert _offsets_records(bootstrap, group) == records
        reader = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            assert [tp.offset for tp in reader.committed(
                [TopicPartition("t", 0), TopicPartition("t", 1)], timeout=10)] == [9, 7]
        finally:
            reader.close()

        # DeleteGroups: a tombstone for each committed offset and for the group
        admin = AdminClient({"bootstrap.servers": bootstrap})
        deleted = admin.delete_consumer_groups([group], request_timeout=10)
        deleted[group].result(10)
        tail = _offsets_records(bootstrap, group)[len(records):]
        assert {(kind, fields) for kind, fields, value in tail if value is None} == {
            ("offset", (group, "t", 0)), ("offset", (group, "t", 1)), ("group", (group,))}
    finally:
        broker.stop()


def test_transaction_states_are_kafka_records(tmp_path: Path) -> None:
    broker = _private_broker(tmp_path / "data")
    try:
        bootstrap = broker.bootstrap_servers
        broker.create_topic("t", 1)
        txn_id = "watched-txn"
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                             "transactional.id": txn_id})
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce("t", value=b"v", partition=0)
        producer.commit_transaction(15)

        states = [(decode_txn_key(k), None if v is None else decode_txn_value(v))
                  for k, v in _read_partition(bootstrap, TXN, partition_for_key(txn_id, 50))]
        mine = [value for key, value in states if key == txn_id]
        assert [m["state"] for m in mine] == [
            "Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
        assert mine[0]["partitions"] is None  # null in state Empty, as Kafka writes it
        assert mine[1]["partitions"] == [("t", 0)]
        assert len({(m["producer_id"], m["producer_epoch"]) for m in mine}) == 1

        # a client may not write there either
        refused: list[Any] = []
        plain = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "retries": 0})
        plain.produce(TXN, value=b"x", partition=0, on_delivery=lambda e, m: refused.append(e))
        plain.flush(15)
        assert [e.code() for e in refused] == [confluent_kafka.KafkaError.TOPIC_EXCEPTION]
    finally:
        broker.stop()


def test_a_test_cluster_serves_them_from_the_coordinators_partition(
        kafka_cluster: ThreadedCluster) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    kafka_cluster.create_topic("t", 1)
    group = "cluster-watched"
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition("t", 0, 42)], asynchronous=False)
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partition = partition_for_key(group, 50)
    topic = admin.list_topics(timeout=10).topics[OFFSETS]
    assert len(topic.partitions) == 50
    assert len(topic.partitions[partition].replicas) == 3  # offsets.topic.replication.factor
    # kafka-python follows the partition's leader, the group's coordinator
    offsets = [decode_offset_value(v)["offset"] for k, v in _read_partition(
        bootstrap, OFFSETS, partition) if v is not None and decode_offsets_key(k) == (
            "offset", (group, "t", 0))]
    assert offsets == [42]
