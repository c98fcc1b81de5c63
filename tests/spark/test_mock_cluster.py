"""The source against a Kafka-protocol broker that is not ours: librdkafka's mock cluster.

The mock cluster is a real broker implementation with real sockets (three brokers, leaders
spread over them) and real retention (it keeps about the newest 5 MB of each partition), so it
also shows the leader-aware reads and the retention check working on someone else's broker.
Its quirks: it creates topics on first use with 4 partitions, has no CreateTopics, and its
delivery reports carry a placeholder timestamp.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest

from tests.spark.producing import Produced, produce_confluent
from trio_broker.spark import user_message

pytestmark = pytest.mark.spark


@pytest.fixture
def mock_cluster() -> Iterator[str]:
    owner = confluent_kafka.Producer({"test.mock.num.brokers": 3, "bootstrap.servers": "",
                                      "log_level": 0})
    brokers = owner.list_topics(timeout=10).brokers.values()
    yield ",".join(f"{b.host}:{b.port}" for b in brokers)
    del owner  # the cluster lives as long as the client that created it


def test_reads_every_codec_from_the_mock_cluster(spark: Any, mock_cluster: str) -> None:
    produced = Produced()
    before_ms = time.time() * 1000
    for seed, codec in enumerate(("none", "gzip", "snappy", "lz4", "zstd"), start=1):
        produce_confluent(mock_cluster, "events", 2_000, partitions=3, compression=codec,
                          seed=seed, produced=produced)
    df = (spark.read.format("trio_broker").option("kafka.bootstrap.servers", mock_cluster)
          .option("subscribe", "events").option("includeHeaders", "true").load())
    rows = sorted(df.collect(), key=lambda r: (r.partition, r.offset))
    got = [(r.partition, r.offset, r.key, r.value, [(h.key, h.value) for h in r.headers])
           for r in rows]
    assert got == [(r["partition"], r["offset"], r["key"], r["value"], r["headers"])
                   for r in produced.rows("events")]
    # The mock's delivery reports carry a placeholder timestamp; the records carry the real one.
    assert all(before_ms - 1 <= r.timestamp.timestamp() * 1000 <= time.time() * 1000
               for r in rows)


def test_retention_on_the_mock_cluster(spark: Any, mock_cluster: str) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": mock_cluster, "linger.ms": 5})
    for _ in range(70_000):  # ~7 MB into one partition: the oldest batches are dropped
        while True:
            try:
                producer.produce("old", value=b"x" * 100, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    del producer  # before the cluster goes: a live client would log its reconnects
    options = {"kafka.bootstrap.servers": mock_cluster, "subscribe": "old",
               "startingOffsets": json.dumps({"old": {str(p): -2 for p in range(4)} | {"0": 0}})}
    with pytest.raises(Exception) as caught:  # noqa: PT011 - Spark wraps it in its own type
        spark.read.format("trio_broker").options(**options).load().count()
    message = user_message(caught.value)
    assert message is not None
    assert message.startswith("offsets 0..")
    assert "of old-0 are no longer available: retention deleted them" in message
    earliest = spark.read.format("trio_broker").options(**options).option(
        "startingOffsets", "earliest").load()
    assert 0 < earliest.count() < 70_000
