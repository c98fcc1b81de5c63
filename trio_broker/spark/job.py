"""The export job: topics to Parquet, JSON or CSV files with Spark, exactly once.

Why it runs the way it does:
- A batch export reads a fixed set of offset ranges, resolved before Spark starts (so it fails
  in a second, clearly, on a wrong address or topic) and pinned for the Spark job; the ranges
  are the export's identity (``manifest``). The files are written into a staging directory
  first, so a failed run leaves earlier files as they were.
- A batch Parquet export writes its files with pyarrow in the Spark tasks that read the
  records (``_arrow_export``): the records never enter Spark's JVM, which spares it making
  rows of them (docs/benchmarks.md, "Spark: export, sink and the end-to-end export"). JSON and
  CSV, and ``writer="spark"``, go through the source and Spark's writers.
- A follow export is a Structured Streaming query into Spark's file sink, whose commit log
  (``_spark_metadata``) and the checkpoint make every offset land in the output exactly once,
  across restarts; SIGINT or SIGTERM stops it between micro-batches.

``trio-broker export`` (``trio_broker.cli.export``) turns its arguments into ``ExportSettings``.
"""

from __future__ import annotations

import logging
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from . import manifest as manifests
from ._class_archive import archive_enabled
from ._decode import schema_ddl
from ._formats import source_columns
from ._options import PROGRESS_OPTION, OffsetRange, offsets_json, parse_options
from ._planning import split_ranges, subscribed_partitions
from ._progress import ProgressListener, show_progress, show_summary, watch_stream

if TYPE_CHECKING:
    from pyspark.sql.types import StructType
    from rich.console import Console

LOGGER = logging.getLogger(__name__)

#: Values are mostly distinct, opaque payloads: a dictionary page would be built and then
#: abandoned, and min/max statistics of them prune nothing. Skipping both spares Spark that work
#: on every record (docs/benchmarks.md, "Spark: export, sink and the end-to-end export"). Keys
#: keep both: they repeat and are what readers filter on.
PARQUET_WRITE_OPTIONS = {
    "parquet.enable.dictionary#value": "false",
    "parquet.column.statistics.enabled#value": "false",
}
#: A batch export of at most this many records (any size with the arrow writer) starts Spark's
#: JVM for a short job (``_session.SHORT_JOB_JAVA_OPTIONS``): below it, the JIT compile time
#: saved is more than the slower compiled code costs (docs/benchmarks.md, "Spark: export, sink
#: and the end-to-end export").
SHORT_EXPORT_RECORDS = 1_000_000

T = TypeVar("T")
#: A header row, and quotes inside fields doubled as RFC 4180 (and Python's csv) expect,
#: rather than Spark's default backslash escapes.
CSV_WRITE_OPTIONS = {"header": "true", "escape": '"'}


class ExportFailed(Exception):
    """The Spark job failed; the message is the cause a user can act on."""


@dataclass(frozen=True)
class ExportSettings:
    """What to export, where, and how; ``options`` are extra source options (Spark's names)."""

    bootstrap_servers: str
    topics: tuple[str, ...]
    out: Path
    format: str = "parquet"  # parquet, json or csv
    partition_by: tuple[str, ...] = ()  # of topic, partition
    starting_offsets: str = "earliest"
    ending_offsets: str = "latest"  # batch only
    master: str = "local[*]"
    follow: bool = False
    checkpoint: Path | None = None  # follow only; default <out>/_checkpoint
    trigger_interval: str = "1 second"
    options: Mapping[str, str] = field(default_factory=dict)
    #: "arrow" (batch Parquet only) or "spark"; None: "arrow" where it applies
    writer: str | None = None

    def arrow_writer(self) -> bool:
        """Whether the files are written by pyarrow in the tasks (``_arrow_export``)."""
        if self.writer not in (None, "arrow", "spark"):
            raise ValueError(f"writer is 'arrow' or 'spark', not {self.writer!r}")
        if self.writer == "arrow" and (self.follow or self.format != "parquet"):
            raise ValueError("the arrow writer writes batch Parquet exports only")
        return self.writer != "spark" and not self.follow and self.format == "parquet"


