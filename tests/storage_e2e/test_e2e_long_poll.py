"""Fetch long polls: a parked fetch wakes as soon as data arrives, and hundreds of parked
fetches hold no handler, so producers keep their latency."""

from __future__ import annotations

import statistics
import time

import confluent_kafka
import trio

from tests.wire import RawClient, fetch_body, produce, records_of
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.records import build_batch

PARKED = 200


async def _connect(broker) -> RawClient:
    return await RawClient.connect(broker.host, broker.port)


async def test_parked_fetch_answers_when_a_record_arrives(trio_broker):
    trio_broker.state.logs.create_topic("quiet", 1, {})
    consumer = await _connect(trio_broker)
    producer = await _connect(trio_broker)
    started = trio.current_time()
    await consumer.send(ApiKey.Fetch, 11, body=fetch_body("quiet", {0: 0}, max_wait_ms=5000))
    await trio.sleep(0.2)  # the record is produced 200 ms after the fetch was sent
    assert await produce(producer, "quiet", {0: build_batch([(b"k", b"hello")])}) == {0: (0, 0)}
    with trio.fail_after(5):
        _, body = await consumer.receive(ApiKey.Fetch, 11)
    elapsed = trio.current_time() - started
    assert 0.2 <= elapsed < 2.0
    part = body.responses[0].partitions[0]
    assert part.error_code == 0
    assert part.high_watermark == 1
    assert [(r.key, r.value) for r in records_of(part.records)] == [(b"k", b"hello")]


async def test_parked_fetch_expires_at_max_wait_with_nothing(trio_broker):
    trio_broker.state.logs.create_topic("quiet", 1, {})
    consumer = await _connect(trio_broker)
    started = trio.current_time()
    await consumer.send(ApiKey.Fetch, 11, body=fetch_body("quiet", {0: 0}, max_wait_ms=300))
    with trio.fail_after(5):
        _, body = await consumer.receive(ApiKey.Fetch, 11)
    assert trio.current_time() - started >= 0.29
    assert body.responses[0].partitions[0].records in (b"", None)


async def test_parked_fetches_do_not_starve_producers(trio_broker):
    logs = trio_broker.state.logs
    logs.create_topic("idle", 1, {})
    logs.create_topic("busy", 1, {})
    purgatory = trio_broker.state.fetch_purgatory
    consumers = []
    for _ in range(PARKED):
        client = await _connect(trio_broker)
        await client.send(ApiKey.Fetch, 11, body=fetch_body("idle", {0: 0}, max_wait_ms=30_000))
        consumers.append(client)
    with trio.fail_after(10):
        # the purgatory offers no event to wait on; its size is the thing under test
        while len(purgatory) < PARKED:  # noqa: ASYNC110
            await trio.sleep(0.01)

    producer = await _connect(trio_broker)
    batch = build_batch([(b"k", b"v" * 100)] * 10)
    latencies = []
    for i in range(200):
        t0 = time.perf_counter()
        assert await produce(producer, "busy", {0: batch}) == {0: (0, i * 10)}
        latencies.append(time.perf_counter() - t0)
    # More than queued.max.requests-worth of parked fetches and more than the handler pool:
    # if a parked fetch held a handler, every produce here would wait out a 30 s max wait.
    assert statistics.median(latencies) < 0.05, latencies
    assert max(latencies) < 1.0, latencies
    assert len(purgatory) == PARKED  # still parked: none was answered early

    started = trio.current_time()
    assert await produce(producer, "idle", {0: build_batch([(None, b"wake")])}) == {0: (0, 0)}
    with trio.fail_after(5):
        for client in consumers:
            _, body = await client.receive(ApiKey.Fetch, 11)
            records = records_of(body.responses[0].partitions[0].records)
            assert [r.value for r in records] == [b"wake"]
    assert trio.current_time() - started < 2.0
    assert len(purgatory) == 0
    for client in consumers:
        await client.aclose()


def test_confluent_consumer_gets_a_record_before_its_max_wait(kafka_broker, unique_topic):
    topic = kafka_broker.create_topic(unique_topic("long-poll"), 1)
    bootstrap = kafka_broker.bootstrap_servers
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
        "fetch.wait.max.ms": 10_000, "fetch.queue.backoff.ms": 1})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    producer.list_topics(topic, timeout=5)
    # Let the consumer start its first long poll on the empty partition; a broker that did not
    # wake parked fetches would answer only when that poll's 10 s max wait ran out.
    assert consumer.consume(num_messages=1, timeout=1.0) == []
    started = time.monotonic()
    producer.produce(topic, value=b"now", partition=0)
    assert producer.flush(5) == 0
    message = consumer.poll(timeout=8)
    elapsed = time.monotonic() - started
    consumer.close()
    assert message is not None
    assert message.error() is None
    assert message.value() == b"now"
    assert elapsed < 2.0
