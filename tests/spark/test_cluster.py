"""Export, import and a streaming query on a real multi-process Spark cluster.

One driver process (``tests/spark/cluster_job.py``) starts ``local-cluster[2,1,1024]``: a
standalone master and two workers, each worker's executor a JVM of its own with its own Python
workers. Its tasks fetch from and produce to this test's broker directly; the driver only plans.
The cluster starts once for the three tests (it takes tens of seconds on a busy machine).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tests.spark.producing import Produced, produce_confluent
from trio_broker.client.blocking import BlockingClient, next_fetch_offset
from trio_broker.protocol.records import decode_batches
from trio_broker.testing import ThreadedBroker

pytestmark = pytest.mark.spark

LOGGER = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[2]
RECORDS = 20_000
IMPORTED = 5_000


def topic_records(bootstrap: str, topic: str) -> dict[int, list[tuple]]:
    """Every record of ``topic`` per partition, in offset order, read without Spark."""
    out: dict[int, list[tuple]] = {}
    with BlockingClient(bootstrap) as client:
        for tp in client.partitions_for([topic]):
            records: list[tuple] = []
            offset = 0
            while True:
                fetched = client.fetch(tp, offset, max_bytes=4 << 20)
                following = next_fetch_offset(fetched.records, offset)
                if following <= offset:
                    break
                for _, batch in decode_batches(fetched.records):
                    records += [(r.key, r.value, r.headers, r.timestamp) for r in batch]
                offset = following
            out[tp.partition] = records
    return out


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict, Path,
                                                                           Produced]]:
    workdir = tmp_path_factory.mktemp("cluster")
    broker = ThreadedBroker(listeners="PLAINTEXT://127.0.0.1:0",
                            log_dirs=str(workdir / "broker"), shutdown_timeout_ms=1000).start()
    try:
        bootstrap = broker.bootstrap_servers
        for topic in ("cluster-in", "cluster-imported", "cluster-streamed"):
            broker.create_topic(topic, 3)
        produced = Produced()
        produce_confluent(bootstrap, "cluster-in", RECORDS, partitions=3, compression="zstd",
                          seed=21, produced=produced)
        pq.write_table(pa.table({
            "key": pa.array([b"k%d" % i for i in range(IMPORTED)]),
            "value": pa.array([b"imported-%d" % i for i in range(IMPORTED)]),
            "partition": pa.array([i % 3 for i in range(IMPORTED)], pa.int32()),
            "offset": pa.array([i // 3 for i in range(IMPORTED)], pa.int64()),
        }), workdir / "import-input.parquet")
        (workdir / "import-input").mkdir()
        (workdir / "import-input.parquet").rename(workdir / "import-input" / "part.parquet")
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
        done = subprocess.run([sys.executable, "-m", "tests.spark.cluster_job", bootstrap,
                               str(workdir)], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=900, check=False)
        assert done.returncode == 0, done.stderr[-4000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])
        LOGGER.warning("cluster driver, seconds since start: %s", result["seconds"])
        yield broker, result, workdir, produced
    finally:
        broker.stop()


def test_tasks_run_in_executor_processes(cluster_run) -> None:
    _, result, _, _ = cluster_run
    assert len(result["worker_parents"]) == 2  # two executors' Python daemons
    assert result["driver_pid"] not in result["worker_parents"]
    tasks = result["tasks"]
    assert sorted(tasks) == ["0", "1", "driver"]
    assert tasks["driver"] == 0
    assert tasks["0"] > 0
    assert tasks["1"] > 0


def test_export_on_the_cluster(cluster_run, spark: Any) -> None:
    from pyspark.sql import functions as F

    _, result, workdir, produced = cluster_run
    assert result["export"] == 0
    table = ds.dataset(workdir / "export", format="parquet").to_table()
    got = sorted(zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(),
                     table.column("value").to_pylist()))
    assert got == sorted((p, o, s.value) for (p, o), s in produced.records.items())

    # Spark reads the pyarrow-written files as the files of its own writer: same schema and
    # rows; each file one partition's offsets in order.
    assert result["export_spark"] == 0
    arrow = spark.read.parquet(str(workdir / "export"))
    reference = spark.read.parquet(str(workdir / "export-spark"))
    assert arrow.schema == reference.schema

    def rows(df: Any) -> list:
        return sorted((tuple(r) for r in df.collect()), key=lambda r: (r[3], r[4]))

    assert rows(arrow) == rows(reference)  # (partition, offset) orders them
    files: dict[str, list[tuple[int, int]]] = {}
    for row in arrow.select(F.input_file_name().alias("f"), "partition", "offset").collect():
        files.setdefault(row.f, []).append((row.partition, row.offset))
    for name, keys in files.items():
        assert len({p for p, _ in keys}) == 1, name
        assert [o for _, o in keys] == list(range(keys[0][1], keys[0][1] + len(keys))), name


def test_import_on_the_cluster(cluster_run) -> None:
    broker, result, _, _ = cluster_run
    assert result["import"] == 0
    stored = topic_records(broker.bootstrap_servers, "cluster-imported")
    for p in range(3):  # the input's offset column orders each partition
        assert [(k, v) for k, v, _, _ in stored[p]] == [
            (b"k%d" % i, b"imported-%d" % i) for i in range(p, IMPORTED, 3)]


def test_streaming_query_on_the_cluster(cluster_run) -> None:
    broker, result, _, _ = cluster_run
    assert result["stream"]["error"] is None
    assert result["stream"]["finished"]
    assert result["stream"]["batches"] >= RECORDS // 8000
    source = topic_records(broker.bootstrap_servers, "cluster-in")
    copied = topic_records(broker.bootstrap_servers, "cluster-streamed")
    assert copied == source  # same partitions and order, keys, values, headers, timestamps
    assert sum(map(len, copied.values())) == RECORDS
