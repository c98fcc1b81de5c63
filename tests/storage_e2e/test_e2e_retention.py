"""Retention through a running broker: old segments go, the earliest offset moves forward, and
consumers see exactly what is left."""

from __future__ import annotations

import time

import confluent_kafka
import pytest

from trio_broker.client.blocking import EARLIEST, LATEST, BlockingClient, TopicPartition
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.records import build_batch

BATCH_RECORDS = 10


def _batch(n: int, *, timestamp_ms: int | None = None) -> bytes:
    return build_batch([(None, b"%05d-%03d" % (n, r) + b"x" * 80) for r in range(BATCH_RECORDS)],
                       base_timestamp_ms=timestamp_ms)


def _wait_for(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


@pytest.mark.broker_config(log_retention_check_interval_ms=100)
def test_retention_bytes_deletes_old_segments(kafka_broker, unique_topic):
    name = kafka_broker.create_topic(unique_topic("retention"), 1, {
        "segment.bytes": "2500", "retention.bytes": "5000"})
    log = kafka_broker.broker.state.logs.get_log(name, 0)
    with BlockingClient(kafka_broker.bootstrap_servers) as client:
        tp = TopicPartition(name, 0)
        for n in range(40):
            assert client.produce({tp: _batch(n)}, acks=1)[tp][:2] == (0, n * BATCH_RECORDS)
        _wait_for(lambda: client.list_offsets({tp: EARLIEST})[tp] > 0)
        _wait_for(lambda: kafka_broker.call(lambda: log.size_bytes) <= 5000 + 2500)
        earliest = client.list_offsets({tp: EARLIEST})[tp]
        latest = client.list_offsets({tp: LATEST})[tp]
        assert latest == 400
        assert 0 < earliest < latest
        assert earliest % BATCH_RECORDS == 0
        segments = sorted(p.name for p in log.directory.glob("*.log"))
        assert segments[0] == f"{earliest:020d}.log"  # the files are gone, not just hidden
        # below the log start is out of range; the log start itself is readable
        assert client.fetch_many({tp: 0}, max_wait_ms=0)[0].error == \
            ErrorCode.OFFSET_OUT_OF_RANGE
        assert client.fetch_many({tp: earliest}, max_wait_ms=0)[0].error == 0

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "unused",
        "enable.auto.commit": False, "fetch.queue.backoff.ms": 1})
    consumer.assign([confluent_kafka.TopicPartition(name, 0, confluent_kafka.OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + 10
    while len(got) < latest - earliest and time.monotonic() < deadline:
        got += [m.offset() for m in consumer.consume(num_messages=1000, timeout=0.5)
                if m.error() is None]
    consumer.close()
    assert got == list(range(earliest, latest))


@pytest.mark.broker_config(log_retention_check_interval_ms=100)
def test_retention_ms_empties_an_expired_log(kafka_broker, unique_topic):
    name = kafka_broker.create_topic(unique_topic("retention"), 1, {
        "segment.bytes": "2500", "retention.ms": "60000"})
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    with BlockingClient(kafka_broker.bootstrap_servers) as client:
        tp = TopicPartition(name, 0)
        for n in range(10):
            client.produce({tp: _batch(n, timestamp_ms=an_hour_ago)}, acks=1)
        # every segment, the active one included, is older than retention.ms
        _wait_for(lambda: client.list_offsets({tp: EARLIEST})[tp] == 100)
        assert client.list_offsets({tp: LATEST})[tp] == 100
        part = client.fetch_many({tp: 100}, max_wait_ms=0)[0]
        assert (part.error, part.records, part.log_start_offset) == (0, b"", 100)
        # a fresh record is kept and gets the next offset
        assert client.produce({tp: _batch(99)}, acks=1)[tp][:2] == (0, 100)
        logs = kafka_broker.broker.state.logs
        assert kafka_broker.call(logs.run_retention, int(time.time() * 1000)) == 0
        assert client.list_offsets({tp: EARLIEST})[tp] == 100
