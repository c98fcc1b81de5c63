"""A SparkSession for command-line use: quiet console, Spark's output kept in a log file.

Why: Spark prints banners, warnings and stage progress to the terminal the user is reading the
export's own progress on. The JVM is started with its stdout/stderr going to a log file (the
Python workers it spawns inherit it), log4j is set to WARN, and the console progress bar is off;
the log's path is shown when something fails.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._class_archive import class_archive

_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = error
"""


#: Java options of the driver JVM of a short job. The JVM's optimising JIT compiler (C2) spends
#: CPU compiling Spark's hot paths in a fresh JVM, which a job of a few hundred thousand records
#: never earns back, so only the quick compiler (C1) runs. The serial collector spares the
#: threads of G1, Java's default, which a few seconds' heap does not need. (The JVM's CPU with
#: each: docs/benchmarks.md, "Spark: export, sink and the end-to-end export".) Long jobs keep the
#: JVM's defaults. A short job's driver also uses the class-data-sharing archive of
#: ``_class_archive``.
SHORT_JOB_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

#: the log of the JVM this module started, if it started the running one
_log_path: Path | None = None


def build_session(*, master: str, app_name: str, conf: Mapping[str, str] | None = None,
                  log_dir: str | None = None, short_job: bool = False) -> tuple[Any, Path | None]:
    """Start a SparkSession whose JVM writes to a log file, or join the running one.

    ``short_job``: the session runs one short job and stops: its driver JVM starts with
    ``SHORT_JOB_JAVA_OPTIONS`` and the class archive (``_class_archive``, created by the first
    such run, which waits at exit while the JVM writes it). It has no effect when a session is
    running already. Returns (session, log path); the path is
    None for a session started some other way.
    """
    global _log_path
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is None:  # type: ignore[attr-defined]
        directory = Path(log_dir or tempfile.mkdtemp(prefix="trio-broker-spark-"))
        directory.mkdir(parents=True, exist_ok=True)
        log4j = directory / "log4j2.properties"
        log4j.write_text(_LOG4J2)
        log_path = directory / "spark.log"
        if master.startswith("local"):
            # Executors in local mode are this machine's Python: use this interpreter (and its
            # installed packages) rather than whatever "python3" is first on PATH.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        archive = class_archive() if short_job else None
        java_options = archive.java_options() if archive else ""
        if java_options:  # should the JVM crash on the archive, its report goes with the log
            java_options += f" -XX:ErrorFile={directory}/hs_err_pid%p.log"
        while True:
            settings = session_settings(master=master, app_name=app_name, log4j=log4j,
                                        short_job=short_job, java_options=java_options)
            settings.update(conf or {})
            spark_conf = SparkConf(loadDefaults=True)
            for key, value in settings.items():
                spark_conf.set(key, value)
            try:
                with open(log_path, "ab") as log:
                    gateway = launch_gateway(spark_conf,
                                             popen_kwargs={"stdout": log, "stderr": log})
            except Exception:
                if archive is None or not archive.launch_failed():
                    raise
                archive, java_options = None, ""  # once more, without the archive
                continue
            break
        if archive is not None:
            archive.launched(getattr(gateway, "proc", None))
        SparkContext(conf=spark_conf, gateway=gateway)
        _log_path = log_path
    spark = SparkSession.builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark, _log_path


def session_settings(*, master: str, app_name: str, log4j: Path, short_job: bool = False,
                     java_options: str = "") -> dict[str, str]:
    """The Spark settings of a session ``build_session`` starts (before the caller's ``conf``).

    A local run needs no web UI; the rest keeps Spark's own output off the terminal and
    timestamps in UTC. ``java_options``: more options of a short job's driver JVM (its class
    archive's).
    """
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j}"
    driver_opts = java_opts
    if short_job:
        driver_opts = " ".join(filter(None, (java_opts, SHORT_JOB_JAVA_OPTIONS, java_options)))
    settings = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": driver_opts,
        "spark.executor.extraJavaOptions": java_opts,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    }
    if master.startswith("local"):
        settings["spark.ui.enabled"] = "false"
    return settings


def failure_message(exc: BaseException, log_path: Path | None) -> str:
    """One line for a failed Spark job: the trio-broker error inside it, else the first line
    of Spark's own error (the JVM's, for an exception py4j did not translate) and where the
    log is."""
    from .source import user_message

    message = user_message(exc)
    if message is not None:
        return message
    text = str(exc).strip()
    java = getattr(exc, "java_exception", None)  # py4j's Py4JJavaError
    if java is not None:
        text = str(java.toString()).strip()
    first = text.splitlines()[0] if text else repr(exc)
    where = f"Spark's log: {log_path}" if log_path else "see Spark's log"
    return f"{type(exc).__name__}: {first} ({where})"
