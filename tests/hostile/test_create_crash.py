"""kill -9 right after topics are created, before any flush: they come back whole.

A real ``trio-broker serve`` process and real confluent-kafka clients. One topic is created by
CreateTopics with configs, one is auto-created by a producer; the broker is killed with SIGKILL
as soon as both are answered (no flush has run: ``log.flush.*`` are Kafka's defaults). The
restarted broker must have both topics with the same ids, partition counts and configs, a new
leader epoch recorded after the one they were created with, the acknowledged record, and take
records again.
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.hostile.harness import BrokerProcess


def _ids(admin: AdminClient, topics: list[str]) -> dict[str, tuple[str, int]]:
    described = admin.describe_topics(TopicCollection(topics))
    out = {}
    for name, future in described.items():
        info = future.result(10)
        out[name] = (str(info.topic_id), len(info.partitions))
    return out


def _produce(bootstrap: str, topic: str, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    producer.produce(topic, value)
    assert producer.flush(10) == 0


def _epochs(partition_dir: Path) -> list[tuple[int, int]]:
    lines = (partition_dir / "leader-epoch-checkpoint").read_text().split("\n")
    assert lines[0] == "0"
    entries = [tuple(map(int, line.split())) for line in lines[2:2 + int(lines[1])]]
    return [(epoch, offset) for epoch, offset in entries]


def test_topics_created_just_before_a_kill_9_come_back_whole(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data)
    broker.start()
    try:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        created = admin.create_topics([NewTopic(
            "configured", 3, 1, config={"cleanup.policy": "compact", "retention.ms": "123456"})])
        created["configured"].result(10)
        _produce(bootstrap, "auto", b"before the kill")  # auto-created by its Metadata
        before = _ids(admin, ["configured", "auto"])
        assert broker.kill() != 0  # SIGKILL: no clean close, nothing flushed

        broker.start()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        assert _ids(admin, ["configured", "auto"]) == before
        resource = ConfigResource(ConfigResource.Type.TOPIC, "configured")
        configs = admin.describe_configs([resource])[resource].result(10)
        assert configs["cleanup.policy"].value == "compact"
        assert configs["retention.ms"].value == "123456"
        for name in ("configured-0", "configured-1", "configured-2", "auto-0"):
            assert _epochs(data / name)[-1][0] == 1, name  # created at 0; the restart leads at 1
        assert _epochs(data / "auto-0") == [(0, 0), (1, 1)]

        _produce(bootstrap, "auto", b"after the restart")
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(["auto"])
        values = []
        for _ in range(100):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
            if len(values) == 2:
                break
        consumer.close()
        assert values == [b"before the kill", b"after the restart"]
    finally:
        broker.kill()