class ExportJob:
    """One export; ``batch()`` or ``follow()`` runs it. The client's errors (``KafkaError``),
    ``SourceOptionError`` and ``ExportFailed`` carry one-line messages; Ctrl-C during a batch is
    re-raised after the staging files are removed."""

    def __init__(self, settings: ExportSettings) -> None:
        """Checks the source options now (``SourceOptionError``), before Spark starts."""
        self.settings = settings
        self.out = settings.out.resolve()
        self.options: dict[str, str] = {
            "kafka.bootstrap.servers": settings.bootstrap_servers,
            "subscribe": ",".join(settings.topics),
            "startingOffsets": settings.starting_offsets,
            "includeHeaders": "true",
        }
        if not settings.follow:
            self.options["endingOffsets"] = settings.ending_offsets
        self.options.update(settings.options)
        self.source = parse_options(self.options, streaming=settings.follow)
        from .source import read_formats

        # key.format / value.format: the columns' types come from the registry, before Spark
        self.formats = read_formats(self.options, self.source)
        self.columns: str | StructType = (
            source_columns(self.source.include_headers, self.formats) if self.formats
            else schema_ddl(self.source.include_headers))
        self.arrow_writer = settings.arrow_writer()
        archive_enabled()  # a bad switch is a usage error before Spark starts

    # --- batch ----------------------------------------------------------------------------

    def batch(self, console: Console, interactive: bool) -> None:
        from .source import plan_batch

        started = time.monotonic()
        ranges = plan_batch(self.source)
        planned = sum(r.size for r in ranges)
        this_id = manifests.export_id(ranges)
        replaced = manifests.replaced_exports(manifests.load_manifests(self.out), ranges,
                                              this_id)
        if planned == 0:
            if interactive:
                console.print("Nothing to export: the requested ranges hold no records.")
            return

        staging = self.out / f"_staging-{this_id}-{uuid.uuid4().hex[:8]}"
        # With the arrow writer the JVM moves no records at all: its optimising compiler is
        # never earned back, whatever the size.
        spark, log_path, created = self._session(
            short_job=self.arrow_writer or planned <= SHORT_EXPORT_RECORDS)
        try:
            write = self._write_arrow if self.arrow_writer else self._write_batch
            result = write(spark, ranges, staging, planned, console, interactive)
            files = manifests.publish(staging, self.out, this_id)
        except KeyboardInterrupt:
            spark.sparkContext.cancelAllJobs()
            shutil.rmtree(staging, ignore_errors=True)
            raise
        except BaseException as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise self._failure(exc, log_path) from None
        finally:
            if created:
                spark.stop()
        elapsed = time.monotonic() - started
        record = manifests.build_manifest(
            this_id=this_id, created=datetime.now(UTC).isoformat(timespec="seconds"),
            bootstrap_servers=self.source.bootstrap_servers,
            topics=list(self.settings.topics), fmt=self.settings.format,
            partition_by=self.settings.partition_by, ranges=ranges,
            records=result["records"], payload_bytes=result["bytes"], files=files,
            replaced=replaced)
        manifests.write_manifest(self.out, record)
        manifests.remove_exports(self.out, replaced, keep_id=this_id, keep_files=files)
        if interactive:
            show_summary(console, ranges, record, self.out, elapsed,
                         f"{manifests.MANIFEST_DIR}/{this_id}.json")

    def _write_batch(self, spark: Any, ranges: list[OffsetRange], staging: Path, planned: int,
                     console: Console, interactive: bool) -> dict[str, int]:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        from .source import register

        register(spark)
        fmt = self.settings.format
        with ProgressListener() as listener:
            options = dict(self.options)
            options["startingOffsets"] = offsets_json({r.tp: r.start for r in ranges})
            options["endingOffsets"] = offsets_json({r.tp: r.end for r in ranges})
            options[PROGRESS_OPTION] = f"{listener.address[0]}:{listener.address[1]}"
            options.setdefault("minPartitions", str(_default_min_partitions(spark)))
            # The schema is known: given, Spark skips a Python process that would ask the source
            # for it (seconds of a short export); the options were checked before Spark started.
            df = (spark.read.format("trio_broker").schema(self.columns).options(**options)
                  .load())
            observation = Observation("export")
            payload = _payload_length(df)
            df = df.observe(observation, F.count(F.lit(1)).alias("records"),
                            F.coalesce(F.sum(payload), F.lit(0)).alias("bytes"))
            writer = _for_format(df, fmt).write.mode("overwrite").options(
                **write_options(fmt))
            if self.settings.partition_by:
                writer = writer.partitionBy(*self.settings.partition_by)

            def write() -> dict[str, Any]:
                writer.format(fmt).save(str(staging))
                return dict(observation.get)

            metrics = _run_with_progress(write, console, interactive, listener, planned)
        return {"records": int(metrics["records"]), "bytes": int(metrics["bytes"])}

    def _write_arrow(self, spark: Any, ranges: list[OffsetRange], staging: Path, planned: int,
                     console: Console, interactive: bool) -> dict[str, int]:
        from . import _arrow_export

        # Split as the source splits them (minPartitions, maxRecordsPerPartition).
        min_partitions = self.source.min_partitions or _default_min_partitions(spark)
        pieces = split_ranges(ranges, min_partitions=min_partitions,
                              max_records=self.source.max_records_per_partition)
        with ProgressListener() as listener:
            tasks = _arrow_export.plan_tasks(pieces, self.source, staging=staging,
                                             partition_by=self.settings.partition_by,
                                             progress_address=listener.address,
                                             formats=self.formats)
            results = _run_with_progress(lambda: _arrow_export.run(spark, tasks), console,
                                         interactive, listener, planned)
        _arrow_export.commit(staging, results, include_headers=self.source.include_headers,
                             partition_by=self.settings.partition_by, formats=self.formats)
        LOGGER.info("arrow export: %d tasks, CPU s reading %.2f, writing %.2f", len(results),
                    sum(r.read_cpu_s for r in results), sum(r.write_cpu_s for r in results))
        return {"records": sum(r.records for r in results),
                "bytes": sum(r.payload_bytes for r in results)}

    # --- follow ---------------------------------------------------------------------------

    def follow(self, console: Console, interactive: bool) -> None:
        with self.source.client() as client:
            subscribed_partitions(client, self.source)  # unknown topic / no broker: fail now
        checkpoint = (self.settings.checkpoint.resolve() if self.settings.checkpoint
                      else self.out / "_checkpoint")
        fmt = self.settings.format
        spark, log_path, created = self._session()
        stop = threading.Event()
        previous = _install_stop_handlers(stop)
        try:
            from .source import register

            register(spark)
            df = (spark.readStream.format("trio_broker")
                  .schema(self.columns).options(**self.options).load())
            writer = (_for_format(df, fmt).writeStream.format(fmt)
                      .options(**write_options(fmt))
                      .option("path", str(self.out))
                      .option("checkpointLocation", str(checkpoint))
                      .trigger(processingTime=self.settings.trigger_interval))
            if self.settings.partition_by:
                writer = writer.partitionBy(*self.settings.partition_by)
            query = writer.start()
            records = watch_stream(console, interactive, query, stop)
            query.stop()
            failure = query.exception()
            if failure is not None:
                raise self._failure(failure, log_path)
        except ExportFailed:
            raise
        except BaseException as exc:
            raise self._failure(exc, log_path) from None
        finally:
            _restore_handlers(previous)
            if created:
                spark.stop()
        if interactive:
            console.print(f"Stopped. {records:,} records exported to {self.out} "
                          f"(checkpoint {checkpoint}).")

    # --- helpers --------------------------------------------------------------------------

    def _session(self, short_job: bool = False) -> tuple[Any, Path | None, bool]:
        from pyspark import SparkContext

        from ._session import build_session

        created = SparkContext._active_spark_context is None  # type: ignore[attr-defined]
        spark, log_path = build_session(master=self.settings.master,
                                        app_name="trio-broker export", short_job=short_job)
        return spark, log_path, created

    def _failure(self, exc: BaseException, log_path: Path | None) -> ExportFailed:
        from ._session import failure_message

        return ExportFailed(failure_message(exc, log_path))


