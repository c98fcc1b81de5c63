"""Fetch limits (max_bytes, partition_max_bytes, KIP-74), OFFSET_OUT_OF_RANGE, and ListOffsets
by timestamp, raw and through a real client."""

from __future__ import annotations

import confluent_kafka

from tests.stamps import BASE_MS
from tests.wire import (
    EARLIEST,
    LATEST,
    RawClient,
    batch_sizes,
    fetch,
    list_offsets,
    produce,
    records_of,
)
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.records import build_batch

TOPIC = "limits"
BATCHES = 10
RECORDS_PER_BATCH = 5


def _batch(n: int) -> bytes:
    return build_batch([(None, b"%02d-%d" % (n, r) + b"." * 200)
                        for r in range(RECORDS_PER_BATCH)])


async def _filled(broker) -> tuple[RawClient, int]:
    """Two partitions of ten ~1 KB batches each; returns the client and one batch's size."""
    broker.state.logs.create_topic(TOPIC, 2, {})
    client = await RawClient.connect(broker.host, broker.port)
    for n in range(BATCHES):
        assert await produce(client, TOPIC, {0: _batch(n), 1: _batch(n)}) == {
            0: (0, n * RECORDS_PER_BATCH), 1: (0, n * RECORDS_PER_BATCH)}
    return client, len(_batch(0))


async def test_partition_max_bytes_returns_whole_batches(trio_broker):
    client, size = await _filled(trio_broker)
    parts = await fetch(client, TOPIC, {0: 0}, partition_max_bytes=int(size * 2.5))
    assert batch_sizes(parts[0].records) == [size, size]
    assert parts[0].high_watermark == BATCHES * RECORDS_PER_BATCH
    # starting inside a batch returns that whole batch first
    parts = await fetch(client, TOPIC, {0: 7}, partition_max_bytes=size)
    assert [r.offset for r in records_of(parts[0].records)] == [5, 6, 7, 8, 9]


async def test_at_least_one_batch_even_over_the_limits_kip_74(trio_broker):
    client, size = await _filled(trio_broker)
    parts = await fetch(client, TOPIC, {0: 10, 1: 0}, partition_max_bytes=10, max_bytes=10)
    assert batch_sizes(parts[0].records) == [size]  # the first partition makes progress
    assert parts[1].records in (b"", None)  # the response limit was already used up
    assert parts[1].error == 0


async def test_max_bytes_bounds_the_whole_response(trio_broker):
    client, size = await _filled(trio_broker)
    parts = await fetch(client, TOPIC, {0: 0, 1: 0}, max_bytes=int(size * 3.5))
    got = [len(batch_sizes(parts[p].records or b"")) for p in (0, 1)]
    assert got == [3, 0]
    parts = await fetch(client, TOPIC, {0: 0, 1: 0}, max_bytes=size * 13)
    assert [len(batch_sizes(parts[p].records)) for p in (0, 1)] == [10, 3]


async def test_offset_out_of_range(trio_broker):
    client, _ = await _filled(trio_broker)
    end = BATCHES * RECORDS_PER_BATCH
    parts = await fetch(client, TOPIC, {0: end + 1, 1: -1})
    for p in (0, 1):
        assert parts[p].error == ErrorCode.OFFSET_OUT_OF_RANGE
        assert parts[p].high_watermark == end
        assert parts[p].log_start_offset == 0
    parts = await fetch(client, TOPIC, {0: end})  # the end itself is empty, not an error
    assert (parts[0].error, parts[0].records or b"") == (0, b"")


async def test_list_offsets_by_timestamp(trio_broker):
    trio_broker.state.logs.create_topic("times", 1, {})
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    base = BASE_MS
    for n in range(4):  # batch n holds timestamps base + 1000n + {0, 10, 20}
        batch = build_batch([(None, b"x")] * 3,
                            timestamps=[base + 1000 * n + d for d in (0, 10, 20)])
        await produce(client, "times", {0: batch})
    cases = {
        base: (0, base),
        base + 5: (1, base + 10),
        base + 20: (2, base + 20),
        base + 21: (3, base + 1000),
        base + 2015: (8, base + 2020),
        base + 3020: (11, base + 3020),
        base + 3021: (-1, -1),
    }
    for ts, (offset, found) in cases.items():
        assert await list_offsets(client, "times", [0], ts) == {0: (0, offset, found)}, ts
    assert await list_offsets(client, "times", [0], EARLIEST) == {0: (0, 0, -1)}
    assert await list_offsets(client, "times", [0], LATEST) == {0: (0, 12, -1)}


def test_offsets_for_times_through_confluent(kafka_broker, unique_topic):
    topic = kafka_broker.create_topic(unique_topic("times"), 1)
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for i in range(100):
        producer.produce(topic, value=b"%d" % i, timestamp=BASE_MS + 10 * i)
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                                         "group.id": "unused"})
    asked = [confluent_kafka.TopicPartition(topic, 0, BASE_MS + 10 * 42 - 5)]
    answer = consumer.offsets_for_times(asked, timeout=10)
    assert answer[0].offset == 42
    answer = consumer.offsets_for_times(
        [confluent_kafka.TopicPartition(topic, 0, 1_800_000_000_000)], timeout=10)
    assert answer[0].offset == confluent_kafka.OFFSET_END
    consumer.close()
