"""Streaming reads: rate-limited micro-batches that resume from the checkpoint exactly."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from pyspark.errors import StreamingQueryException

from tests.spark.producing import Produced, produce_confluent
from trio_broker.spark import user_message

pytestmark = pytest.mark.spark


def _start(spark: Any, bootstrap: str, topic: str, out: Path, checkpoint: Path,
           **options: str) -> Any:
    """The query, reading what is there when it starts, 1000 offsets per micro-batch."""
    return (spark.readStream.format("trio_broker")
            .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "1000")
            .options(**options).load()
            .writeStream.format("parquet").option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True).start())


def _run_available_now(spark: Any, bootstrap: str, topic: str, out: Path,
                       checkpoint: Path) -> list[int]:
    """One run of the query until caught up; returns the rows of each micro-batch."""
    query = _start(spark, bootstrap, topic, out, checkpoint)
    assert query.awaitTermination(180), "streaming query did not finish"
    assert query.exception() is None
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def test_restart_from_checkpoint_has_no_duplicates_and_no_gaps(
        spark: Any, kafka_broker: Any, unique_topic: Any, tmp_path: Path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("stream"), 2)
    produced = Produced()
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    produce_confluent(bootstrap, topic, 2500, partitions=2, compression="zstd", seed=1,
                      produced=produced)
    first = _run_available_now(spark, bootstrap, topic, out, checkpoint)
    assert sum(first) == 2500
    assert len(first) >= 3
    assert max(first) <= 1000 + 2

    produce_confluent(bootstrap, topic, 1500, partitions=2, compression="gzip", seed=2,
                      produced=produced)
    second = _run_available_now(spark, bootstrap, topic, out, checkpoint)
    assert sum(second) == 1500

    rows = spark.read.parquet(str(out)).select("partition", "offset", "value").collect()
    got = sorted((r.partition, r.offset, r.value) for r in rows)
    assert got == sorted((p, o, s.value) for (p, o), s in produced.records.items())


def test_retention_gap_on_restart_is_data_loss(spark: Any, kafka_broker: Any, unique_topic: Any,
                                               tmp_path: Path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("gap"), 1, {
        "segment.bytes": "4096", "retention.bytes": "8192", "retention.ms": "-1"})
    def produce(first: int, count: int) -> None:
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
        for i in range(first, first + count):
            producer.produce(topic, value=b"%04d" % i + b"." * 96)
            if i % 40 == 39:  # batches of ~4.4 KB: one segment each
                assert producer.flush(30) == 0

    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    produce(0, 40)
    assert sum(_run_available_now(spark, bootstrap, topic, out, checkpoint)) == 40
    produce(40, 360)
    assert kafka_broker.call(kafka_broker.broker.state.logs.run_retention,
                             int(time.time() * 1000)) > 0

    query = _start(spark, bootstrap, topic, out, checkpoint)
    with pytest.raises(StreamingQueryException) as failure:
        query.awaitTermination(180)
    message = user_message(failure.value)
    assert message is not None
    assert message.startswith("offsets 40..")
    assert "retention deleted them" in message

    query = _start(spark, bootstrap, topic, out, checkpoint, failOnDataLoss="false")
    assert query.awaitTermination(180)
    assert query.exception() is None
    offsets = sorted(r.offset for r in spark.read.parquet(str(out)).select("offset").collect())
    assert offsets[:40] == list(range(40))
    assert offsets[40] > 40
    assert offsets[40:] == list(range(offsets[40], 400))
