"""``trio-broker export``: files that hold exactly the produced records, replaced on re-runs."""

from __future__ import annotations

import base64
import csv
import json
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import confluent_kafka
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from tests.spark.producing import Produced, produce_confluent, produce_kafka_python
from trio_broker.cli import main as cli_main

pytestmark = pytest.mark.spark


def _read_back(out: Path) -> list[dict]:
    table = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    micros = table.column("timestamp").cast(pa.int64()).to_pylist()
    rows = []
    for row, us in zip(table.to_pylist(), micros, strict=True):
        rows.append({"topic": row["topic"], "partition": int(row["partition"]),
                     "offset": row["offset"], "key": row["key"], "value": row["value"],
                     "headers": [(h["key"], h["value"]) for h in row["headers"]],
                     "timestamp_ms": us // 1000})
    return sorted(rows, key=lambda r: (r["partition"], r["offset"]))


def _manifests(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / "_exports").glob("*.json"))]


def _data_files(out: Path) -> set[str]:
    return {str(p.relative_to(out)) for p in out.rglob("*.parquet")
            if not any(part.startswith(("_", ".")) for part in p.relative_to(out).parts)}


def test_export_is_exactly_the_produced_records_and_reruns_replace(
        spark: Any, kafka_broker: Any, unique_topic: Any, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("export"), 3)
    produced = Produced()
    for seed, codec in enumerate(("gzip", "snappy", "lz4", "zstd"), start=1):
        produce_confluent(bootstrap, topic, 23_000, partitions=3, compression=codec, seed=seed,
                          produced=produced)
    produce_kafka_python(bootstrap, topic, 8_000, partitions=3, seed=9, produced=produced)
    assert len(produced.records) == 100_000
    out = tmp_path / "out"
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--out", str(out),
            "--partition-by", "topic,partition", "--master", "local[2]"]

    assert cli_main(["export", *args]) == 0
    assert capsys.readouterr().out == ""  # quiet when stdout is not a terminal
    assert _read_back(out) == produced.rows(topic)
    (manifest,) = _manifests(out)
    assert manifest["records"] == 100_000
    assert manifest["ending_offsets"] == {
        topic: {str(p): sum(1 for q, _ in produced.records if q == p) for p in range(3)}}
    first_files = _data_files(out)
    assert first_files == set(manifest["files"])

    # Same ranges again: the files are replaced, not added; on a terminal, a summary.
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert cli_main(["export", *args]) == 0
    summary = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", capsys.readouterr().out)
    assert "100,000 records" in summary, summary
    assert f"Exported to {out}" in summary, summary
    (again,) = _manifests(out)
    assert again["export_id"] == manifest["export_id"]
    assert _data_files(out) == set(again["files"])
    assert not first_files & set(again["files"])
    assert len(_read_back(out)) == 100_000

    # A range that only partly overlaps the export would duplicate records: refused.
    partial = json.dumps({topic: {"0": 5, "1": 0, "2": 0}})
    assert cli_main(["export", *args, "--starting-offsets", partial]) == 1
    assert "already exported" in capsys.readouterr().err


def test_follow_exports_new_records_until_interrupted(
        spark: Any, kafka_broker: Any, unique_topic: Any, tmp_path: Path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("follow"), 2)
    produced = Produced()
    produce_confluent(bootstrap, topic, 500, partitions=2, compression="none", seed=1,
                      produced=produced)
    out = tmp_path / "out"
    commits = out / "_spark_metadata"

    def committed_rows() -> int:
        try:
            return len(spark.read.parquet(str(out)).collect())
        except Exception:  # no committed batch yet
            return 0

    def drive() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and committed_rows() < 500:
            time.sleep(0.2)  # files appearing on disk: no event to wait on
        produce_confluent(bootstrap, topic, 300, partitions=2, compression="lz4", seed=2,
                          produced=produced)
        while time.monotonic() < deadline and committed_rows() < 800:
            time.sleep(0.2)
        with lock:
            if following.is_set():  # never signal the test run itself
                os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C sends

    lock = threading.Lock()
    following = threading.Event()
    driver = threading.Thread(target=drive, daemon=True)
    following.set()
    driver.start()
    try:
        code = cli_main(["export", "--bootstrap-server", bootstrap, "--topic", topic, "--out",
                            str(out), "--follow", "--trigger-interval", "200 milliseconds"])
    finally:
        with lock:
            following.clear()
    driver.join(30)
    assert code == 0
    assert commits.is_dir()
    assert (tmp_path / "out" / "_checkpoint" / "offsets").is_dir()
    rows = spark.read.parquet(str(out)).select("partition", "offset", "value").collect()
    assert sorted((r.partition, r.offset, r.value) for r in rows) == sorted(
        (p, o, s.value) for (p, o), s in produced.records.items())


