"""The source's timestamp, trigger and splitting options against known offsets and timestamps.

Records ``i = 0..9`` of partition ``p`` carry CreateTime ``BASE + i * 1000 + p * 100``; a third
partition stays empty. Planning (``plan_batch``) and the stream reader's offset decisions run
without Spark, as the driver runs them; the splitting options also run through Spark.
"""

from __future__ import annotations

import json
import time
from typing import Any

import confluent_kafka
import pytest
from pyspark.sql import functions as F
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from tests.stamps import BASE_MS
from trio_broker.spark import SourceOptionError
from trio_broker.spark._options import parse_options
from trio_broker.spark.source import KafkaStreamReader, plan_batch

pytestmark = pytest.mark.spark

#: the records carry 2023 timestamps: time-based retention must not delete them mid-test
KEEP = {"retention.ms": "-1"}

BASE = BASE_MS


@pytest.fixture
def timed_topic(kafka_broker: Any, unique_topic: Any) -> tuple[str, str]:
    topic = kafka_broker.create_topic(unique_topic("timed"), 3, KEEP)
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for p in range(2):
        for i in range(10):
            producer.produce(topic, value=b"%d-%d" % (p, i), partition=p,
                             timestamp=BASE + i * 1000 + p * 100)
    assert producer.flush(30) == 0
    return kafka_broker.bootstrap_servers, topic


def _plan(bootstrap: str, topic: str, **options: str) -> dict[int, tuple[int, int]]:
    opts = parse_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic, **options},
                         streaming=False)
    return {r.partition: (r.start, r.end) for r in plan_batch(opts)}


def test_starting_timestamp_between_records_and_past_the_end(timed_topic) -> None:
    bootstrap, topic = timed_topic
    between = str(BASE + 4500)  # after record 4 of both partitions, before record 5
    assert _plan(bootstrap, topic, startingTimestamp=between,
                 startingOffsetsByTimestampStrategy="latest") == {
        0: (5, 10), 1: (5, 10), 2: (0, 0)}
    exact = str(BASE + 3100)  # record 3 of partition 1 exactly; partition 0's record 4
    assert _plan(bootstrap, topic, startingTimestamp=exact,
                 startingOffsetsByTimestampStrategy="latest") == {
        0: (4, 10), 1: (3, 10), 2: (0, 0)}
    with pytest.raises(SourceOptionError, match=(
            rf"^No offset matched from request of topic-partition {topic}-2 and timestamp "
            rf"{between}\.")):
        _plan(bootstrap, topic, startingTimestamp=between)  # the empty partition has none
    past = str(BASE + 60_000)
    with pytest.raises(SourceOptionError, match=rf"topic-partition {topic}-0 and timestamp {past}"):
        _plan(bootstrap, topic, startingTimestamp=past)
    assert _plan(bootstrap, topic, startingTimestamp=past,
                 startingOffsetsByTimestampStrategy="latest") == {
        0: (10, 10), 1: (10, 10), 2: (0, 0)}


def test_ending_timestamp_between_records_and_past_the_end(timed_topic) -> None:
    bootstrap, topic = timed_topic
    assert _plan(bootstrap, topic, endingTimestamp=str(BASE + 7500)) == {
        0: (0, 8), 1: (0, 8), 2: (0, 0)}
    assert _plan(bootstrap, topic, endingTimestamp=str(BASE + 7000)) == {  # exclusive
        0: (0, 7), 1: (0, 7), 2: (0, 0)}
    assert _plan(bootstrap, topic, endingTimestamp=str(BASE + 60_000)) == {  # past: latest
        0: (0, 10), 1: (0, 10), 2: (0, 0)}
    assert _plan(bootstrap, topic, startingTimestamp=str(BASE + 2500),
                 startingOffsetsByTimestampStrategy="latest",
                 endingTimestamp=str(BASE + 6050)) == {0: (3, 7), 1: (3, 6), 2: (0, 0)}
    with pytest.raises(SourceOptionError, match=rf"starting offset 8 of {topic}-0 is after its "
                                                r"ending offset 3"):
        _plan(bootstrap, topic, startingTimestamp=str(BASE + 7500),
              startingOffsetsByTimestampStrategy="latest", endingTimestamp=str(BASE + 2500))


def test_offsets_by_timestamp_per_partition_and_precedence(timed_topic) -> None:
    bootstrap, topic = timed_topic
    starting = json.dumps({topic: {"0": BASE + 2000, "1": -2, "2": -1}})
    ending = json.dumps({topic: {"0": -1, "1": BASE + 3100, "2": -1}})
    assert _plan(bootstrap, topic, startingOffsetsByTimestamp=starting,
                 endingOffsetsByTimestamp=ending) == {0: (2, 10), 1: (0, 3), 2: (0, 0)}
    # startingTimestamp wins over startingOffsetsByTimestamp, which wins over startingOffsets
    assert _plan(bootstrap, topic, startingTimestamp=str(BASE + 8050),
                 startingOffsetsByTimestamp=starting, startingOffsets="earliest",
                 startingOffsetsByTimestampStrategy="latest") == {
        0: (9, 10), 1: (8, 10), 2: (0, 0)}
    assert _plan(bootstrap, topic, startingOffsetsByTimestamp=starting,
                 startingOffsets=json.dumps({topic: {"0": 7, "1": 7, "2": 0}})) == {
        0: (2, 10), 1: (0, 10), 2: (0, 0)}
    missing = json.dumps({topic: {"0": BASE}})
    with pytest.raises(SourceOptionError, match=(
            rf"^If starting/endingOffsetsByTimestamp contains specific offsets, you must "
            rf"specify all topics \(missing {topic}-1, {topic}-2\)")):
        _plan(bootstrap, topic, startingOffsetsByTimestamp=missing)


