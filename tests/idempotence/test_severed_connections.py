"""Idempotent producers (librdkafka, kafka-python) against a proxy that keeps cutting them off.

Every cut tears a request and a response and loses the broker's answers to whatever was in
flight, so the clients resend batches the broker already appended. The log must still hold each
record exactly once, in order per partition, at the offsets the clients were told.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest

from tests.idempotence.checks import check_exactly_once, value_of
from tests.idempotence.harness import ProxiedBroker

LOGGER = logging.getLogger(__name__)

PARTITIONS = 3
TIME_LIMIT_S = 90
#: the proxy's cut budgets and modes are drawn from this seed; set it to replay a failure
SEED = int(os.environ.get("TRIO_BROKER_CUT_SEED", "7"))


@pytest.fixture
def make_harness(tmp_path: Path) -> Iterator:
    started: list[ProxiedBroker] = []

    def make(cut_after_bytes: tuple[int, int], seed: int) -> ProxiedBroker:
        harness = ProxiedBroker(tmp_path / "data", cut_after_bytes=cut_after_bytes, seed=seed)
        started.append(harness.start())
        return harness

    yield make
    for harness in started:
        harness.stop()


def test_confluent_kafka_idempotent_producer_exactly_once(make_harness) -> None:
    total = 100_000
    harness = make_harness((20 << 10, 160 << 10), seed=SEED)
    topic = "severed-librdkafka"
    harness.create_topic(topic, PARTITIONS)
    delivered: list[tuple[int, int, bytes]] = []
    failed: list[str] = []
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            delivered.append((msg.partition(), msg.offset(), msg.value()))

    producer = confluent_kafka.Producer({
        "bootstrap.servers": harness.bootstrap_servers,
        "enable.idempotence": True,
        "acks": "all",
        "max.in.flight.requests.per.connection": 5,
        "retries": 2_147_483_647,
        # requests well below the smallest cut budget, so every connection can make progress
        "linger.ms": 5,
        "batch.num.messages": 200,
        # reconnect at once instead of backing off towards seconds after each cut
        "reconnect.backoff.ms": 10,
        "reconnect.backoff.max.ms": 100,
        "retry.backoff.ms": 10,
        "retry.backoff.max.ms": 100,
        "message.timeout.ms": TIME_LIMIT_S * 1000,
        "error_cb": lambda err: errors.append(f"{err.code()} {err.str()} fatal={err.fatal()}"),
    })
    started = time.monotonic()
    deadline = started + TIME_LIMIT_S
    for seq in range(total):
        while True:
            try:
                producer.produce(topic, value_of(seq), key=b"key-%d" % (seq % 97),
                                 on_delivery=on_delivery)
                break
            except BufferError:
                assert time.monotonic() < deadline, "producer queue never drained"
                producer.poll(0.05)
        if seq % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(max(1.0, deadline - time.monotonic()))
    elapsed = time.monotonic() - started
    producer.poll(0)
    assert remaining == 0, f"{remaining} records undelivered after {elapsed:.1f} s"
    assert not failed, f"delivery failures: {failed[:5]}"
    assert not [e for e in errors if "fatal=True" in e], errors

    outcome = check_exactly_once(harness, topic, PARTITIONS, total, delivered)
    LOGGER.warning("librdkafka (seed %d): %d records in %.1f s, %s", SEED, total, elapsed,
                   outcome.summary())
    assert outcome.cuts >= 10, "the proxy should have severed connections many times"
    assert outcome.cuts_mid_request >= 1
    assert outcome.duplicates_answered >= 1, \
        "no batch was accepted twice: the broker never saw a duplicate"
    assert len(outcome.producer_ids) == 1, f"producer ids in the log: {outcome.producer_ids}"


def test_kafka_python_idempotent_producer_exactly_once(make_harness) -> None:
    from kafka import KafkaProducer

    total = 20_000
    harness = make_harness((64 << 10, 192 << 10), seed=SEED + 1)
    topic = "severed-kafka-python"
    harness.create_topic(topic, PARTITIONS)
    producer = KafkaProducer(bootstrap_servers=harness.bootstrap_servers)
    assert producer.config["enable_idempotence"]
    started = time.monotonic()
    try:
        values = [value_of(seq) + b"-" * 100 for seq in range(total)]
        futures = [producer.send(topic, value=v, key=b"key-%d" % (seq % 97))
                   for seq, v in enumerate(values)]
        producer.flush(timeout=TIME_LIMIT_S)
        elapsed = time.monotonic() - started
        delivered = []
        for value, future in zip(values, futures):
            assert future.is_done, "a record is still undelivered after flush"
            metadata = future.get(timeout=0)
            delivered.append((metadata.partition, metadata.offset, value))
    finally:
        producer.close(timeout=10)

    outcome = check_exactly_once(harness, topic, PARTITIONS, total, delivered)
    LOGGER.warning("kafka-python (seed %d): %d records in %.1f s, %s", SEED + 1, total,
                   elapsed, outcome.summary())
    assert outcome.cuts >= 10, "the proxy should have severed connections many times"
    assert outcome.duplicates_answered >= 1, \
        "no batch was accepted twice: the broker never saw a duplicate"
    assert len(outcome.producer_ids) == 1, f"producer ids in the log: {outcome.producer_ids}"
