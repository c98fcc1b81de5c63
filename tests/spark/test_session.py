"""The settings of the SparkSession the export and import commands start."""

from __future__ import annotations

from pathlib import Path

from trio_broker.spark._session import SHORT_JOB_JAVA_OPTIONS, session_settings
from trio_broker.spark.job import SHORT_EXPORT_RECORDS


def test_a_short_job_runs_its_driver_jvm_with_the_quick_compiler_only(tmp_path: Path) -> None:
    log4j = tmp_path / "log4j2.properties"
    short = session_settings(master="local[2]", app_name="t", log4j=log4j, short_job=True)
    long = session_settings(master="local[2]", app_name="t", log4j=log4j)
    assert short["spark.driver.extraJavaOptions"] == (
        f"-Dlog4j2.configurationFile=file:{log4j} {SHORT_JOB_JAVA_OPTIONS}")
    assert "-XX:TieredStopAtLevel=1" in SHORT_JOB_JAVA_OPTIONS.split()
    archived = session_settings(master="local[2]", app_name="t", log4j=log4j, short_job=True,
                                java_options="-XX:SharedArchiveFile=a.jsa")
    assert archived["spark.driver.extraJavaOptions"] == (
        f"{short['spark.driver.extraJavaOptions']} -XX:SharedArchiveFile=a.jsa")
    assert long["spark.driver.extraJavaOptions"] == f"-Dlog4j2.configurationFile=file:{log4j}"
    # executors of a cluster run every job's tasks: they keep the JVM's default compilers
    assert short["spark.executor.extraJavaOptions"] == long["spark.executor.extraJavaOptions"]
    assert {k: v for k, v in short.items() if k != "spark.driver.extraJavaOptions"} == {
        k: v for k, v in long.items() if k != "spark.driver.extraJavaOptions"}
    assert SHORT_EXPORT_RECORDS >= 200_000


def test_only_a_local_session_turns_the_web_ui_off(tmp_path: Path) -> None:
    log4j = tmp_path / "log4j2.properties"
    assert session_settings(master="local[2]", app_name="t", log4j=log4j)[
        "spark.ui.enabled"] == "false"
    assert "spark.ui.enabled" not in session_settings(
        master="spark://127.0.0.1:7077", app_name="t", log4j=log4j)


def test_a_small_parquet_import_is_a_short_job(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from trio_broker.spark.importer import ImportJob, ImportSettings

    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"value": [b"a", b"b", b"c"]}), tmp_path / "in" / "part.parquet")
    (tmp_path / "in.csv").write_text("value\na\n")
    small = ImportJob(ImportSettings(bootstrap_servers="127.0.0.1:9", source=str(tmp_path / "in"),
                                     topic="t"))
    assert small.planned_rows() == 3
    assert small.short_job(small.planned_rows())
    assert not small.short_job(SHORT_EXPORT_RECORDS + 1)
    csv = ImportJob(ImportSettings(bootstrap_servers="127.0.0.1:9",
                                   source=str(tmp_path / "in.csv"), topic="t", format="csv"))
    assert csv.planned_rows() is None  # its size is not known before Spark reads it
    assert not csv.short_job(csv.planned_rows())
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "part.parquet").write_bytes(b"PAR1 not a footer")
    damaged = ImportJob(ImportSettings(bootstrap_servers="127.0.0.1:9",
                                       source=str(tmp_path / "bad"), topic="t"))
    assert damaged.planned_rows() is None  # Spark's own read names what is wrong with it
