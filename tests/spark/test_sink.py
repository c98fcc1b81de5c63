"""``df.write.format("trio_broker")``: Spark's Kafka sink columns and options, mistakes refused
before any job starts, producer options that reach the log, streaming writes that resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.stamps import BASE_MS
from trio_broker.client.blocking import BlockingClient, TopicPartition, partition_for_key
from trio_broker.protocol.records import decode_batches
from trio_broker.spark import user_message

pytestmark = pytest.mark.spark

#: the records carry 2023 timestamps: time-based retention must not delete them mid-test
KEEP = {"retention.ms": "-1"}


def _writer(df: Any, bootstrap: str, **options: str) -> Any:
    return (df.write.format("trio_broker").mode("append")
            .option("kafka.bootstrap.servers", bootstrap).options(**options))


def _read(spark: Any, bootstrap: str, topic: str) -> list[Any]:
    df = (spark.read.format("trio_broker").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("includeHeaders", "true").load())
    return sorted(df.collect(), key=lambda r: (r.partition, r.offset))


def _stored_batches(bootstrap: str, topic: str, partition: int) -> list:
    with BlockingClient(bootstrap) as client:
        fetched = client.fetch(TopicPartition(topic, partition), 0, max_bytes=1 << 22)
    return [header for header, _ in decode_batches(fetched.records)]


def test_every_column_arrives_as_written_in_order(spark: Any, kafka_broker: Any,
                                                  unique_topic: Any) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("sink"), 3, KEEP)
    df = spark.range(3000, numPartitions=4).selectExpr(
        "CASE WHEN id % 10 = 3 THEN NULL ELSE concat('k', id) END AS key",
        "CASE WHEN id % 17 = 5 THEN NULL ELSE cast(concat('v', id) AS binary) END AS value",
        "CASE WHEN id % 4 = 0 THEN NULL ELSE array(named_struct('key', 'n', 'value', "
        "cast(cast(id AS string) AS binary)), named_struct('key', 'e', 'value', "
        "cast(NULL AS binary))) END AS headers",
        "cast(id % 3 AS int) AS partition",
        f"timestamp_millis({BASE_MS} + id * 7) AS timestamp",
        "id AS ignored")
    _writer(df, bootstrap, topic=topic).save()
    rows = _read(spark, bootstrap, topic)
    got = [(r.partition, r.key, r.value, [(h.key, h.value) for h in r.headers],
            int(r.timestamp.timestamp() * 1000)) for r in rows]
    expected = []
    for p in range(3):
        for i in range(p, 3000, 3):
            headers = [] if i % 4 == 0 else [("n", str(i).encode()), ("e", None)]
            expected.append((p, None if i % 10 == 3 else f"k{i}".encode(),
                             None if i % 17 == 5 else f"v{i}".encode(), headers,
                             BASE_MS + i * 7))
    # four tasks write into each partition at once: compare as sets, then check that each
    # task's rows (ids 0-749, 750-1499, ...) kept their order within every partition
    assert sorted(got, key=repr) == sorted(expected, key=repr)
    assert [r.offset for r in rows if r.partition == 0] == list(range(1000))
    for p in range(3):
        ids = [(r.timestamp.timestamp() * 1000 - BASE_MS) // 7 for r in rows
               if r.partition == p]
        for task in range(4):
            mine = [i for i in ids if i // 750 == task]
            assert mine == sorted(mine)
            assert len(mine) == 250


def test_keys_without_partition_go_where_javas_partitioner_puts_them(
        spark: Any, kafka_broker: Any, unique_topic: Any) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("keyed"), 5)
    df = spark.range(500).selectExpr("concat('key-', id) AS key", "'x' AS value")
    _writer(df, bootstrap, topic=topic).save()
    rows = _read(spark, bootstrap, topic)
    assert len(rows) == 500
    assert all(r.partition == partition_for_key(r.key, 5) for r in rows)


def test_topic_column_and_the_topic_option_that_wins_over_it(
        spark: Any, kafka_broker: Any, unique_topic: Any) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    a = kafka_broker.create_topic(unique_topic("a"), 1)
    b = kafka_broker.create_topic(unique_topic("b"), 2)
    df = spark.createDataFrame([(a, "1"), (b, "2"), (a, "3")], "topic string, value string")
    _writer(df, bootstrap).save()
    assert sorted(r.value for r in _read(spark, bootstrap, a)) == [b"1", b"3"]
    assert [r.value for r in _read(spark, bootstrap, b)] == [b"2"]
    _writer(df, bootstrap, topic=b).save()
    assert sorted(r.value for r in _read(spark, bootstrap, b)) == [b"1", b"2", b"2", b"3"]
    with_null = spark.createDataFrame([(None, "x")], "topic string, value string")
    with pytest.raises(Exception) as caught:  # noqa: PT011 - Spark wraps it in its own type
        _writer(with_null, bootstrap).save()
    assert user_message(caught.value) == ("null topic present in the data. Use the topic "
                                          "option for setting a default topic.")


@pytest.mark.parametrize(("select", "options", "message"), [
    ("'k' AS key", {"topic": "t"}, "Required attribute 'value' not found"),
    ("id AS value", {"topic": "t"},
     "value attribute unsupported type bigint. value must be a(n) string or binary"),
    ("'v' AS value", {}, "topic option required when no 'topic' attribute is present. Use the "
                         "topic option for setting a topic."),
    ("'v' AS value, 1 AS topic", {}, "topic attribute unsupported type int. topic must be a(n) "
                                     "string"),
    ("'v' AS value, 1L AS partition", {"topic": "t"},
     "partition attribute unsupported type bigint. partition must be a(n) int"),
    ("'v' AS value, 'x' AS headers", {"topic": "t"},
     "headers attribute unsupported type string. headers must be a(n) "
     "array<struct<key:string,value:binary>>"),
    ("'v' AS value, 'x' AS timestamp", {"topic": "t"},
     "timestamp attribute unsupported type string. timestamp must be a(n) double or timestamp"),
    ("'v' AS value", {"topic": "t", "kafka.key.serializer": "x"},
     "Kafka option 'key.serializer' is not supported as keys are serialized with "
     "ByteArraySerializer."),
    ("'v' AS value", {"topic": "t", "kafka.acks": "2"},
     "Invalid value 2 for configuration acks: String must be one of: all, -1, 0, 1 (set as "
     "option 'kafka.<key>')"),
])
def test_mistakes_are_refused_before_any_job(spark: Any, kafka_broker: Any, select: str,
                                             options: dict, message: str) -> None:
    group = f"sink-check-{abs(hash(message))}"
    spark.sparkContext.setJobGroup(group, "a write that must not start")
    try:
        with pytest.raises(Exception) as caught:  # noqa: PT011 - Spark wraps it
            _writer(spark.range(1).selectExpr(*select.split(", ")),
                    kafka_broker.bootstrap_servers, **options).save()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert user_message(caught.value) == message
    assert spark.sparkContext.statusTracker().getJobIdsForGroup(group) == []


def test_batch_size_is_the_sinks_256_kib_unless_given() -> None:
    from trio_broker.spark.sink import parse_sink_options

    default = parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t"})
    assert default.producer_settings().batch_size == 262144
    given = parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t",
                                "kafka.batch.size": "16384", "kafka.linger.ms": "0"})
    assert (given.producer_settings().batch_size, given.producer_settings().linger_ms) == (
        16384, 0)


def test_save_modes(spark: Any, kafka_broker: Any, unique_topic: Any) -> None:
    topic = kafka_broker.create_topic(unique_topic("modes"), 1)
    df = spark.range(2).selectExpr("'v' AS value")
    writer = (df.write.format("trio_broker")
              .option("kafka.bootstrap.servers", kafka_broker.bootstrap_servers)
              .option("topic", topic))
    with pytest.raises(Exception, match=r'cannot be written in the "ErrorIfExists" mode\. '
                                        r'Please use either the "Append"'):
        writer.save()  # Spark's own refusal, before the sink runs
    with pytest.raises(Exception) as caught:  # noqa: PT011 - Spark wraps it
        writer.mode("overwrite").save()
    assert 'Write with .mode("append")' in (user_message(caught.value) or "")
    writer.mode("append").save()
    assert len(_read(spark, kafka_broker.bootstrap_servers, topic)) == 2


def test_producer_options_reach_the_log(spark: Any, kafka_broker: Any,
                                        unique_topic: Any) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    df = spark.range(2000, numPartitions=1).selectExpr("cast(id AS string) AS value")
    zstd = kafka_broker.create_topic(unique_topic("zstd"), 1)
    _writer(df, bootstrap, topic=zstd, **{"kafka.compression.type": "zstd",
                                          "kafka.batch.size": "4096"}).save()
    headers = _stored_batches(bootstrap, zstd, 0)
    assert {h.compression for h in headers} == {4}
    assert len(headers) > 2  # batch.size bounds each batch
    assert all(h.producer_id >= 0 for h in headers)  # idempotent by default
    plain = kafka_broker.create_topic(unique_topic("plain"), 1)
    _writer(df, bootstrap, topic=plain, **{"kafka.acks": "1", "kafka.linger.ms": "0",
                                           "kafka.batch.size": "1000000"}).save()
    headers = _stored_batches(bootstrap, plain, 0)
    assert [h.producer_id for h in headers] == [-1]  # acks=1: idempotence goes off
    assert headers[0].records_count == 2000


def test_streaming_write_resumes_from_its_checkpoint(spark: Any, kafka_broker: Any,
                                                     unique_topic: Any, tmp_path: Path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source = kafka_broker.create_topic(unique_topic("in"), 2)
    target = kafka_broker.create_topic(unique_topic("out"), 2)
    checkpoint = tmp_path / "checkpoint"

    def produce(first: int, count: int) -> None:
        rows = spark.range(first, first + count).selectExpr(
            "concat('k', id) AS key", "cast(id AS string) AS value",
            "cast(id % 2 AS int) AS partition")
        _writer(rows, bootstrap, topic=source).save()

    def run() -> None:
        query = (spark.readStream.format("trio_broker")
                 .option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
                 .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "300")
                 .load().selectExpr("key", "value", "partition")
                 .writeStream.format("trio_broker").option("kafka.bootstrap.servers", bootstrap)
                 .option("topic", target).option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        assert query.awaitTermination(180)
        assert query.exception() is None

    produce(0, 1000)
    run()
    produce(1000, 500)
    run()
    rows = _read(spark, bootstrap, target)
    assert sorted(int(r.value) for r in rows) == list(range(1500))
    read = _read(spark, bootstrap, source)
    for p in range(2):  # each partition keeps the source partition's order
        assert [r.value for r in rows if r.partition == p] == [
            r.value for r in read if r.partition == p]
    commits = sorted((f for f in (checkpoint / "commits").iterdir() if f.name.isdigit()),
                     key=lambda f: int(f.name))
    assert len(commits) >= 5  # 1,500 offsets at most 300 per micro-batch
    last = (checkpoint / "offsets" / commits[-1].name).read_text().splitlines()[-1]
    assert json.loads(last) == {source: {"0": 750, "1": 750}}
