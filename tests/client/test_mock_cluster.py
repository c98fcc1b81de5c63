"""The client against librdkafka's mock cluster: three brokers that are not ours, on loopback.

Quirks of the mock found on the way (librdkafka 2.16): it answers ApiVersions v3 with an error
body neither v0 nor v3 can parse (the client falls back to v0); it auto-creates unknown topics
with 4 partitions spread over its brokers; it lacks CreateTopics, DeleteTopics, CreatePartitions,
Describe/AlterConfigs, ListGroups, DescribeGroups and DeleteGroups (those admin calls are tested
against our broker); it answers Produce requests with ``acks=0``, which Kafka never does (the
client then sees a response it did not ask for and closes the connection, as Java's would, so
``acks=0`` is tested against our broker); it returns one record batch per partition per Fetch;
it reports ``log_append_time_ms`` 1234 for CreateTime topics; it answers ListOffsets by
timestamp with -1 and OffsetFetch for all of a group's partitions with nothing (both are
tested against our broker); and it trims old batches of a
partition once it holds about 50 000 records.
"""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka
import pytest
import trio

from trio_broker.client import TopicPartition, open_consumer, open_producer, partition_for_key
from trio_broker.client.trio import errors
from trio_broker.client.trio.admin import NewTopic, open_admin

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
FAST_GROUP = {"heartbeat_interval_ms": 100, "session_timeout_ms": 6000,
              "max_poll_interval_ms": 10000}


def make_records(count: int, tag: str) -> list[tuple[bytes | None, bytes | None, Any]]:
    records = []
    for i in range(count):
        key = None if i % 7 == 3 else f"{tag}-key-{i}".encode()
        value = None if i % 11 == 5 else f"{tag}-value-{i}-".encode() * (1 + i % 5)
        headers = [("n", str(i).encode()), ("empty", None)] if i % 3 == 0 else []
        records.append((key, value, headers))
    return records


async def consume_all(consumer: Any, count: int) -> list[Any]:
    got: list[Any] = []
    while len(got) < count:
        batch = await consumer.getmany(timeout_ms=10000)
        assert batch, f"no records after {len(got)} of {count}"
        for records in batch.values():
            got.extend(records)
    return got


@pytest.mark.parametrize("codec", CODECS)
async def test_produce_and_consume_with_every_codec(mock_cluster: Any,
                                                    codec: str) -> None:
    topic = f"codec-{codec}"
    records = make_records(300, codec)
    base_ts = int(time.time() * 1000) - 60000
    with trio.fail_after(30):
        async with open_producer(mock_cluster.bootstrap_servers, compression_type=codec,
                                 linger_ms=20) as producer:
            futures = [await producer.send_soon(topic, v, key=k, headers=h,
                                                timestamp_ms=base_ts + i)
                       for i, (k, v, h) in enumerate(records)]
            await producer.flush()
            results = [f.result() for f in futures]
            assert producer.producer_id >= 0  # idempotent by default
        for (key, _, _), result in zip(records, results, strict=True):
            if key is not None:
                assert result.partition == partition_for_key(key, 4)
        async with open_consumer(bootstrap_servers=mock_cluster.bootstrap_servers,
                                 auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition(topic, p) for p in range(4)])
            got = await consume_all(consumer, len(records))
    assert len(got) == len(records)
    by_position = {(r.partition, r.offset): r for r in got}
    for i, ((key, value, headers), result) in enumerate(zip(records, results, strict=True)):
        record = by_position[(result.partition, result.offset)]
        assert (record.key, record.value) == (key, value)
        assert record.headers == tuple(headers)
        assert record.timestamp == base_ts + i
        assert record.timestamp_type == 0


async def test_keys_land_where_librdkafka_puts_them(mock_cluster: Any) -> None:
    topic = "librdkafka-keys"
    keys = [f"user-{i}".encode() for i in range(200)]
    producer = confluent_kafka.Producer({"bootstrap.servers": mock_cluster.bootstrap_servers,
                                         "partitioner": "murmur2_random"})
    for key in keys:
        producer.produce(topic, key=key, value=b"v")
    assert producer.flush(10) == 0
    with trio.fail_after(30):
        async with open_consumer(bootstrap_servers=mock_cluster.bootstrap_servers,
                                 auto_offset_reset="earliest") as consumer:
            partitions = await consumer.partitions_for_topic(topic)
            consumer.assign([TopicPartition(topic, p) for p in partitions])
            got = await consume_all(consumer, len(keys))
    assert sorted(r.key for r in got) == sorted(keys)
    for record in got:
        assert record.partition == partition_for_key(record.key, len(partitions))


