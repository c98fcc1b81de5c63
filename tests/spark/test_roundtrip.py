"""Round trips: rows with keys, headers and explicit partitions written by the sink and read
back by the source; and the same rows through ``trio-broker import`` then ``export``. Every row
comes back identical, and each partition holds its rows in the order they were written.

The suite runs ``TRIO_BROKER_ROUNDTRIP_ROWS`` rows (default 100,000); ``make roundtrip`` runs
1,000,000. The comparisons run in Spark (``exceptAll`` both ways, a window over offsets), so
no row is collected into the test process.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from trio_broker.cli import main as cli_main

pytestmark = pytest.mark.spark

ROWS = int(os.environ.get("TRIO_BROKER_ROUNDTRIP_ROWS", "100000"))
PARTITIONS = 4
#: recent timestamps: the broker rolls a segment per append for records older than segment.ms
BASE_MS = int(time.time() * 1000) // 1000 * 1000
COLUMNS = ["key", "value", "headers", "partition", "timestamp"]


def _generated(spark: Any) -> Any:
    """Rows whose timestamp gives back their id (the written order within a partition)."""
    return spark.range(ROWS).selectExpr(
        "id",
        "CASE WHEN id % 13 = 0 THEN NULL ELSE cast(concat('key-', id % 5000) AS binary) END "
        "AS key",
        "CASE WHEN id % 101 = 0 THEN NULL WHEN id % 7 = 0 THEN cast('' AS binary) "
        "ELSE cast(repeat(sha2(cast(id AS string), 256), 1 + int(id % 3)) AS binary) END "
        "AS value",
        "CASE WHEN id % 3 = 0 THEN array() ELSE array(named_struct('key', 'trace', 'value', "
        "cast(cast(id AS string) AS binary)), named_struct('key', 'empty', 'value', "
        "cast(NULL AS binary))) END AS headers",
        f"cast(id % {PARTITIONS} AS int) AS partition",
        f"timestamp_millis({BASE_MS} + id) AS timestamp")


def _assert_same_rows_in_order(written: Any, read: Any) -> None:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    expected = written.select(*COLUMNS)
    actual = read.select(*COLUMNS)
    assert actual.count() == ROWS
    assert expected.exceptAll(actual).count() == 0
    assert actual.exceptAll(expected).count() == 0
    ordered = read.withColumn("id", F.col("timestamp").cast("double") * 1000 - BASE_MS).withColumn(
        "before", F.lag("id").over(Window.partitionBy("partition").orderBy("offset")))
    assert ordered.where("before >= id").count() == 0  # each partition in written order
    gaps = read.groupBy("partition").agg(F.count(F.lit(1)).alias("n"),
                                         F.max("offset").alias("last"))
    assert gaps.where("n != last + 1").count() == 0


def test_sink_then_source(spark: Any, kafka_broker: Any, unique_topic: Any) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("roundtrip"), PARTITIONS)
    rows = _generated(spark).repartition(PARTITIONS, "partition").sortWithinPartitions("id")
    (rows.drop("id").write.format("trio_broker").mode("append")
     .option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save())
    read = (spark.read.format("trio_broker").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("includeHeaders", "true").load())
    _assert_same_rows_in_order(rows, read)


def test_import_then_export(spark: Any, kafka_broker: Any, unique_topic: Any,
                            tmp_path: Path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("imported"), PARTITIONS)
    source = tmp_path / "input"
    _generated(spark).write.parquet(str(source))
    assert cli_main(["import", "--bootstrap-server", bootstrap, "--topic", topic,
                     "--in", str(source), "--order-by", "id"]) == 0
    out = tmp_path / "export"
    assert cli_main(["export", "--bootstrap-server", bootstrap, "--topic", topic,
                     "--out", str(out)]) == 0
    _assert_same_rows_in_order(spark.read.parquet(str(source)), spark.read.parquet(str(out)))
