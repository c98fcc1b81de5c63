"""DeleteRecords from confluent-kafka and kafka-python: the log start offset moves, reads below
it are OFFSET_OUT_OF_RANGE, ListOffsets earliest follows, and all of it survives a restart."""

from __future__ import annotations

import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from trio_broker.client.blocking import EARLIEST, BlockingClient, TopicPartition
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker


def _earliest(bootstrap: str, topic: str) -> int:
    with BlockingClient(bootstrap) as client:
        tp = TopicPartition(topic, 0)
        return client.list_offsets({tp: EARLIEST})[tp]


def test_delete_records_moves_the_log_start_and_survives_a_restart(tmp_path):
    settings = {**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data")}
    topic = "trimmed"
    broker = ThreadedBroker(**settings).start()
    try:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "2048"})]
                            )[topic].result(10)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
        for i in range(200):
            producer.produce(topic, b"v%03d" % i, b"k%03d" % i)
        assert producer.flush(10) == 0
        futures = admin.delete_records([confluent_kafka.TopicPartition(topic, 0, 50)])
        result = next(iter(futures.values())).result(10)
        assert result.low_watermark == 50  # the new low watermark
        assert _earliest(bootstrap, topic) == 50
        kp_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            answer = kp_admin.delete_records({kafka.TopicPartition(topic, 0): 120})
        finally:
            kp_admin.close()
        assert answer[kafka.TopicPartition(topic, 0)]["low_watermark"] == 120
        assert _earliest(bootstrap, topic) == 120
    finally:
        broker.stop()
    broker = ThreadedBroker(**settings).start()
    try:
        bootstrap = broker.bootstrap_servers
        assert _earliest(bootstrap, topic) == 120
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False,
            "auto.offset.reset": "error"})
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 10)])
        error = None
        for _ in range(40):
            m = consumer.poll(0.5)
            if m is not None and m.error() is not None:
                error = m.error()
                break
        consumer.close()
        assert error is not None
        assert error.code() == confluent_kafka.KafkaError._AUTO_OFFSET_RESET, error
        assert "out of range" in error.str().lower() or "OFFSET_OUT_OF_RANGE" in error.str()
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": "g2", "enable.auto.commit": False,
            "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        got = []
        for _ in range(60):
            got += [m.offset() for m in consumer.consume(200, 0.5) if m.error() is None]
            if len(got) >= 80:
                break
        consumer.close()
        assert got == list(range(120, 200))
    finally:
        broker.stop()


def test_delete_records_past_the_end_is_refused_and_minus_one_means_the_end(tmp_path):
    broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data")}).start()
    try:
        bootstrap = broker.bootstrap_servers
        broker.create_topic("t")
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
        for _ in range(5):
            producer.produce("t", b"v")
        assert producer.flush(10) == 0
        admin = AdminClient({"bootstrap.servers": bootstrap})
        future = next(iter(admin.delete_records(
            [confluent_kafka.TopicPartition("t", 0, 6)]).values()))
        with pytest.raises(confluent_kafka.KafkaException, match="OFFSET_OUT_OF_RANGE"):
            future.result(10)
        future = next(iter(admin.delete_records(
            [confluent_kafka.TopicPartition("t", 0, confluent_kafka.OFFSET_END)]).values()))
        assert future.result(10).low_watermark == 5
        assert _earliest(bootstrap, "t") == 5
    finally:
        broker.stop()