def _default_min_partitions(spark: Any) -> int:
    """Two tasks per core: partitions of unequal size still keep every core busy."""
    return 2 * int(spark.sparkContext.defaultParallelism)


def _run_with_progress(work: Callable[[], T], console: Console, interactive: bool,
                       listener: ProgressListener, planned: int) -> T:
    """``work()`` run in a thread while the main thread shows progress (and takes Ctrl-C);
    its result, or its exception raised here."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = work()
        except BaseException as exc:  # handed to the main thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="export-write", daemon=True)
    thread.start()
    if interactive:
        show_progress(console, thread, listener, planned)
    else:
        while thread.is_alive():
            thread.join(0.2)
    if "error" in outcome:
        raise outcome["error"]
    return cast(T, outcome["result"])


def _payload_length(df: Any) -> Any:
    """``length(key) + length(value)`` per row; a column decoded by its ``key.format`` /
    ``value.format`` into a nested type has no length and counts 0."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, StringType

    total = F.lit(0)
    for column in ("key", "value"):
        if isinstance(df.schema[column].dataType, (BinaryType, StringType)):
            total = total + F.coalesce(F.length(column), F.lit(0))
    return total


def write_options(fmt: str) -> dict[str, str]:
    """The writer options the export uses for ``fmt``."""
    return {"parquet": PARQUET_WRITE_OPTIONS, "csv": CSV_WRITE_OPTIONS}.get(fmt, {}).copy()


def _for_format(df: Any, fmt: str) -> Any:
    """CSV has no binary or nested columns: keys and values become text (JSON for a
    ``key.format`` / ``value.format`` of nested type), headers JSON."""
    if fmt != "csv":
        return df
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    def text(column: str) -> Any:
        nested = isinstance(df.schema[column].dataType, (StructType, ArrayType, MapType))
        return (F.to_json(column) if nested else F.col(column).cast("string")).alias(column)

    return df.select(
        text("key"), text("value"),
        "topic", "partition", "offset", "timestamp", "timestampType",
        F.to_json("headers").alias("headers"))


def _install_stop_handlers(stop: threading.Event) -> dict[int, Any]:
    previous: dict[int, Any] = {}
    if threading.current_thread() is not threading.main_thread():
        return previous

    def handler(signum: int, frame: Any) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, handler)
    return previous


def _restore_handlers(previous: Mapping[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)
