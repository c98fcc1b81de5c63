"""A compacted topic end to end: produced by confluent-kafka, compacted (by the test hook and by
the background cleaner), and read back across a restart by three client libraries, which must
all cope with the gaps compaction leaves in the offsets."""

from __future__ import annotations

import asyncio
import sys
import time

import aiokafka
import confluent_kafka
import kafka
from confluent_kafka.admin import AdminClient, NewTopic

from tests.metrics.test_metrics import scrape
from tests.metrics.test_metrics import value as sample
from trio_broker.broker.storage.cleaner import DELETE_HORIZON_BIT
from trio_broker.protocol.records import decode_batches
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

KEYS = 10_000
CONFIG = {"cleanup.policy": "compact", "segment.bytes": "16384", "delete.retention.ms": "0",
          "min.compaction.lag.ms": "0"}


def _produce(bootstrap: str, topic: str) -> dict[bytes, bytes | None]:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    latest: dict[bytes, bytes | None] = {}
    for version in range(3):
        for k in range(KEYS):
            key, value = b"k%05d" % k, b"v%d-%05d" % (version, k)
            producer.produce(topic, value, key)
            latest[key] = value
        producer.flush(30)
    for k in range(0, KEYS, 10):  # tombstones for a tenth of the keys (1,000)
        producer.produce(topic, None, b"k%05d" % k)
        latest[b"k%05d" % k] = None
    producer.flush(30)
    for k in range(300):  # more than a segment after them: every update is cleanable
        producer.produce(topic, b"f" * 64, b"filler%03d" % k)
        latest[b"filler%03d" % k] = b"f" * 64
    assert producer.flush(30) == 0
    return latest


def _confluent(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes, bytes | None]]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "c",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    got: list[tuple[int, bytes, bytes | None]] = []
    deadline = time.monotonic() + 30
    while (not got or got[-1][0] < end - 1) and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=10_000, timeout=0.5):
            assert m.error() is None, m.error()
            got.append((m.offset(), m.key(), m.value()))
    consumer.close()
    return got


def _kafka_python(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes, bytes | None]]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                   auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    consumer.assign([kafka.TopicPartition(topic, 0)])
    got = []
    for m in consumer:
        got.append((m.offset, m.key, m.value))
        if m.offset >= end - 1:
            break
    consumer.close()
    return got


def _aiokafka(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes, bytes | None]]:
    async def run() -> list[tuple[int, bytes, bytes | None]]:
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap,
                                             enable_auto_commit=False,
                                             auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([aiokafka.TopicPartition(topic, 0)])
            await consumer.seek_to_beginning()
            got: list[tuple[int, bytes, bytes | None]] = []
            deadline = time.monotonic() + 30
            while (not got or got[-1][0] < end - 1) and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=500)
                for messages in batch.values():
                    got += [(m.offset, m.key, m.value) for m in messages]
            return got
        finally:
            await consumer.stop()

    return asyncio.run(run())


def _check(got: list[tuple[int, bytes, bytes | None]], latest: dict[bytes, bytes | None],
           end: int) -> None:
    offsets = [o for o, _k, _v in got]
    assert offsets == sorted(set(offsets))
    assert offsets[-1] == end - 1
    assert len(got) < len(latest) + 400  # compacted: far fewer than the 31,300 produced
    state = {}
    for _o, key, value in got:
        state[key] = value
    live = {k: v for k, v in latest.items() if v is not None}
    assert {k: v for k, v in state.items() if v is not None} == live


def test_compacted_topic_read_by_three_clients_after_a_restart(tmp_path):
    settings = {**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data")}
    topic = "changelog"
    broker = ThreadedBroker(**settings).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic(topic, 1, 1, config=CONFIG)])[topic].result(10)
        latest = _produce(broker.bootstrap_servers, topic)
        stats = broker.compact(topic)
        broker.compact(topic)  # the second pass removes the tombstones (delete.retention.ms=0)
        print(f"\ncompaction: {stats.bytes_read} bytes read, {stats.bytes_written} written, "
              f"{stats.records_removed} of {stats.records_read} records removed")
        assert stats.records_removed > KEYS
    finally:
        broker.stop()
    broker = ThreadedBroker(**settings).start()
    try:
        bootstrap = broker.bootstrap_servers
        end = 3 * KEYS + KEYS // 10 + 300
        for read in (_confluent, _kafka_python, _aiokafka):
            _check(read(bootstrap, topic, end), latest, end)
    finally:
        broker.stop()


def test_background_cleaner_compacts_without_the_hook(tmp_path):
    settings = {**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                "log.cleaner.backoff.ms": 100, "metrics_listener": "http://127.0.0.1:0"}
    topic = "background"
    broker = ThreadedBroker(**settings).start()
    try:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config={
            **CONFIG, "min.cleanable.dirty.ratio": "0.01", "segment.ms": "100"})])[topic].result(10)
        latest = _produce(bootstrap, topic)
        cleaner = broker.broker.cleaner  # type: ignore[union-attr]
        deadline = time.monotonic() + 30
        while cleaner.metrics.runs == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert cleaner.metrics.runs > 0
        end = 3 * KEYS + KEYS // 10 + 300
        got = _confluent(bootstrap, topic, end)
        assert len(got) < 3 * KEYS
        state = {k: v for _o, k, v in got}
        assert {k: v for k, v in state.items() if v is not None} == {
            k: v for k, v in latest.items() if v is not None}
        samples = scrape(broker)
        assert sample(samples, "kafka_log_logcleaner_runs_total") >= 1
        assert sample(samples, "kafka_log_logcleaner_bytes_read_total") > sample(
            samples, "kafka_log_logcleaner_bytes_written_total") > 0
        assert 0 < sample(samples, "kafka_log_logcleaner_cleaner_recopy_percent") < 100
        assert "kafka_log_logcleanermanager_max_dirty_percent" in {n for n, _ in samples}
    finally:
        broker.stop()


