"""The import job: Parquet, JSON or CSV files into topics with Spark, through the sink.

Why it runs the way it does:
- The options, the broker and the target topic are checked before Spark starts, so a wrong
  address or setting fails in a second; a missing column fails when Spark analyses the read,
  before any task runs.
- Columns map onto the sink's (``key``, ``value``, ``headers``, ``timestamp``, ``partition``,
  ``topic``): by default each is the input column of that name when there is one (``topic``
  only when asked for); ``value`` is required. Text formats carry bytes as text: key and value
  are UTF-8 text (CSV) or base64 (JSON), as ``trio-broker export`` writes them, and header
  values inside JSON are base64, as Spark writes binary in JSON. Other column types become
  text (structs, arrays and maps as JSON); numeric timestamps are milliseconds since the epoch.
- Order: with ``order_by`` (default: ``offset`` when the input has that column, as an export's
  output does) every target partition is written by one task in that order, so an exported
  topic comes back in its own order; otherwise each task keeps its input's order.
- An import of a Parquet input of at most ``SHORT_EXPORT_RECORDS`` rows (counted from its
  footers) starts Spark's JVM for a short job, as a small export does (``_session``).
- Delivery is at least once (the sink's): an import that fails part way leaves what it wrote
  in the topics, and running it again writes those records again.

``trio-broker import`` (``trio_broker.cli.importer``) turns its arguments into
``ImportSettings``.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..client.blocking import LATEST, TopicPartition
from ._formats import formatted_spark_type, parse_format_options
from ._options import PROGRESS_OPTION, offsets_json
from ._progress import ProgressListener, show_import_summary, show_progress
from .job import SHORT_EXPORT_RECORDS
from .sink import SUMMARY_OPTION, SinkError, parse_sink_options

if TYPE_CHECKING:
    from rich.console import Console

FORMATS = ("parquet", "json", "csv")
#: the sink's columns, in the order the import maps them
COLUMNS = ("key", "value", "headers", "timestamp", "partition", "topic")
#: how each text format carries key and value bytes by default (what ``export`` writes)
BINARY_FORMATS = {"parquet": "text", "json": "base64", "csv": "text"}
#: CSV as ``export`` writes it: a header row, RFC 4180 quotes, values spanning lines
CSV_READ_OPTIONS = {"header": "true", "escape": '"', "multiLine": "true"}


class ImportFailed(Exception):
    """The Spark job failed; the message is the cause a user can act on."""


@dataclass(frozen=True)
class ImportSettings:
    """What to import from where; ``columns`` maps sink columns to input columns ("" for
    none; absent: the input column of the same name, if any); ``options`` are the sink's
    (``kafka.*``) options."""

    bootstrap_servers: str
    source: str
    topic: str | None = None
    format: str = "parquet"
    columns: Mapping[str, str] = field(default_factory=dict)
    binary_format: str | None = None  # text or base64; None: the format's default
    order_by: tuple[str, ...] | None = None  # None: ("offset",) when the input has it
    master: str = "local[*]"
    options: Mapping[str, str] = field(default_factory=dict)


class ImportJob:
    """One import; ``run()`` does it. Errors: the client's ``KafkaError``, ``SinkError`` (bad
    options or columns), ``ImportFailed`` (the Spark job), all with one-line messages."""

    def __init__(self, settings: ImportSettings) -> None:
        """Checks the options now (``SinkError``), before Spark starts."""
        if settings.format not in FORMATS:
            raise SinkError(f"format {settings.format!r} is not one of {', '.join(FORMATS)}")
        if settings.topic is None and not settings.columns.get("topic"):
            raise SinkError("name the topic to import into, or a column that holds it")
        self.settings = settings
        self.sink_options: dict[str, str] = {
            "kafka.bootstrap.servers": settings.bootstrap_servers, **settings.options}
        if settings.topic is not None:
            self.sink_options["topic"] = settings.topic
        self.sink = parse_sink_options(self.sink_options)
        # key.format / value.format in the options: those columns go to the sink as they are,
        # for it to encode (a struct turned into JSON bytes first would be written as bytes)
        try:
            formats = parse_format_options(self.sink_options)
        except ValueError as exc:
            raise SinkError(str(exc)) from None
        self.serialized = {column for column in ("key", "value")
                           if formatted_spark_type(formats, column)}
        self.binary_format = settings.binary_format or BINARY_FORMATS[settings.format]

    def run(self, console: Console, interactive: bool) -> dict[str, Any]:
        """Import; returns the summary (records, bytes, offsets written per partition)."""
        with self.sink.client() as client:  # no broker, or a topic that cannot be: fail now
            if self.settings.topic is not None:
                client.topic(self.settings.topic, allow_auto_create=True)
            else:
                client.metadata([])
        started = time.monotonic()
        planned = self.planned_rows()
        spark, log_path, created = self._session(short_job=self.short_job(planned))
        try:
            frame = self.frame(spark)
            summary = self._write(frame, console, interactive, planned)
        except KeyboardInterrupt:
            spark.sparkContext.cancelAllJobs()
            raise
        except SinkError:
            raise
        except BaseException as exc:
            raise self._failure(exc, log_path) from None
        finally:
            if created:
                spark.stop()
        if interactive:
            show_import_summary(console, summary, self.settings.source,
                                time.monotonic() - started, self.read_back(summary))
        return summary

    # --- the frame ------------------------------------------------------------------------

    def frame(self, spark: Any) -> Any:
        """The input as the sink's columns (Spark analyses it here: a missing column fails
        now, before any task)."""
        from pyspark.sql import functions as F

        s = self.settings
        reader = spark.read.format(s.format)
        if s.format == "csv":
            reader = reader.options(**CSV_READ_OPTIONS)
        df = reader.load(s.source)
        types = dict(df.dtypes)
        mapping: dict[str, str] = {}
        for column in COLUMNS:
            given = s.columns.get(column)
            if given is None:
                if column in types and column != "topic":
                    mapping[column] = column
            elif given:
                if given not in types:
                    raise SinkError(f"no column {given!r} in {s.source} to use as {column} "
                                    f"(columns: {', '.join(df.columns)})")
                mapping[column] = given
        if "value" not in mapping:
            raise SinkError(f"{s.source} has no value column: name one with --value-column "
                            f"(columns: {', '.join(df.columns)})")
        order = s.order_by if s.order_by is not None else (
            ("offset",) if "offset" in types else ())
        missing = [c for c in order if c not in types]
        if missing:
            raise SinkError(f"cannot order by {', '.join(missing)}: no such column in "
                            f"{s.source} (columns: {', '.join(df.columns)})")
        if order:
            route = mapping.get("partition") or mapping.get("key")
            keys = []
            for name in order:  # text columns (CSV) holding numbers sort as numbers
                if types[name] == "string":
                    keys.append(F.expr(f"try_cast(`{name}` AS bigint)"))
                keys.append(F.col(name))
            df = (df.repartition(F.col(route)) if route else df.coalesce(1)
                  ).sortWithinPartitions(*keys)
        return df.select(*[self._convert(F, column, mapping[column], types[mapping[column]])
                           .alias(column) for column in COLUMNS if column in mapping])

    def _convert(self, F: Any, column: str, name: str, dtype: str) -> Any:
        """One input column as the sink's column of that name wants it."""
        col = F.col(name)
        if column in self.serialized:
            return col
        if column in ("key", "value"):
            if dtype == "binary":
                return col
            if dtype == "string":
                return F.unbase64(col) if self.binary_format == "base64" else col.cast("binary")
            if dtype.startswith(("struct", "array", "map")):
                return F.to_json(col).cast("binary")
            return col.cast("string").cast("binary")
        if column == "headers":
            if dtype == "string":  # JSON text, as export writes headers into CSV
                return F.from_json(col, "array<struct<key:string,value:binary>>")
            if dtype == "array<struct<key:string,value:string>>":  # binary inside JSON: base64
                return F.transform(col, lambda h: F.struct(
                    h["key"].alias("key"), F.unbase64(h["value"]).alias("value")))
            if dtype == "array<string>":  # JSON infers this when every row's list is empty
                return F.lit(None).cast("array<struct<key:string,value:binary>>")
            return col
        if column == "timestamp":
            if dtype in ("bigint", "int", "smallint", "tinyint"):
                return F.timestamp_millis(col)
            return col if dtype.startswith("timestamp") else col.cast("timestamp")
        if column == "partition":
            return col.cast("int")
        return col.cast("string")  # topic

    # --- the write ------------------------------------------------------------------------

    def _write(self, frame: Any, console: Console, interactive: bool,
               planned: int | None) -> dict[str, Any]:
        outcome: dict[str, Any] = {}
        with ProgressListener() as listener, tempfile.TemporaryDirectory(
                prefix="trio-broker-import-") as work:
            summary_path = Path(work) / "summary.json"
            options = {**self.sink_options, SUMMARY_OPTION: str(summary_path),
                       PROGRESS_OPTION: f"{listener.address[0]}:{listener.address[1]}"}
            writer = frame.write.format("trio_broker").mode("append").options(**options)

            session = frame.sparkSession

            def write() -> None:
                # Spark looks a Python data source up in the calling thread's active session,
                # which a new thread lacks
                jvm = session._jvm
                jvm.org.apache.spark.sql.SparkSession.setActiveSession(session._jsparkSession)
                try:
                    writer.save()
                except BaseException as exc:  # handed to the main thread
                    outcome["error"] = exc

            thread = threading.Thread(target=write, name="import-write", daemon=True)
            thread.start()
            if interactive:
                show_progress(console, thread, listener, planned, verb="importing")
            else:
                while thread.is_alive():
                    thread.join(0.2)
            if "error" in outcome:
                raise outcome["error"]
            summary: dict[str, Any] = json.loads(summary_path.read_text())
        return summary

    @staticmethod
    def short_job(planned: int | None) -> bool:
        """A Parquet input of at most ``SHORT_EXPORT_RECORDS`` rows is a short job for Spark's
        JVM, as an export of as many records is; an input of unknown size is not."""
        return planned is not None and planned <= SHORT_EXPORT_RECORDS

    def planned_rows(self) -> int | None:
        """Rows of a local Parquet input, from its footers (other inputs: not known)."""
        if self.settings.format != "parquet" or not Path(self.settings.source).exists():
            return None
        import pyarrow as pa
        import pyarrow.dataset as ds

        try:
            return int(ds.dataset(self.settings.source, format="parquet",
                                  partitioning="hive").count_rows())
        except (OSError, ValueError, pa.ArrowException):
            # not Parquet, or not Parquet pyarrow reads: Spark's read reports it in its words
            return None

    def read_back(self, summary: Mapping[str, Any]) -> str | None:
        """The ``trio-broker export`` offsets that read back what this import wrote into its
        topic (every partition named, as Spark wants), when the offsets are known."""
        topic = self.settings.topic
        ranges = [r for r in summary["ranges"] if r["topic"] == topic]
        if topic is None or len(ranges) != len(summary["ranges"]) or any(
                r["first_offset"] < 0 for r in ranges):
            return None
        with self.sink.client() as client:
            tps = client.partitions_for([topic])
            latest = client.list_offsets(dict.fromkeys(tps, LATEST))
        starts = dict(latest)
        ends = dict(latest)
        for r in ranges:
            tp = TopicPartition(topic, r["partition"])
            starts[tp], ends[tp] = r["first_offset"], r["last_offset"] + 1
        return (f"trio-broker export --bootstrap-server {self.settings.bootstrap_servers} "
                f"--topic {topic} --starting-offsets '{offsets_json(starts)}' "
                f"--ending-offsets '{offsets_json(ends)}' --out DIR")

    # --- helpers --------------------------------------------------------------------------

    def _session(self, short_job: bool = False) -> tuple[Any, Path | None, bool]:
        from pyspark import SparkContext

        from ._session import build_session
        from .source import register

        created = SparkContext._active_spark_context is None  # type: ignore[attr-defined]
        spark, log_path = build_session(master=self.settings.master,
                                        app_name="trio-broker import", short_job=short_job)
        register(spark)
        return spark, log_path, created

    def _failure(self, exc: BaseException, log_path: Path | None) -> ImportFailed:
        from ._session import failure_message

        return ImportFailed(failure_message(exc, log_path))


__all__ = ["BINARY_FORMATS", "COLUMNS", "FORMATS", "ImportFailed", "ImportJob",
           "ImportSettings"]