def _reader(bootstrap: str, topic: str, **options: str) -> KafkaStreamReader:
    return KafkaStreamReader(parse_options({"kafka.bootstrap.servers": bootstrap,
                                            "subscribe": topic, **options}, streaming=True))


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, value=b"more-%d" % i, partition=0)
    assert producer.flush(30) == 0


def test_min_offsets_per_trigger_waits_for_records_or_max_trigger_delay(timed_topic) -> None:
    bootstrap, topic = timed_topic
    patient = _reader(bootstrap, topic, startingOffsets="earliest", minOffsetsPerTrigger="5",
                      maxTriggerDelay="1h")
    hasty = _reader(bootstrap, topic, startingOffsets="earliest", minOffsetsPerTrigger="5",
                    maxTriggerDelay="300ms")
    both = _reader(bootstrap, topic, startingOffsets="earliest", minOffsetsPerTrigger="5",
                   maxOffsetsPerTrigger="8", maxTriggerDelay="1h")
    try:
        limit = patient.getDefaultReadLimit()
        assert limit == ReadMinRows(5)
        start = patient.initialOffset()
        assert start == {topic: {"0": 0, "1": 0, "2": 0}}
        first = patient.latestOffset(start, limit)  # the first micro-batch never waits
        assert first == {topic: {"0": 10, "1": 10, "2": 0}}
        _produce(bootstrap, topic, 3)
        assert patient.latestOffset(first, limit) == first  # 3 < 5: wait
        _produce(bootstrap, topic, 2)
        second = patient.latestOffset(first, limit)  # 5 waiting: go
        assert second == {topic: {"0": 15, "1": 10, "2": 0}}
        _produce(bootstrap, topic, 1)
        assert patient.latestOffset(second, limit) == second

        assert hasty.latestOffset(start, limit) == {topic: {"0": 16, "1": 10, "2": 0}}
        _produce(bootstrap, topic, 1)
        time.sleep(0.4)  # maxTriggerDelay passes: one record is enough now
        assert hasty.latestOffset({topic: {"0": 16, "1": 10, "2": 0}}, limit) == {
            topic: {"0": 17, "1": 10, "2": 0}}

        # with both options Spark passes the maximum; the minimum comes from the options
        assert both.getDefaultReadLimit() == ReadMaxRows(8)
        capped = both.latestOffset(start, ReadMaxRows(8))
        assert 0 < sum(capped[topic].values()) <= 8  # shared by backlog, rounded down
        assert both.latestOffset(capped, ReadMaxRows(8)) != capped  # 20 waiting >= 5
        assert both.latestOffset(start, ReadAllAvailable()) == {
            topic: {"0": 17, "1": 10, "2": 0}}  # Trigger.Once: everything
    finally:
        for reader in (patient, hasty, both):
            reader.stop()


def test_available_now_stops_at_the_offsets_current_when_it_started(timed_topic) -> None:
    bootstrap, topic = timed_topic
    reader = _reader(bootstrap, topic, startingTimestamp=str(BASE + 5500),
                     startingOffsetsByTimestampStrategy="latest", minOffsetsPerTrigger="1000",
                     maxOffsetsPerTrigger="3000")
    try:
        start = reader.initialOffset()
        assert start == {topic: {"0": 6, "1": 6, "2": 0}}
        reader.prepareForTriggerAvailableNow()
        _produce(bootstrap, topic, 4)  # after the query started: not part of this run
        end = reader.latestOffset(start, ReadMaxRows(3000))  # minOffsetsPerTrigger ignored
        assert end == {topic: {"0": 10, "1": 10, "2": 0}}
        assert reader.latestOffset(end, ReadMaxRows(3000)) == end
    finally:
        reader.stop()


def test_min_partitions_and_max_records_split_a_large_partition(
        spark: Any, kafka_broker: Any, unique_topic: Any) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("split"), 2)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(1000):
        producer.produce(topic, value=b"%d" % i, partition=0)
    for i in range(10):
        producer.produce(topic, value=b"small-%d" % i, partition=1)
    assert producer.flush(30) == 0

    def tasks(**options: str) -> list[tuple[int, int, int, int]]:
        df = (spark.read.format("trio_broker").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).options(**options).load())
        rows = (df.groupBy(F.spark_partition_id().alias("task"), "partition")
                .agg(F.min("offset").alias("lo"), F.max("offset").alias("hi"),
                     F.count(F.lit(1)).alias("n")).collect())
        return sorted((r.partition, r.lo, r.hi, r.n) for r in rows)

    assert tasks() == [(0, 0, 999, 1000), (1, 0, 9, 10)]
    # the large partition becomes about minPartitions - 1 tasks, the small one stays whole
    assert tasks(minPartitions="4") == [(0, 0, 332, 333), (0, 333, 665, 333),
                                        (0, 666, 999, 334), (1, 0, 9, 10)]
    assert tasks(maxRecordsPerPartition="300") == [
        (0, 0, 249, 250), (0, 250, 499, 250), (0, 500, 749, 250), (0, 750, 999, 250),
        (1, 0, 9, 10)]
    timed = (spark.read.format("trio_broker").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("endingOffsetsByTimestamp", json.dumps(
                 {topic: {"0": -1, "1": -1}})).option("minPartitions", "3").load())
    assert timed.count() == 1010
