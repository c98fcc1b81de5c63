"""Client quotas hold real clients to their rate: confluent-kafka producing and consuming as
fast as it can under a 1 MB/s quota, without errors.

The suite runs a short version (a burst of ``quota.window.num=2`` windows, 6 s, measured from
second 2); ``make quota-soak`` runs Kafka's default burst (11 windows) for 20 s, measured over
seconds 5 to 20. Either way the rate measured at the client must be within 10% of the quota.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest
import trio

from tests.wire import RawClient
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.testing import ThreadedBroker

RATE = 1024 * 1024
RUN_S = float(os.environ.get("QUOTA_RUN_S", "6"))
SOAK = RUN_S >= 20
#: (quota.window.num, the second the measurement starts)
WINDOWS, FROM_S = (11, 5.0) if SOAK else (2, 2.0)
_E = request_class(ApiKey.AlterClientQuotas).EntryData


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedBroker]:
    broker = ThreadedBroker(log_dirs=str(tmp_path_factory.mktemp("quotas")),
                            quota_window_num=WINDOWS, shutdown_timeout_ms=1000).start()

    async def set_quotas() -> None:
        assert broker.broker is not None
        client = await RawClient.connect(broker.broker.host, broker.broker.port)
        answer = await client.request(ApiKey.AlterClientQuotas, 1, validate_only=False, entries=[
            _E(entity=[_E.EntityData(entity_type="client-id", entity_name=name)],
               ops=[_E.OpData(key=key, value=float(RATE), remove=False)])
            for name, key in (("quota-producer", "producer_byte_rate"),
                              ("quota-consumer", "consumer_byte_rate"))])
        assert [e.error_code for e in answer.entries] == [0, 0]

    trio.run(set_quotas)
    yield broker
    broker.stop()


def _rate(events: list[tuple[float, int]], start: float) -> float:
    """Bytes per second between FROM_S and RUN_S after ``start``."""
    counted = sum(n for t, n in events if FROM_S <= t - start < RUN_S)
    return counted / (RUN_S - FROM_S)


def _topic(broker: ThreadedBroker, name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    assert admin.create_topics([NewTopic(name, 1, 1)])[name].result(10) is None


def test_a_producer_is_held_to_its_byte_rate(quota_broker):
    import confluent_kafka

    _topic(quota_broker, "quota-in")
    throttled: list[int] = []
    errors: list[object] = []
    producer = confluent_kafka.Producer({
        "bootstrap.servers": quota_broker.bootstrap_servers, "client.id": "quota-producer",
        "linger.ms": 5, "queue.buffering.max.kbytes": 2048, "statistics.interval.ms": 500,
        "stats_cb": lambda s: throttled.extend(
            b["throttle"]["max"] for b in json.loads(s)["brokers"].values()),
        "error_cb": errors.append})
    acked: list[tuple[float, int]] = []

    def delivered(error: object, message: object) -> None:
        if error is None:
            acked.append((time.monotonic(), 1000))
        else:
            errors.append(error)

    value = b"x" * 1000
    start = time.monotonic()
    while time.monotonic() - start < RUN_S:
        try:
            producer.produce("quota-in", value, on_delivery=delivered)
        except BufferError:  # the local queue is full: the broker is holding us back
            producer.poll(0.01)
            continue
        producer.poll(0)
    producer.flush(30)
    rate = _rate(acked, start)
    print(f"producer: {rate / RATE:.3f} MB/s over seconds {FROM_S:.0f}-{RUN_S:.0f}")
    assert errors == []
    assert 0.9 * RATE <= rate <= 1.1 * RATE
    assert any(throttled)  # librdkafka saw throttle_time_ms


def test_a_consumer_is_held_to_its_byte_rate(quota_broker):
    import confluent_kafka

    _topic(quota_broker, "quota-out")
    # small batches: a fetch answers whole batches, so they are the measurement's grain
    producer = confluent_kafka.Producer({"bootstrap.servers": quota_broker.bootstrap_servers,
                                         "linger.ms": 5, "batch.size": 65536})
    total = int(RATE * (WINDOWS + RUN_S + 4) / 1000)
    for _ in range(total):
        while True:
            try:
                producer.produce("quota-out", b"y" * 1000)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(60) == 0
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": quota_broker.bootstrap_servers, "client.id": "quota-consumer",
        "group.id": "quota", "enable.auto.commit": False,
        "max.partition.fetch.bytes": 262144, "fetch.max.bytes": 262144,
        "message.max.bytes": 262144})
    consumer.assign([confluent_kafka.TopicPartition("quota-out", 0, 0)])
    got: list[tuple[float, int]] = []
    errors = []
    start = time.monotonic()
    while time.monotonic() - start < RUN_S:
        for message in consumer.consume(1000, timeout=0.1):
            if message.error():
                errors.append(message.error())
            else:
                got.append((time.monotonic(), len(message.value())))
    consumer.close()
    rate = _rate(got, start)
    print(f"consumer: {rate / RATE:.3f} MB/s over seconds {FROM_S:.0f}-{RUN_S:.0f}")
    assert errors == []
    assert sum(n for _, n in got) < total * 1000  # it was held back, not out of records
    assert 0.9 * RATE <= rate <= 1.1 * RATE
