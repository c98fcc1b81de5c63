"""Real clients at old and new protocol generations, through the data path.

kafka-python pinned to a broker release speaks that release's versions (message format v1 with
Produce v2 / Fetch v3 for 0.10.2; v2 batches from 0.11 on), so the broker converts in both
directions for the oldest; librdkafka and aiokafka speak their newest. A recorder in front of the
broker's handler table notes which (API, version) each request used, so every test also proves
the version it meant to exercise was the one on the wire. Leader epochs: a broker restart starts
a new epoch; consumers that validate their positions (kafka-python with OffsetForLeaderEpoch,
librdkafka when Metadata shows a newer epoch) carry on from where they were, exactly once.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import socket
import time
from collections.abc import Iterator

import confluent_kafka
import pytest

from tests.stamps import BASE_MS
from trio_broker.broker.apis import registry
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.batch import iter_batches
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

RECORDS = 300
TS = BASE_MS
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
#: pin -> (Produce, Fetch, ListOffsets, Metadata) versions kafka-python sends at that pin
PINS: dict[tuple[int, ...] | None, tuple[int, int, int, int]] = {
    (0, 10, 2): (2, 3, 1, 2),
    (0, 11): (3, 5, 2, 4),
    (1, 1): (5, 7, 2, 5),
    (2, 0): (6, 8, 3, 6),
    (2, 6): (8, 11, 5, 9),
    None: (9, 12, 11, 13),
}


@pytest.fixture
def versions_seen(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[tuple[str, int]]:
    """(API name, version) of every request the broker handles during the test."""
    seen: collections.Counter[tuple[str, int]] = collections.Counter()
    for key, handler in list(registry.HANDLERS.items()):
        async def recorded(ctx, body, _handler=handler):  # type: ignore[no-untyped-def]
            seen[ctx.header.api_name, ctx.version] += 1
            return await _handler(ctx, body)

        monkeypatch.setitem(registry.HANDLERS, key, recorded)
    return seen


def _codecs_on_disk(broker: ThreadedBroker, topic: str) -> set[int]:
    def read() -> set[int]:
        assert broker.broker is not None
        log = broker.broker.state.logs.get_log(topic, 0)
        ids, offset = set(), 0
        while offset < log.log_end_offset:
            for _, header in iter_batches(log.read(offset, 1 << 20).records):
                ids.add(header.attributes & 0x07)
                offset = header.next_offset
        return ids

    return broker.call(read)


def _pin_id(pin: tuple[int, ...] | None) -> str:
    return "unpinned" if pin is None else ".".join(map(str, pin))


def _cases() -> Iterator[tuple[tuple[int, ...] | None, str]]:
    for pin in PINS:
        for codec in CODEC_IDS:
            if codec == "zstd" and pin is not None and pin < (2, 1):
                continue  # zstd needs Kafka 2.1 (KIP-110): kafka-python refuses it below
            yield pin, codec


@pytest.mark.parametrize(("pin", "codec"), list(_cases()),
                         ids=[f"{_pin_id(p)}-{c}" for p, c in _cases()])
def test_kafka_python_pinned_produces_and_consumes(kafka_broker, unique_topic, versions_seen,
                                                   pin, codec):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = kafka_broker.create_topic(unique_topic(codec), 1)
    pinned = {} if pin is None else {"api_version": pin}
    with_headers = pin is None or pin >= (0, 11)  # message format v2 carries headers
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers,
                             compression_type=None if codec == "none" else codec, linger_ms=5,
                             **pinned)
    for i in range(RECORDS):
        producer.send(topic, key=b"key-%d" % i, value=b"value %d " % i * (i % 7),
                      headers=[("i", b"%d" % i)] if with_headers else None,
                      timestamp_ms=TS + i, partition=0)
    producer.flush(30)
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers, group_id=None,
                             enable_auto_commit=False, fetch_max_wait_ms=100, **pinned)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = []
    deadline = time.monotonic() + 30
    while len(got) < RECORDS and time.monotonic() < deadline:
        for messages in consumer.poll(timeout_ms=200, max_records=1000).values():
            got += messages
    consumer.close()
    assert [m.offset for m in got] == list(range(RECORDS))
    assert [(m.key, m.value) for m in got] == [
        (b"key-%d" % i, b"value %d " % i * (i % 7)) for i in range(RECORDS)]
    assert [m.timestamp for m in got] == [TS + i for i in range(RECORDS)]
    if with_headers:
        assert [list(m.headers) for m in got] == [[("i", b"%d" % i)] for i in range(RECORDS)]
    produce_v, fetch_v, list_v, metadata_v = PINS[pin]
    assert ("Produce", produce_v) in versions_seen
    assert ("Fetch", fetch_v) in versions_seen
    assert ("ListOffsets", list_v) in versions_seen
    assert ("Metadata", metadata_v) in versions_seen
    # stored as v2 batches with the codec the client asked for (an old-format wrapper keeps
    # its codec when converted)
    assert _codecs_on_disk(kafka_broker, topic) == {CODEC_IDS[codec]}


@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_confluent_kafka_newest_versions(kafka_broker, unique_topic, versions_seen, codec):
    topic = kafka_broker.create_topic(unique_topic(codec), 1)
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                                         "compression.type": codec, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, key=b"k%d" % i, value=b"v" * (i % 50), partition=0,
                         timestamp=TS + i, headers=[("i", b"%d" % i)])
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "unused",
        "enable.auto.commit": False, "fetch.queue.backoff.ms": 1})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < RECORDS and time.monotonic() < deadline:
        got += consumer.consume(num_messages=1000, timeout=0.5)
    low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0),
                                               timeout=10, cached=False)
    consumer.close()
    assert [m.error() for m in got] == [None] * RECORDS
    assert [(m.offset(), m.key(), m.timestamp()[1]) for m in got] == [
        (i, b"k%d" % i, TS + i) for i in range(RECORDS)]
    assert (low, high) == (0, RECORDS)
    # librdkafka 2.16's newest: Produce v10, Fetch v16, Metadata v13, ListOffsets v7
    assert {("Produce", 10), ("Fetch", 16), ("Metadata", 13), ("ListOffsets", 7)} <= \
        set(versions_seen)
    assert _codecs_on_disk(kafka_broker, topic) == {CODEC_IDS[codec]}


@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_aiokafka(kafka_broker, unique_topic, versions_seen, codec):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = kafka_broker.create_topic(unique_topic(codec), 1)

    async def run() -> list:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers,
                                    compression_type=None if codec == "none" else codec,
                                    linger_ms=5)
        await producer.start()
        try:
            sent = [await producer.send(topic, key=b"k%d" % i, value=b"w" * (i % 40),
                                        partition=0, timestamp_ms=TS + i)
                    for i in range(RECORDS)]
            await asyncio.gather(*sent)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers,
                                    group_id=None, enable_auto_commit=False)
        await consumer.start()
        got = []
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            deadline = time.monotonic() + 30
            while len(got) < RECORDS and time.monotonic() < deadline:
                for messages in (await consumer.getmany(timeout_ms=200)).values():
                    got += messages
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(run())
    assert [(m.offset, m.key, m.timestamp) for m in got] == [
        (i, b"k%d" % i, TS + i) for i in range(RECORDS)]
    assert {("Produce", 7), ("Fetch", 11)} <= set(versions_seen)  # aiokafka's newest
    assert _codecs_on_disk(kafka_broker, topic) == {CODEC_IDS[codec]}


# --- leader epochs across a restart -------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _RestartableBroker:
    """A broker on a fixed port and data dir, so clients reconnect to it after a restart."""

    def __init__(self, tmp_path) -> None:  # type: ignore[no-untyped-def]
        port = _free_port()
        self.settings = {**TEST_DEFAULTS, "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                         "log_dirs": str(tmp_path / "data")}
        self.bootstrap = f"127.0.0.1:{port}"
        self.broker = ThreadedBroker(**self.settings).start()

    def restart(self) -> None:
        self.broker.stop()
        self.broker = ThreadedBroker(**self.settings).start()

    def epoch(self, topic: str) -> int:
        assert self.broker.broker is not None
        log = self.broker.broker.state.logs.get_log(topic, 0)
        return self.broker.call(lambda: log.leader_epoch)

    def produce(self, topic: str, start: int, count: int) -> None:
        producer = confluent_kafka.Producer({"bootstrap.servers": self.bootstrap,
                                             "linger.ms": 2})
        for i in range(start, start + count):
            producer.produce(topic, value=b"%d" % i, partition=0)
        assert producer.flush(30) == 0


def _epochs_of_stored_batches(broker: _RestartableBroker, topic: str) -> dict[int, int]:
    """base offset -> leader epoch of every stored batch"""
    def read() -> dict[int, int]:
        assert broker.broker.broker is not None
        log = broker.broker.broker.state.logs.get_log(topic, 0)
        out, offset = {}, 0
        while offset < log.log_end_offset:
            for _, header in iter_batches(log.read(offset, 1 << 20).records):
                out[header.base_offset] = header.partition_leader_epoch
                offset = header.next_offset
        return out

    return broker.broker.call(read)


def test_kafka_python_validates_its_position_after_a_restart(tmp_path, versions_seen):
    from kafka import KafkaConsumer, TopicPartition

    cluster = _RestartableBroker(tmp_path)
    try:
        cluster.broker.create_topic("epochs", 1)
        cluster.produce("epochs", 0, 100)
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=None,
                                 enable_auto_commit=False, fetch_max_wait_ms=100,
                                 reconnect_backoff_ms=50, reconnect_backoff_max_ms=500)
        tp = TopicPartition("epochs", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = _poll_kafka_python(consumer, 100)
        assert cluster.epoch("epochs") == 0
        cluster.restart()
        assert cluster.epoch("epochs") == 1  # a new leadership
        versions_seen.clear()
        cluster.produce("epochs", 100, 100)
        got += _poll_kafka_python(consumer, 100)
        consumer.close()
        assert [int(m.value) for m in got] == list(range(200))  # no gap, no repeat
        assert [m.offset for m in got] == list(range(200))
        epochs = _epochs_of_stored_batches(cluster, "epochs")
        assert {epoch for base, epoch in epochs.items() if base < 100} == {0}
        assert {epoch for base, epoch in epochs.items() if base >= 100} == {1}
        # after the reconnect the consumer checked its position against the new epoch
        assert any(api == "OffsetForLeaderEpoch" for api, _ in versions_seen)
    finally:
        cluster.broker.stop()


def _poll_kafka_python(consumer, count: int) -> list:  # type: ignore[no-untyped-def]
    got: list = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        for messages in consumer.poll(timeout_ms=200, max_records=1000).values():
            got += messages
    return got


def test_librdkafka_follows_the_new_epoch_after_a_restart(tmp_path, versions_seen):
    cluster = _RestartableBroker(tmp_path)
    try:
        cluster.broker.create_topic("epochs", 1)
        cluster.produce("epochs", 0, 100)
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": cluster.bootstrap, "group.id": "unused",
            "enable.auto.commit": False, "fetch.queue.backoff.ms": 1,
            "topic.metadata.refresh.interval.ms": 500, "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500})
        consumer.assign([confluent_kafka.TopicPartition("epochs", 0,
                                                        confluent_kafka.OFFSET_BEGINNING)])
        got = _poll_confluent(consumer, 100)
        cluster.restart()
        versions_seen.clear()
        cluster.produce("epochs", 100, 100)
        got += _poll_confluent(consumer, 100)
        consumer.close()
        assert [m.error() for m in got] == [None] * 200
        assert [int(m.value()) for m in got] == list(range(200))
        # librdkafka saw the epoch move in Metadata (v7+) and validated its position
        assert any(api == "OffsetForLeaderEpoch" for api, _ in versions_seen)
        assert ("Metadata", 13) in versions_seen
    finally:
        cluster.broker.stop()


def _poll_confluent(consumer: confluent_kafka.Consumer, count: int) -> list:
    got: list = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        got += consumer.consume(num_messages=1000, timeout=0.2)
    return got


def test_offset_for_leader_epoch_is_advertised_with_metadata_v7_plus() -> None:
    # reference trap 14: advertising Metadata >= 7 makes clients validate with this API
    advertised = registry.advertised_versions()
    assert advertised[ApiKey.Metadata].max >= 7
    assert ApiKey.OffsetForLeaderEpoch in advertised


def test_confluent_admin_list_offsets_and_describe_topics(kafka_broker, unique_topic,
                                                          versions_seen):
    from confluent_kafka import TopicCollection, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    topic = kafka_broker.create_topic(unique_topic("admin"), 2)
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for i, ts in enumerate([TS + 5, TS + 90, TS + 20]):
        producer.produce(topic, value=b"%d" % i, partition=0, timestamp=ts)
    assert producer.flush(10) == 0
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    tp = TopicPartition(topic, 0)
    answers = {}
    for name, spec in (("latest", OffsetSpec.latest()), ("earliest", OffsetSpec.earliest()),
                       ("max", OffsetSpec.max_timestamp()),
                       ("time", OffsetSpec.for_timestamp(TS + 10))):
        answers[name] = admin.list_offsets({tp: spec})[tp].result(10)
    assert answers["latest"].offset == 3
    assert answers["earliest"].offset == 0
    assert (answers["max"].offset, answers["max"].timestamp) == (1, TS + 90)  # KIP-734
    assert (answers["time"].offset, answers["time"].timestamp) == (1, TS + 90)
    assert any(api == "ListOffsets" and version >= 7 for api, version in versions_seen)

    described = admin.describe_topics(TopicCollection([topic]))[topic].result(10)
    assert described.name == topic
    assert len(described.partitions) == 2
    topic_id = kafka_broker.call(kafka_broker.broker.state.logs.topic_id, topic)
    # librdkafka prints ids in standard base64 (Kafka: URL-safe); the bytes are what count
    assert base64.b64decode(str(described.topic_id) + "==") == topic_id.bytes
    assert [p.leader.id for p in described.partitions] == [0, 0]
