"""The Trio consumer's pattern subscriptions: matched by the client with the classic protocol, by
the group coordinator with the consumer protocol; topics created later join the subscription."""

from __future__ import annotations

from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest
import trio

from trio_broker.client import open_consumer

pytestmark = pytest.mark.broker_config(**{
    "group.consumer.heartbeat.interval.ms": 200,
    "group.consumer.min.heartbeat.interval.ms": 200,
})


def _create(bootstrap: str, topic: str) -> None:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([confluent_kafka.admin.NewTopic(topic, 1, 1)])[topic].result(10)


def _produce(bootstrap: str, topics: list[str]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for topic in topics:
        producer.produce(topic, topic.encode())
    assert producer.flush(10) == 0


async def _read_until(consumer: Any, wanted: set[bytes], got: set[bytes]) -> None:
    with trio.move_on_after(20):
        while not wanted <= got:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                got.update(r.value for r in records)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_a_pattern_follows_the_topics_that_match(trio_broker: Any, protocol: str) -> None:
    logs = trio_broker.state.logs
    for name in ("rx-a", "rx-b", "other-rx-a"):
        logs.create_topic(name, 1, {})
    bootstrap = trio_broker.bootstrap_servers
    got: set[bytes] = set()
    async with open_consumer(bootstrap_servers=bootstrap, group_id=f"pattern-{protocol}",
                             group_protocol=protocol, auto_offset_reset="earliest",
                             metadata_max_age_ms=300, fetch_max_wait_ms=50) as consumer:
        consumer.subscribe(pattern=r"rx-.*")
        await trio.to_thread.run_sync(_produce, bootstrap, ["rx-a", "rx-b", "other-rx-a"])
        await _read_until(consumer, {b"rx-a", b"rx-b"}, got)
        assert got == {b"rx-a", b"rx-b"}  # a whole-name match: other-rx-a stays out
        await trio.to_thread.run_sync(_create, bootstrap, "rx-c")
        await trio.to_thread.run_sync(_produce, bootstrap, ["rx-c"])
        await _read_until(consumer, {b"rx-c"}, got)
        assert got == {b"rx-a", b"rx-b", b"rx-c"}
        assert {tp.topic for tp in consumer.assignment()} == {"rx-a", "rx-b", "rx-c"}


async def test_a_pattern_and_topics_together_are_refused(trio_broker: Any) -> None:
    async with open_consumer(bootstrap_servers=trio_broker.bootstrap_servers,
                             group_id="pattern-both") as consumer:
        with pytest.raises(ValueError, match="topics or a pattern"):
            consumer.subscribe(["a"], pattern="a.*")
        with pytest.raises(ValueError, match=r"pattern='\('"):
            consumer.subscribe(pattern="(")
