"""Every client x every codec: 10,000 keyed records with headers through the durable log and
back, compared exactly (keys, values, headers, timestamps, order within each partition)."""

from __future__ import annotations

import asyncio
import random
import time

import confluent_kafka
import pytest

from tests.stamps import BASE_MS
from trio_broker.client.blocking import partition_for_key

RECORDS = 10_000
PARTITIONS = 3
CODECS = ["gzip", "snappy", "lz4", "zstd"]
BASE_TS = BASE_MS

Row = tuple[bytes, bytes | None, tuple[tuple[str, bytes], ...], int]


def _records() -> dict[int, list[Row]]:
    """partition -> [(key, value, headers, timestamp)] in produce order."""
    rng = random.Random(1234)
    out: dict[int, list[Row]] = {p: [] for p in range(PARTITIONS)}
    for i in range(RECORDS):
        key = b"key-%d" % (i % 997)
        value = None if i % 1000 == 999 else rng.randbytes(rng.randrange(0, 200))
        headers = (("i", b"%d" % i), ("kind", b"" if i % 7 == 0 else b"even" if i % 2 == 0
                                      else b"odd"))
        out[partition_for_key(key, PARTITIONS)].append((key, value, headers, BASE_TS + i))
    return out


EXPECTED = _records()
ORDERED = sorted(((p, row) for p, rows in EXPECTED.items() for row in rows),
                 key=lambda item: item[1][3])


def _check(got: dict[int, list[Row]]) -> None:
    for p in range(PARTITIONS):
        assert len(got[p]) == len(EXPECTED[p]), f"partition {p}"
        for i, (a, b) in enumerate(zip(got[p], EXPECTED[p])):
            assert a == b, f"partition {p} offset {i}"


def _codec_available(client: str, codec: str) -> None:
    if client == "kafka-python":
        import kafka.codec

        package = {"snappy": "python-snappy", "lz4": "lz4", "zstd": "zstandard"}.get(codec)
        # the dev extras install these; a missing one is a broken environment, not a skip
        assert package is None or getattr(kafka.codec, f"has_{codec}")(), (
            f"kafka-python needs {package} for {codec}: pip install {package}")


# --- confluent-kafka -------------------------------------------------------------------------

def _confluent(bootstrap: str, topic: str, codec: str) -> dict[int, list[Row]]:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
        "acks": "all", "queue.buffering.max.messages": RECORDS * 2})
    for p, (key, value, headers, ts) in ORDERED:
        producer.produce(topic, key=key, value=value, headers=list(headers), partition=p,
                         timestamp=ts)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
        "fetch.queue.backoff.ms": 1})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(PARTITIONS)])
    got: dict[int, list[Row]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 30
    count = 0
    while count < RECORDS and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=10_000, timeout=1):
            assert m.error() is None, m.error()
            assert m.offset() == len(got[m.partition()])
            kind, ts = m.timestamp()
            assert kind == confluent_kafka.TIMESTAMP_CREATE_TIME
            got[m.partition()].append((m.key(), m.value(), tuple(m.headers() or ()), ts))
            count += 1
    consumer.close()
    return got


# --- kafka-python ----------------------------------------------------------------------------

def _kafka_python(bootstrap: str, topic: str, codec: str) -> dict[int, list[Row]]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5,
                             acks="all", batch_size=65536)
    for p, (key, value, headers, ts) in ORDERED:
        producer.send(topic, key=key, value=value, headers=list(headers), partition=p,
                      timestamp_ms=ts)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, fetch_max_wait_ms=100)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    got: dict[int, list[Row]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    count = 0
    while count < RECORDS and time.monotonic() < deadline:
        for tp, messages in consumer.poll(timeout_ms=500, max_records=10_000).items():
            for m in messages:
                assert m.offset == len(got[tp.partition])
                assert m.timestamp_type == 0
                got[tp.partition].append((m.key, m.value, tuple(m.headers), m.timestamp))
                count += 1
    consumer.close()
    return got


# --- aiokafka --------------------------------------------------------------------------------

def _aiokafka(bootstrap: str, topic: str, codec: str) -> dict[int, list[Row]]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run() -> dict[int, list[Row]]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=codec,
                                    linger_ms=5, acks="all", max_batch_size=65536)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=key, value=value, headers=list(headers),
                                           partition=p, timestamp_ms=ts)
                       for p, (key, value, headers, ts) in ORDERED]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                    enable_auto_commit=False, fetch_max_wait_ms=100)
        await consumer.start()
        got: dict[int, list[Row]] = {p: [] for p in range(PARTITIONS)}
        try:
            tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            count = 0
            deadline = time.monotonic() + 60
            while count < RECORDS and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500, max_records=10_000)
                for tp, messages in batches.items():
                    for m in messages:
                        assert m.offset == len(got[tp.partition])
                        assert m.timestamp_type == 0
                        got[tp.partition].append((m.key, m.value, tuple(m.headers),
                                                  m.timestamp))
                        count += 1
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


CLIENTS = {"confluent-kafka": _confluent, "kafka-python": _kafka_python, "aiokafka": _aiokafka}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_round_trip(kafka_broker, unique_topic, client, codec):
    _codec_available(client, codec)
    topic = kafka_broker.create_topic(unique_topic(codec), PARTITIONS)
    got = CLIENTS[client](kafka_broker.bootstrap_servers, topic, codec)
    _check(got)
    # the broker stored the batches as the client compressed them (clients send a batch
    # uncompressed when the codec would not make it smaller: the values are random bytes)
    codec_id = CODECS.index(codec) + 1
    codec_ids = kafka_broker.call(_codecs_on_disk, kafka_broker, topic)
    assert codec_id in codec_ids
    assert codec_ids <= {0, codec_id}


def _codecs_on_disk(kafka_broker, topic: str) -> set[int]:
    from trio_broker.protocol.batch import iter_batches

    ids = set()
    for p in range(PARTITIONS):
        log = kafka_broker.broker.state.logs.get_log(topic, p)
        offset = 0
        while offset < log.log_end_offset:
            data = log.read(offset, 1 << 20).records
            for _, header in iter_batches(data):
                ids.add(header.attributes & 0x07)
                offset = header.next_offset
    return ids


def test_log_append_time_topic(kafka_broker, unique_topic):
    """The broker stamps its own time into the batch header and re-computes the CRC."""
    topic = kafka_broker.create_topic(unique_topic("append-time"), 1,
                                      {"message.timestamp.type": "LogAppendTime"})
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                                         "compression.type": "lz4", "linger.ms": 5})
    before = int(time.time() * 1000)
    for i in range(500):
        producer.produce(topic, key=b"%d" % i, value=b"v%d" % i, partition=0, timestamp=1000 + i)
    assert producer.flush(10) == 0
    after = int(time.time() * 1000)
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "unused",
        "enable.auto.commit": False, "fetch.queue.backoff.ms": 1,
        "check.crcs": True})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + 10
    while len(got) < 500 and time.monotonic() < deadline:
        got += consumer.consume(num_messages=500, timeout=0.5)
    consumer.close()
    assert [m.error() for m in got] == [None] * 500
    assert [m.value() for m in got] == [b"v%d" % i for i in range(500)]
    for m in got:
        kind, ts = m.timestamp()
        assert kind == confluent_kafka.TIMESTAMP_LOG_APPEND_TIME
        assert before <= ts <= after
