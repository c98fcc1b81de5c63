"""confluent-kafka against a 3-broker test cluster while leaders move and a broker restarts.

The issue's scenario: an idempotent producer (acks=all) and a group consumer, a leader move
every 200 ms and one broker stopped and started 3 times: every acknowledged record is in the
topic exactly once, in order per partition, and the consumer reads them all.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from trio_broker.testing import ThreadedCluster

PARTITIONS = 3
RECORDS = 3000
CHAOS_S = 7.0


def _chaos(cluster: ThreadedCluster, topic: str, stop: threading.Event,
           log: list[str]) -> None:
    """A leader move every 200 ms; broker 1 down for ~0.8 s three times."""
    rng = random.Random(16)
    started = time.monotonic()
    restarts = 0
    down: int | None = None
    while not stop.is_set() and time.monotonic() - started < CHAOS_S:
        elapsed = time.monotonic() - started
        if down is None and restarts < 3 and elapsed > 1.0 + restarts * 2.0:
            cluster.stop_broker(1)
            down, down_at = 1, time.monotonic()
            log.append(f"stop 1 at {elapsed:.1f}s")
        elif down is not None and time.monotonic() - down_at > 0.8:
            cluster.start_broker(down)
            log.append(f"start 1 at {elapsed:.1f}s")
            down, restarts = None, restarts + 1
        live = [n for n in range(3) if n != down]
        partition, node = rng.randrange(PARTITIONS), rng.choice(live)
        cluster.move_leader(topic, partition, node)
        log.append(f"move {partition} to {node}")
        time.sleep(0.2)
    if down is not None:
        cluster.start_broker(down)
        log.append("start 1 at the end")
        restarts += 1
    log.append(f"restarts={restarts}")


@pytest.mark.broker_config(brokers=3)
def test_idempotent_producer_and_group_consumer_survive_leader_moves_and_restarts(
        kafka_cluster: ThreadedCluster) -> None:
    topic = kafka_cluster.create_topic("chaos", PARTITIONS)
    acked: dict[int, list[bytes]] = defaultdict(list)
    failed: list[KafkaError] = []

    def delivered(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            failed.append(err)
        else:
            acked[msg.partition()].append(msg.value())  # type: ignore[attr-defined]

    consumed: dict[int, list[bytes]] = defaultdict(list)
    consumer_done = threading.Event()

    def consume() -> None:
        consumer = Consumer({"bootstrap.servers": kafka_cluster.bootstrap_servers,
                             "group.id": "chaos-readers", "auto.offset.reset": "earliest",
                             "enable.auto.commit": True, "session.timeout.ms": 6000})
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline and not consumer_done.is_set():
                msg = consumer.poll(0.2)
                if msg is not None and not msg.error():
                    consumed[msg.partition()].append(msg.value())
        finally:
            consumer.close()

    reader = threading.Thread(target=consume)
    reader.start()
    stop = threading.Event()
    log: list[str] = []
    chaos = threading.Thread(target=_chaos, args=(kafka_cluster, topic, stop, log))
    chaos.start()
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers,
                         "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 60000})
    try:
        pace = CHAOS_S / RECORDS
        for i in range(RECORDS):
            p = i % PARTITIONS
            producer.produce(topic, b"%d-%06d" % (p, i), partition=p, on_delivery=delivered)
            producer.poll(0)
            time.sleep(pace)
        assert producer.flush(60) == 0
    finally:
        stop.set()
        chaos.join(30)
    assert "restarts=3" in log, log
    moves = [r for r in log if r.startswith("move")]
    assert len(moves) >= CHAOS_S / 0.2 * 0.5, len(moves)
    assert not failed, failed[:5]
    total = sum(len(v) for v in acked.values())
    assert total == RECORDS
    deadline = time.monotonic() + 40
    while (sum(len(v) for v in consumed.values()) < total
           and time.monotonic() < deadline):
        time.sleep(0.1)
    consumer_done.set()
    reader.join(30)
    stored = _read_all(kafka_cluster, topic)
    for p in range(PARTITIONS):
        # exactly once and in order per partition: the log holds the acknowledged records
        assert stored[p] == acked[p], p
        # the group consumer read every one (a rebalance may replay some: no gaps, same order)
        assert list(dict.fromkeys(consumed[p])) == acked[p], p
    # the clients did meet the cluster's errors and followed the leaders
    assert _answered(kafka_cluster, "Produce", "NOT_LEADER_OR_FOLLOWER") > 0
    assert (_answered(kafka_cluster, "Fetch", "NOT_LEADER_OR_FOLLOWER")
            + _answered(kafka_cluster, "Fetch", "FENCED_LEADER_EPOCH")) > 0


def _answered(cluster: ThreadedCluster, api: str, error: str) -> float:
    """How many times the nodes answered ``api`` with ``error`` (their request metrics)."""
    assert cluster.cluster is not None
    total = 0.0
    for node in range(3):
        for family in cluster.cluster.node_metrics(node).registry.collect():
            for sample in family.samples:
                if (sample.name == "kafka_network_requestmetrics_errors_total"
                        and sample.labels.get("request") == api
                        and sample.labels.get("error") == error):
                    total += sample.value
    return total


def _read_all(cluster: ThreadedCluster, topic: str) -> dict[int, list[bytes]]:
    """Every record of every partition, straight from the storage."""
    from trio_broker.protocol.records import decode_batches

    assert cluster.cluster is not None
    logs = cluster.cluster.state.logs

    def read() -> dict[int, list[bytes]]:
        out: dict[int, list[bytes]] = {}
        for p in range(PARTITIONS):
            log = logs.get_log(topic, p)
            assert log is not None
            data = log.read(0, 1 << 30).records
            out[p] = [bytes(r.value or b"") for _, records in decode_batches(data)
                      for r in records]
        return out

    result: dict[int, list[bytes]] = cluster.call(read)
    return result
