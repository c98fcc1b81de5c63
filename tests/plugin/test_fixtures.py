"""The pytest plugin's fixtures, used the way a project's own tests would use them."""

from __future__ import annotations

import pytest
import trio
import trio.lowlevel
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.wire import RawClient
from trio_broker.protocol.api_keys import ApiKey


def _roundtrip(bootstrap: str, topic: str, n: int = 20) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    for i in range(n):
        producer.produce(topic, value=b"m%d" % i)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "plugin-test",
                         "fetch.queue.backoff.ms": 1})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    for _ in range(50):
        got += [m.value() for m in consumer.consume(n, 0.2) if not m.error()]
        if len(got) >= n:
            break
    consumer.close()
    return got


def test_kafka_broker_fixture_serves_sync_clients(kafka_broker, unique_topic):
    topic = kafka_broker.create_topic(unique_topic("orders"))
    assert _roundtrip(kafka_broker.bootstrap_servers, topic) == [b"m%d" % i for i in range(20)]


def test_unique_topic_names_differ_and_are_legal(unique_topic):
    from trio_broker.broker.storage import validate_topic_name

    names = {unique_topic("x") for _ in range(5)}
    assert len(names) == 5
    assert all(validate_topic_name(n) is None for n in names)


@pytest.mark.broker_config(num_partitions=4)
def test_broker_config_marker_gives_a_dedicated_broker(kafka_broker, request):
    assert kafka_broker is not request.getfixturevalue("_kafka_broker_session")
    assert kafka_broker.broker.config.num_partitions == 4


@pytest.mark.broker_config(**{"auto.create.topics.enable": False})
async def test_trio_broker_fixture_applies_marker_overrides(trio_broker):
    assert trio_broker.config.auto_create_topics_enable is False
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    body = await client.request(ApiKey.Metadata, 5, topics=[_topic("nope")],
                                allow_auto_topic_creation=True)
    assert body.topics[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION: auto-create is off
    await client.aclose()


def _topic(name: str):
    from trio_broker.protocol.api_keys import request_class

    return request_class(ApiKey.Metadata).MetadataRequestTopic(name=name)


async def test_trio_broker_fixture_is_fresh_per_test(trio_broker):
    assert trio_broker.state.logs.topics() == {}
    assert trio_broker.port != 0
    await trio.lowlevel.checkpoint()


async def test_docs_testing_trio_client_example(trio_broker):
    """The Trio example in docs/testing.md, verbatim in spirit."""
    from trio_broker.client import open_consumer, open_producer

    async with open_producer(bootstrap_servers=trio_broker.bootstrap_servers) as producer:
        meta = await producer.send("greetings", b"hello")
    async with open_consumer(bootstrap_servers=trio_broker.bootstrap_servers,
                             group_id="docs", auto_offset_reset="earliest") as consumer:
        consumer.subscribe(["greetings"])
        with trio.fail_after(30):
            async for record in consumer:
                assert (record.offset, record.value) == (meta.offset, b"hello")
                break
