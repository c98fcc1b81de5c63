"""``trio-broker import``: files back into topics, an export's output as it is, other data
through column options, with a summary whose read-back offsets work."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.spark.producing import Produced, produce_confluent
from tests.stamps import BASE_MS
from trio_broker.cli import main as cli_main
from trio_broker.client.blocking import partition_for_key

pytestmark = pytest.mark.spark

#: the records carry 2023 timestamps: time-based retention must not delete them mid-test
KEEP = {"retention.ms": "-1"}


def _topic_rows(spark: Any, bootstrap: str, topic: str) -> list[tuple]:
    df = (spark.read.format("trio_broker").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("includeHeaders", "true").load())
    rows = sorted(df.collect(), key=lambda r: (r.partition, r.offset))
    return [(r.partition, r.offset, r.key, r.value, [(h.key, h.value) for h in r.headers],
             r.timestamp) for r in rows]


@pytest.mark.parametrize("fmt", ["parquet", "json", "csv"])
def test_an_exported_topic_imports_back_as_it_was(spark: Any, kafka_broker: Any,
                                                  unique_topic: Any, tmp_path: Path,
                                                  fmt: str) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source = kafka_broker.create_topic(unique_topic("src"), 3, KEEP)
    if fmt != "csv":
        produce_confluent(bootstrap, source, 3000, partitions=3, compression="lz4", seed=4,
                          produced=Produced())
    else:  # CSV holds keys and values as text: keep them UTF-8
        df = spark.range(3000).selectExpr(
            "CASE WHEN id % 9 = 0 THEN NULL ELSE concat('key,\"', id) END AS key",
            "concat('line one\\nline \"two\" ', id) AS value", "cast(id % 3 AS int) AS partition",
            "CASE WHEN id % 2 = 0 THEN array(named_struct('key', 'h', 'value', "
            "cast(concat('x', id) AS binary))) END AS headers",
            f"timestamp_millis({BASE_MS} + id) AS timestamp").coalesce(1)
        (df.write.format("trio_broker").mode("append")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", source).save())
    out = tmp_path / "export"
    assert cli_main(["export", "--bootstrap-server", bootstrap, "--topic", source, "--out",
                     str(out), "--format", fmt]) == 0
    target = kafka_broker.create_topic(unique_topic("dst"), 3, KEEP)
    assert cli_main(["import", "--bootstrap-server", bootstrap, "--topic", target, "--in",
                     str(out), "--format", fmt]) == 0
    original = _topic_rows(spark, bootstrap, source)
    copied = _topic_rows(spark, bootstrap, target)
    assert copied == original  # same partitions, same offsets, same order, every column


def test_columns_by_option_a_summary_and_its_read_back_offsets(
        spark: Any, kafka_broker: Any, unique_topic: Any, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    target = kafka_broker.create_topic(unique_topic("orders"), 4, KEEP)
    data = tmp_path / "orders.parquet"
    pq.write_table(pa.table({
        "order_id": pa.array([f"o-{i}" for i in range(500)]),
        "body": pa.array([{"amount": i, "note": f"n{i}"} for i in range(500)]),
        "created_ms": pa.array([BASE_MS + i for i in range(500)], pa.int64()),
        "partition": pa.array([i % 4 for i in range(500)], pa.int32()),
    }), data)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    args = ["import", "--bootstrap-server", bootstrap, "--topic", target, "--in", str(data),
            "--key-column", "order_id", "--value-column", "body", "--timestamp-column",
            "created_ms", "--partition-column", "", "--producer-property",
            "compression.type=gzip"]
    assert cli_main(args) == 0
    out = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", capsys.readouterr().out)
    assert "500 records" in out, out
    rows = _topic_rows(spark, bootstrap, target)
    assert sorted(r[2] for r in rows) == sorted(f"o-{i}".encode() for i in range(500))
    for partition, _, key, value, _, timestamp in rows:
        i = int(key[2:])
        assert partition == partition_for_key(key, 4)  # --partition-column '': by key
        assert json.loads(value) == {"amount": i, "note": f"n{i}"}
        assert int(timestamp.timestamp() * 1000) == BASE_MS + i

    # the summary's read-back command exports exactly what was imported
    command = " ".join(out.split("Read them back with:", 1)[1].split())
    offsets = re.findall(r"--(starting|ending)-offsets '([^']+)'", command)
    assert len(offsets) == 2, command
    assert cli_main(["export", "--bootstrap-server", bootstrap, "--topic", target,
                     "--out", str(tmp_path / "back"), "--starting-offsets", offsets[0][1],
                     "--ending-offsets", offsets[1][1]]) == 0
    back = spark.read.parquet(str(tmp_path / "back"))
    assert back.count() == 500

    assert cli_main([*args[:-2], "--key-column", "no_such_column"]) == 1
    assert "no column 'no_such_column'" in capsys.readouterr().err
    assert cli_main([*args, "--producer-property", "acks=2"]) == 2
    assert "Invalid value 2 for configuration acks" in capsys.readouterr().err
    assert cli_main([*args, "--producer-property", "lingers.ms=2"]) == 2
    assert "unknown producer property 'lingers.ms'" in capsys.readouterr().err


def test_a_missing_input_is_one_line_naming_it(tmp_path: Path, capsys: Any) -> None:
    missing = tmp_path / "exports" / "nothing"
    assert cli_main(["import", "--bootstrap-server", "127.0.0.1:9", "--topic", "t", "--in",
                     str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"--in {missing}: no such file or directory" in err
