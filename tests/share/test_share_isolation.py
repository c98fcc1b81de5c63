"""``share.isolation.level`` (Kafka's group config): a confluent-kafka transactional producer
writes committed and aborted transactions and leaves one open; a read_committed share group
(set with IncrementalAlterConfigs on the GROUP resource) gets only the committed records, up to
the last stable offset, with the aborted ones and the transaction markers archived; a
read_uncommitted one gets every data record."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from tests.share.test_share_consumer import create_topic
from trio_broker.testing import ThreadedBroker


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    admin.incremental_alter_configs([resource])[resource].result(15)


def receive(consumer: ShareConsumer, want: int, timeout_s: float = 20) -> list[bytes]:
    """Values polled until ``want`` came (accepted at the next poll), then one more poll that
    must bring nothing new."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        got += [m.value() for m in consumer.poll(0.5) if m.error() is None]
    got += [m.value() for m in consumer.poll(1.0) if m.error() is None]
    return got


def test_read_committed_share_groups_get_committed_records_only(
        kafka_broker: ThreadedBroker, unique_topic: Callable[[str], str]) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic, committed_group, all_group = unique_topic("t"), unique_topic("rc"), unique_topic("ru")
    create_topic(bootstrap, topic)
    set_group_configs(bootstrap, committed_group, {"share.isolation.level": "read_committed",
                                                   "share.auto.offset.reset": "earliest"})
    set_group_configs(bootstrap, all_group, {"share.auto.offset.reset": "earliest"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique_topic("tx"),
                         "linger.ms": 1})
    producer.init_transactions(15)
    for values, commit in (([b"c0", b"c1"], True), ([b"a0", b"a1", b"a2"], False),
                           ([b"c2"], True)):
        producer.begin_transaction()
        for v in values:
            producer.produce(topic, value=v)
        assert producer.flush(15) == 0
        (producer.commit_transaction if commit else producer.abort_transaction)(15)
    producer.begin_transaction()
    producer.produce(topic, value=b"open")
    assert producer.flush(15) == 0  # written, its transaction still open

    uncommitted = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": all_group})
    committed = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": committed_group})
    try:
        uncommitted.subscribe([topic])
        committed.subscribe([topic])
        assert sorted(receive(uncommitted, 7)) == sorted(
            [b"c0", b"c1", b"a0", b"a1", b"a2", b"c2", b"open"])
        assert sorted(receive(committed, 3)) == [b"c0", b"c1", b"c2"]
        producer.commit_transaction(15)
        assert receive(committed, 1) == [b"open"]
    finally:
        committed.close()
        uncommitted.close()
    assert kafka_broker.broker is not None
    log = kafka_broker.broker.state.logs.get_log(topic, 0)
    assert log is not None
    shares = kafka_broker.broker.state.shares
    [sp] = [sp for (g, _, _), sp in shares.partitions.items() if g == committed_group]
    # offsets 0-1 c0 c1, 2 commit marker, 3-5 aborted, 6 abort marker, 7 c2, 8 marker, 9 open,
    # 10 marker: everything archived or accepted, nothing left in flight
    assert (sp.start_offset, sp.end_offset, sp.in_flight) == (11, 11, {})