async def test_consumer_group_shares_partitions_across_three_brokers(
        mock_cluster: Any) -> None:
    topic = mock_cluster.spread_topic("grouped")
    records = make_records(400, "g")
    with trio.fail_after(60):
        async with (
            open_consumer(topic, bootstrap_servers=mock_cluster.bootstrap_servers,
                          group_id="g1", auto_offset_reset="earliest", **FAST_GROUP) as first,
            open_consumer(topic, bootstrap_servers=mock_cluster.bootstrap_servers,
                          group_id="g1", auto_offset_reset="earliest", **FAST_GROUP) as second,
        ):
            while not (first.assignment() and second.assignment()
                       and len(first.assignment() | second.assignment()) == 4):
                await first.getmany(timeout_ms=50)
                await second.getmany(timeout_ms=50)
            assert not first.assignment() & second.assignment()
            leaders = {first.client.metadata.leader_for(tp) for tp in
                       first.assignment() | second.assignment()}
            assert len(leaders) > 1  # fetches really go to several brokers
            async with open_producer(mock_cluster.bootstrap_servers) as producer:
                for key, value, headers in records:
                    await producer.send_soon(topic, value, key=key, headers=headers)
            got: dict[str, list[Any]] = {"first": [], "second": []}

            async def drain(name: str, consumer: Any) -> None:
                while sum(len(v) for v in got.values()) < len(records):
                    for batch in (await consumer.getmany(timeout_ms=100)).values():
                        got[name].extend(batch)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(drain, "first", first)
                nursery.start_soon(drain, "second", second)
            for consumer, name in ((first, "first"), (second, "second")):
                assert {TopicPartition(r.topic, r.partition) for r in got[name]} <= (
                    consumer.assignment())
                await consumer.commit()
                for tp in consumer.assignment():
                    assert await consumer.committed(tp) == await consumer.position(tp)
            coordinator = first._coordinator.node_id
            assert coordinator is not None
            assert coordinator > 3  # the coordinator gets its own connection
    everything = got["first"] + got["second"]
    assert len(everything) == len(records)
    assert sorted(r.value or b"" for r in everything) == sorted(v or b"" for _, v, _ in records)


async def test_committed_offsets_survive_a_new_consumer(mock_cluster: Any) -> None:
    topic = "resume"
    tp = TopicPartition(topic, 0)
    with trio.fail_after(30):
        async with open_producer(mock_cluster.bootstrap_servers) as producer:
            for i in range(10):
                await producer.send(topic, str(i).encode(), partition=0)
        async with open_consumer(bootstrap_servers=mock_cluster.bootstrap_servers,
                                 group_id="resumer", auto_offset_reset="earliest") as consumer:
            consumer.assign([tp])
            first: list[Any] = []
            while len(first) < 4:  # the mock answers one batch (here one record) per fetch
                batch = await consumer.getmany(timeout_ms=5000, max_records=4 - len(first))
                first.extend(batch[tp])
            assert [r.value for r in first] == [b"0", b"1", b"2", b"3"]
            await consumer.commit()
            assert await consumer.committed(tp) == 4
        async with open_consumer(bootstrap_servers=mock_cluster.bootstrap_servers,
                                 group_id="resumer", auto_offset_reset="earliest") as consumer:
            consumer.assign([tp])
            rest = await consume_all(consumer, 6)
            assert [r.value for r in rest] == [str(i).encode() for i in range(4, 10)]
            consumer.seek(tp, 2)
            again = await consumer.getmany(timeout_ms=5000, max_records=1)
            assert again[tp][0].offset == 2
            consumer.seek_to_end(tp)
            assert await consumer.position(tp) == 10
            consumer.seek_to_beginning(tp)
            assert await consumer.position(tp) == 0


async def test_admin_calls_the_mock_supports(mock_cluster: Any) -> None:
    topic = "admin-topic"
    with trio.fail_after(30):
        async with open_producer(mock_cluster.bootstrap_servers) as producer:
            first = await producer.send(topic, b"a", partition=2, timestamp_ms=1_000_000)
            await producer.send(topic, b"b", partition=2, timestamp_ms=2_000_000)
        async with open_admin(mock_cluster.bootstrap_servers) as admin:
            cluster = await admin.describe_cluster()
            assert {b.node_id for b in cluster.brokers} == set(mock_cluster.brokers)
            assert topic in await admin.list_topics()
            description = (await admin.describe_topics([topic]))[topic]
            assert [p.partition for p in description.partitions] == [0, 1, 2, 3]
            assert {p.leader for p in description.partitions} <= set(mock_cluster.brokers)
            with pytest.raises(errors.UnknownTopicOrPartitionError):
                await admin.describe_topics(["no-such-topic"])
            tp = TopicPartition(topic, 2)
            offsets = await admin.list_offsets({tp: "earliest"})
            assert offsets[tp].offset == first.offset == 0
            assert (await admin.list_offsets({tp: "latest"}))[tp].offset == 2
            # the mock has no CreateTopics: the client refuses locally, sending nothing
            with pytest.raises(errors.UnsupportedVersionError, match="CreateTopics"):
                await admin.create_topics([NewTopic("x", 1, 1)])
