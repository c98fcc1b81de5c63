"""The batch Parquet export's two writers: pyarrow in the tasks (the default) and Spark's.

Spark must read what pyarrow wrote as it reads what its own writer wrote: the same rows, the
same schema, each file in offset order; and a failed job must leave nothing of itself behind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.spark.producing import Produced, produce_confluent, produce_kafka_python
from trio_broker.cli import main as cli_main
from trio_broker.spark import _arrow_export as arrow_export
from trio_broker.spark import source as source_module
from trio_broker.spark._arrow_export import COMPRESSION
from trio_broker.spark._options import OffsetRange

pytestmark = pytest.mark.spark


def _export(bootstrap: str, topic: str, out: Path, *extra: str) -> int:
    return cli_main(["export", "--bootstrap-server", bootstrap, "--topic", topic, "--out",
                     str(out), "--master", "local[2]", *extra])


def _spark_rows(spark: Any, out: Path) -> tuple[Any, list[tuple], dict[str, list[tuple]]]:
    """The schema, every row (sorted) and each file's (partition, offset) in read order."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(str(out))
    rows = df.withColumn("_file", F.input_file_name()).collect()
    by_file: dict[str, list[tuple]] = {}
    plain = []
    for row in rows:
        values = row.asDict(recursive=True)
        file = values.pop("_file")
        by_file.setdefault(file, []).append((values["partition"], values["offset"]))
        values["headers"] = [(h["key"], h["value"]) for h in values["headers"]]
        plain.append(tuple(sorted(values.items())))
    return df.schema, sorted(plain, key=lambda r: (dict(r)["partition"], dict(r)["offset"])), \
        by_file


@pytest.mark.parametrize("partition_by", ["", "partition,topic"])
def test_arrow_and_spark_writers_give_spark_the_same_rows(
        spark: Any, kafka_broker: Any, unique_topic: Any, tmp_path: Path,
        partition_by: str) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("writers"), 3)
    produced = Produced()
    produce_confluent(bootstrap, topic, 6_000, partitions=3, compression="zstd", seed=3,
                      produced=produced)
    produce_kafka_python(bootstrap, topic, 3_000, partitions=3, seed=4, produced=produced)
    extra = ["--partition-by", partition_by] if partition_by else []
    assert _export(bootstrap, topic, tmp_path / "spark", "--writer", "spark", *extra) == 0
    assert _export(bootstrap, topic, tmp_path / "arrow", *extra) == 0

    spark_schema, spark_rows, _ = _spark_rows(spark, tmp_path / "spark")
    arrow_schema, arrow_rows, files = _spark_rows(spark, tmp_path / "arrow")
    assert arrow_schema == spark_schema
    assert arrow_rows == spark_rows
    assert len(arrow_rows) == len(produced.records) == 9_000
    assert {(p, o) for p, o in produced.records} == {
        (dict(r)["partition"], dict(r)["offset"]) for r in arrow_rows}
    for file, keys in files.items():  # one partition per file, its offsets in order, no gaps
        assert len({p for p, _ in keys}) == 1, file
        offsets = [o for _, o in keys]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), file

    manifests = [json.loads(p.read_text()) for p in (tmp_path / "arrow" / "_exports").glob("*")]
    (manifest,) = manifests
    (reference,) = [json.loads(p.read_text())
                    for p in (tmp_path / "spark" / "_exports").glob("*")]
    assert (manifest["records"], manifest["payload_bytes"]) == (
        reference["records"], reference["payload_bytes"])
    assert len(manifest["files"]) == len(files)
    for name in manifest["files"]:
        assert (tmp_path / "arrow" / name).is_file()
        directories = [d.split("=") for d in name.split("/")[:-1]]
        assert [column for column, _ in directories] == partition_by.split(",") * bool(
            partition_by)
        assert all(value == {"topic": topic}.get(column, value) for column, value in directories)
        assert all(value in "012" for column, value in directories if column == "partition")
        meta = pq.read_metadata(tmp_path / "arrow" / name)
        assert meta.row_group(0).column(0).compression == COMPRESSION.upper()
    if not partition_by:
        column = pq.read_schema(tmp_path / "arrow" / manifest["files"][0]).field("timestamp")
        assert str(column.type) == "timestamp[us, tz=UTC]"  # INT64 TIMESTAMP_MICROS, UTC


def test_a_failed_arrow_export_leaves_the_earlier_output_as_it_was(
        spark: Any, kafka_broker: Any, unique_topic: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("failing"), 2)
    produce_confluent(bootstrap, topic, 2_000, partitions=2, compression="none", seed=5,
                      produced=Produced())
    out = tmp_path / "out"
    assert _export(bootstrap, topic, out) == 0
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))

    # The one injected fault: planning promises offsets the log does not hold (as when the log
    # is truncated between planning and reading); the tasks then fail for real, mid-way.
    planned = source_module.plan_batch

    def beyond_the_log(opts: Any) -> list[OffsetRange]:
        return [OffsetRange(r.topic, r.partition, r.start, r.end + 500)
                for r in planned(opts)]

    monkeypatch.setattr(source_module, "plan_batch", beyond_the_log)
    monkeypatch.setattr(arrow_export, "ROW_GROUP_ROWS", 100)  # files half written at the fault
    assert _export(bootstrap, topic, out) == 1
    assert "the log was truncated" in " ".join(capsys.readouterr().err.split())
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before


def test_a_range_without_records_gives_one_empty_file_with_the_schema(
        spark: Any, kafka_broker: Any, unique_topic: Any, tmp_path: Path) -> None:
    """Offsets that hold only a transaction's commit marker: the export plans one offset and
    reads no record; both writers leave a file Spark reads as the source's schema, no rows."""
    from confluent_kafka import Producer

    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("marker"), 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=b"v%d" % i, partition=0)
    producer.commit_transaction(30)  # records at offsets 0-2, the commit marker at 3
    del producer  # its connections closed before the broker's
    only_marker = json.dumps({topic: {"0": 3}})
    for writer in ("arrow", "spark"):
        out = tmp_path / writer
        assert _export(bootstrap, topic, out, "--writer", writer,
                       "--starting-offsets", only_marker) == 0
        df = spark.read.parquet(str(out))
        assert df.count() == 0
        assert [f.name for f in df.schema] == [
            "key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
            "headers"]
        (manifest,) = [json.loads(p.read_text()) for p in (out / "_exports").glob("*")]
        assert manifest["records"] == 0


def test_the_arrow_writer_is_for_batch_parquet_only(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    for extra in (["--format", "csv"], ["--follow"]):
        assert _export("127.0.0.1:9", "t", tmp_path, "--writer", "arrow", *extra) == 2
        assert "the arrow writer writes batch Parquet exports only" in capsys.readouterr().err