def test_csv_and_json_hold_text_and_base64(spark: Any, kafka_broker: Any, unique_topic: Any,
                                           tmp_path: Path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("formats"), 1)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, key=b"k1", value="héllo".encode(), headers=[("h", b"x")])
    producer.produce(topic, key=None, value=b"\x00\x01", headers=None)
    assert producer.flush(30) == 0

    csv_out = tmp_path / "csv"
    assert cli_main(["export", "--bootstrap-server", bootstrap, "--topic", topic, "--format", "csv",
                        "--out", str(csv_out)]) == 0
    rows = []
    for path in sorted(csv_out.glob("export-*.csv")):
        rows += list(csv.DictReader(path.read_text(encoding="utf-8").splitlines()))
    by_offset = {int(row["offset"]): row for row in rows}
    assert (by_offset[0]["key"], by_offset[0]["value"], by_offset[0]["topic"]) == (
        "k1", "héllo", topic)
    assert json.loads(by_offset[0]["headers"]) == [
        {"key": "h", "value": base64.b64encode(b"x").decode()}]
    assert by_offset[1]["key"] == ""  # null key

    json_out = tmp_path / "json"
    assert cli_main(["export", "--bootstrap-server", bootstrap, "--topic", topic,
                     "--format", "json", "--out", str(json_out)]) == 0
    records = [json.loads(line) for path in sorted(json_out.glob("export-*.json"))
               for line in path.read_text().splitlines()]
    values = {r["offset"]: base64.b64decode(r["value"]) for r in records}
    assert values == {0: "héllo".encode(), 1: b"\x00\x01"}


def test_the_suggested_continuation_names_empty_partitions_and_is_accepted(
        spark: Any, kafka_broker: Any, unique_topic: Any, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("continue"), 3)  # partition 2 stays empty

    def produce(count: int) -> None:
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
        for i in range(count):
            producer.produce(topic, value=b"%d" % i, partition=i % 2)
        assert producer.flush(30) == 0

    produce(20)
    out = tmp_path / "out"
    args = ["export", "--bootstrap-server", bootstrap, "--topic", topic, "--out", str(out)]
    assert cli_main(args) == 0
    capsys.readouterr()
    produce(10)
    overlapping = json.dumps({topic: {"0": 5, "1": 5, "2": 0}})
    assert cli_main([*args, "--starting-offsets", overlapping]) == 1
    err = " ".join(capsys.readouterr().err.split())
    suggested = re.search(r"--starting-offsets '([^']+)'", err)
    assert suggested is not None, err
    assert json.loads(suggested.group(1)) == {topic: {"0": 10, "1": 10, "2": 0}}
    assert cli_main([*args, "--starting-offsets", suggested.group(1)]) == 0
    manifests = _manifests(out)
    assert sorted(m["records"] for m in manifests) == [10, 20]
    later = next(m for m in manifests if m["records"] == 10)
    assert later["starting_offsets"] == {topic: {"0": 10, "1": 10, "2": 0}}
    assert later["ending_offsets"] == {topic: {"0": 15, "1": 15, "2": 0}}
    assert len(_read_back(out)) == 30