def test_cleaner_configs_change_at_run_time(tmp_path):
    """log.cleaner.threads, .io.max.bytes.per.second, .dedupe.buffer.size and .backoff.ms set
    on the running broker with IncrementalAlterConfigs (confluent-kafka) apply at once, as
    Kafka's dynamic cleaner configs do, and survive a restart."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    settings = {**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data")}
    broker = ThreadedBroker(**settings).start()

    def alter(changes: dict[str, str | None]) -> None:
        entries = [ConfigEntry(k, v, incremental_operation=(
            AlterConfigOpType.SET if v is not None else AlterConfigOpType.DELETE))
            for k, v in changes.items()]
        resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=entries)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.incremental_alter_configs([resource])[resource].result(10)

    def running(threads: int) -> bool:
        deadline = time.monotonic() + 10
        while cleaner.running_threads != threads and time.monotonic() < deadline:
            time.sleep(0.05)
        return cleaner.running_threads == threads

    try:
        cleaner = broker.broker.cleaner  # type: ignore[union-attr]
        assert running(1)
        assert cleaner.io_max_bytes_per_second == sys.float_info.max  # Kafka's default
        alter({"log.cleaner.threads": "3", "log.cleaner.io.max.bytes.per.second": "1048576",
               "log.cleaner.dedupe.buffer.size": "3000000", "log.cleaner.backoff.ms": "250"})
        assert running(3)
        assert (cleaner.io_max_bytes_per_second, cleaner.backoff_ms) == (1048576, 250)
        assert cleaner.capacity == int(3_000_000 / 3 / 24 * 0.9)
        alter({"log.cleaner.threads": "0"})  # no cleaning at all, as Kafka's 0 threads
        assert running(0)
        alter({"log.cleaner.threads": "2"})
        assert running(2)
    finally:
        broker.stop()
    broker = ThreadedBroker(**settings).start()
    try:
        cleaner = broker.broker.cleaner  # type: ignore[union-attr]
        assert running(2)
        assert cleaner.io_max_bytes_per_second == 1048576
        alter({"log.cleaner.io.max.bytes.per.second": None})
        assert cleaner.io_max_bytes_per_second == sys.float_info.max
    finally:
        broker.stop()


def test_clients_read_batches_carrying_a_delete_horizon(tmp_path):
    """After a cleaning, tombstone batches carry a delete horizon as their base timestamp
    (KIP-534); confluent-kafka and kafka-python still see every record's own timestamp."""
    settings = {**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data")}
    topic = "horizon"
    broker = ThreadedBroker(**settings).start()
    try:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config={
            **CONFIG, "delete.retention.ms": "3600000"})])[topic].result(10)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        stamp = 1_700_000_000_000
        for k in range(50):
            producer.produce(topic, b"v", b"k%02d" % k, timestamp=stamp + k)
        for k in range(0, 50, 2):
            producer.produce(topic, None, b"k%02d" % k, timestamp=stamp + 100 + k)
        producer.flush(10)
        for k in range(300):
            producer.produce(topic, b"f" * 64, b"filler%03d" % k, timestamp=stamp + 1000)
        assert producer.flush(10) == 0
        assert broker.compact(topic).records_removed >= 25
        log = broker.broker.state.logs.get_log(topic, 0)  # type: ignore[union-attr]
        flagged = [h for h, _r in decode_batches(broker.call(log.read, 0, 1 << 20).records)
                   if h.attributes & DELETE_HORIZON_BIT]
        assert flagged
        assert all(h.base_timestamp > stamp + 3_000_000 for h in flagged)
        expected = {b"k%02d" % k: stamp + (100 + k if k % 2 == 0 else k) for k in range(50)}
        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "h",
                                             "enable.auto.commit": False})
        consumer.assign([confluent_kafka.TopicPartition(topic, 0,
                                                        confluent_kafka.OFFSET_BEGINNING)])
        seen: dict[bytes, tuple[int, bytes | None]] = {}
        deadline = time.monotonic() + 30
        while len(seen) < 50 and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=1000, timeout=0.5):
                assert m.error() is None, m.error()
                if m.key().startswith(b"k"):
                    seen[m.key()] = (m.timestamp()[1], m.value())
        consumer.close()
        assert {k: ts for k, (ts, _v) in seen.items()} == expected
        assert sum(1 for _ts, v in seen.values() if v is None) == 25
        reader = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                     auto_offset_reset="earliest", consumer_timeout_ms=5_000)
        reader.assign([kafka.TopicPartition(topic, 0)])
        stamps = {}
        for m in reader:
            if m.key.startswith(b"k"):
                stamps[m.key] = m.timestamp
            if len(stamps) == 50:
                break
        reader.close()
        assert stamps == expected
    finally:
        broker.stop()
