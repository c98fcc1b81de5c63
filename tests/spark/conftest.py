"""One SparkSession for the whole Spark suite, and producing through real Kafka clients.

Starting a local[2] session costs seconds, so every Spark test shares this one (UI off, two
shuffle partitions, Spark's output in a log file rather than the test output). Its jobs are all
small, so its driver JVM starts as a short job's (``_session.SHORT_JOB_JAVA_OPTIONS`` and the
class archive): compiling Spark's hot paths with C2 would cost more than it saves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow  # noqa: F401 - a dev dependency: missing, it fails loudly
import pyspark  # noqa: F401 - a dev dependency: missing, it fails loudly
import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from trio_broker.spark import register
    from trio_broker.spark._session import build_session

    session, _log = build_session(
        master="local[2]", app_name="trio-broker tests", short_job=True,
        log_dir=str(tmp_path_factory.mktemp("spark-log")),
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.sql.streaming.stopTimeout": "30s",
        })
    register(session)
    yield session
    session.stop()
