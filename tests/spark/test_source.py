"""``spark.read.format("trio_broker")``: Spark's Kafka-source schema and exact offset ranges."""

from __future__ import annotations

import json
from typing import Any

import confluent_kafka
import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from tests.spark.producing import Produced, produce_confluent
from tests.stamps import BASE_MS
from trio_broker.spark import user_message

pytestmark = pytest.mark.spark

# Spark's Kafka source (KafkaRecordToRowConverter.kafkaSchema), written out.
KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
])
KAFKA_SCHEMA_WITH_HEADERS = StructType([*KAFKA_SCHEMA.fields, StructField(
    "headers", ArrayType(StructType([StructField("key", StringType()),
                                     StructField("value", BinaryType())])))])


def _reader(spark: Any, bootstrap: str, **options: str) -> Any:
    return (spark.read.format("trio_broker").option("kafka.bootstrap.servers", bootstrap)
            .options(**options))


def test_schema_is_the_kafka_source_schema(spark: Any, kafka_broker: Any,
                                           unique_topic: Any) -> None:
    topic = kafka_broker.create_topic(unique_topic("schema"), 1)
    plain = _reader(spark, kafka_broker.bootstrap_servers, subscribe=topic).load()
    assert plain.schema == KAFKA_SCHEMA
    with_headers = _reader(spark, kafka_broker.bootstrap_servers, subscribe=topic,
                           includeHeaders="true").load()
    assert with_headers.schema == KAFKA_SCHEMA_WITH_HEADERS
    assert with_headers.count() == 0


def test_json_offsets_select_exactly_that_range(spark: Any, kafka_broker: Any,
                                                unique_topic: Any) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("range"), 2)
    produced = Produced()
    produce_confluent(bootstrap, topic, 400, partitions=2, compression="lz4", seed=3,
                      produced=produced)
    df = _reader(spark, bootstrap, subscribe=topic,
                 startingOffsets=json.dumps({topic: {"0": 10, "1": -2}}),
                 endingOffsets=json.dumps({topic: {"0": 20, "1": -1}})).load()
    rows = df.select("partition", "offset", "key", "value").collect()
    got = sorted((r.partition, r.offset, r.key, r.value) for r in rows)
    expected = sorted((p, o, s.key, s.value) for (p, o), s in produced.records.items()
                      if (p == 0 and 10 <= o < 20) or p == 1)
    assert got == expected
    assert len(got) == 10 + 200


def test_assign_min_partitions_and_starting_timestamp(spark: Any, kafka_broker: Any,
                                                      unique_topic: Any) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("assign"), 3)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    base_ms = BASE_MS
    for i in range(30):
        producer.produce(topic, value=b"%d" % i, partition=i % 3, timestamp=base_ms + i * 1000)
    assert producer.flush(30) == 0

    df = _reader(spark, bootstrap, assign=json.dumps({topic: [0, 2]}), minPartitions="5").load()
    assert df.rdd.getNumPartitions() >= 5
    assert sorted(r.value for r in df.collect()) == sorted(
        b"%d" % i for i in range(30) if i % 3 != 1)

    later = _reader(spark, bootstrap, subscribe=topic,
                    startingTimestamp=str(base_ms + 15_000)).load()
    assert sorted(int(r.value) for r in later.collect()) == list(range(15, 30))
    stamps = later.where("value = '20'").select("timestamp", "timestampType").first()
    assert stamps.timestamp.timestamp() * 1000 == base_ms + 20_000
    assert stamps.timestampType == 0


def test_subscribe_pattern(spark: Any, kafka_broker: Any, unique_topic: Any) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    prefix = unique_topic("pattern").replace("-", "_")
    a = kafka_broker.create_topic(prefix + ".a", 1)
    b = kafka_broker.create_topic(prefix + ".b", 2)
    kafka_broker.create_topic(prefix + "x", 1)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for topic in (a, b, prefix + "x"):
        producer.produce(topic, value=topic.encode(), partition=0)
    assert producer.flush(30) == 0
    df = _reader(spark, bootstrap, subscribePattern=prefix.replace(".", r"\.") + r"\..*").load()
    assert sorted(r.topic for r in df.select("topic").collect()) == [a, b]


def test_option_mistakes_fail_at_load(spark: Any) -> None:
    with pytest.raises(Exception) as caught:  # noqa: PT011 - Spark wraps it in its own type
        spark.read.format("trio_broker").option("kafka.bootstrap.servers", "127.0.0.1:9").load()
    assert user_message(caught.value) == (
        "One of the following options must be specified for Kafka source: subscribe, "
        "subscribePattern, assign")
