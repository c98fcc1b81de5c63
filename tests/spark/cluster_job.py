"""The driver of the multi-process cluster tests, run as its own process:
``python -m tests.spark.cluster_job BOOTSTRAP WORKDIR``.

Why a process of its own: a Python process holds one SparkContext, and the rest of the suite
shares a ``local[2]`` one. This driver starts Spark's ``local-cluster[2,1,1024]`` master (a
standalone master and two workers inside the driver's JVM, each worker launching its executor
as a separate JVM with its own Python workers), then runs on it, one after the other:

1. ``trio-broker export`` of topic ``cluster-in`` to ``WORKDIR/export`` (pyarrow writing in the
   tasks), and again with ``--writer spark`` to ``WORKDIR/export-spark``;
2. ``trio-broker import`` of ``WORKDIR/import-input`` into topic ``cluster-imported``;
3. a streaming query from ``cluster-in`` to topic ``cluster-streamed`` (``availableNow``).

Its three jobs are short: the driver JVM starts as a short job's (the class archive, the quick
compiler only, the serial collector) and the executors' JVMs with the same Java options, so
three fresh JVMs do not compete for the cores compiling Spark's hot paths for records they
never see again.

It prints one JSON line: each step's exit status or error, the driver's pid, the pids of the
executors' Python workers (from a plain job) and the tasks each executor ran (Spark's status
store), so the tests can check that tasks ran in executor processes, not in the driver. The
broker is the test process's; every executor connects to it directly.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

MASTER = "local-cluster[2,1,1024]"


def main(bootstrap: str, workdir: Path) -> dict[str, Any]:
    import time

    from trio_broker.cli import main as cli_main
    from trio_broker.spark import register
    from trio_broker.spark._session import SHORT_JOB_JAVA_OPTIONS, build_session

    started = time.monotonic()
    seconds: dict[str, float] = {}
    log_dir = workdir / "spark-log"
    spark, _log = build_session(master=MASTER, app_name="trio-broker cluster tests",
                                log_dir=str(log_dir), short_job=True,
                                conf={"spark.executor.memory": "512m",
                                      "spark.executor.extraJavaOptions":
                                          f"-Dlog4j2.configurationFile=file:{log_dir}/"
                                          f"log4j2.properties {SHORT_JOB_JAVA_OPTIONS}",
                                      "spark.driver.host": "127.0.0.1",
                                      "spark.driver.bindAddress": "127.0.0.1",
                                      "spark.sql.shuffle.partitions": "2"})
    register(spark)
    sc = spark.sparkContext
    seconds["start"] = time.monotonic() - started
    result: dict[str, Any] = {"driver_pid": os.getpid(), "seconds": seconds}
    result["worker_parents"] = sorted(set(sc.parallelize(range(8), 8).map(
        lambda _: os.getppid()).collect()))
    seconds["pids"] = time.monotonic() - started
    result["export"] = cli_main(["export", "--bootstrap-server", bootstrap, "--topic",
                                 "cluster-in", "--out", str(workdir / "export"),
                                 "--master", MASTER])
    seconds["export"] = time.monotonic() - started
    result["export_spark"] = cli_main(["export", "--bootstrap-server", bootstrap, "--topic",
                                       "cluster-in", "--out", str(workdir / "export-spark"),
                                       "--master", MASTER, "--writer", "spark"])
    seconds["export_spark"] = time.monotonic() - started
    result["import"] = cli_main(["import", "--bootstrap-server", bootstrap, "--topic",
                                 "cluster-imported", "--in", str(workdir / "import-input"),
                                 "--master", MASTER])
    seconds["import"] = time.monotonic() - started
    query = (spark.readStream.format("trio_broker").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", "cluster-in").option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "8000").option("includeHeaders", "true").load()
             .selectExpr("key", "value", "headers", "partition", "timestamp")
             .writeStream.format("trio_broker").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", "cluster-streamed")
             .option("checkpointLocation", str(workdir / "checkpoint"))
             .trigger(availableNow=True).start())
    finished = query.awaitTermination(300)
    failure = query.exception()
    result["stream"] = {"finished": bool(finished),
                        "error": None if failure is None else str(failure)[:2000],
                        "batches": len([p for p in query.recentProgress
                                        if p["numInputRows"]])}
    seconds["stream"] = time.monotonic() - started
    executors = sc._jsc.sc().statusStore().executorList(True)
    result["tasks"] = {str(e.id()): int(e.totalTasks())
                       for e in (executors.apply(i) for i in range(executors.size()))}
    spark.stop()
    return result


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]))), flush=True)
