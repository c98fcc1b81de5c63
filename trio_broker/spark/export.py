"""``trio-broker export``: topics to Parquet, JSON or CSV files with Spark, exactly once.

Why the output looks the way it does:
- A batch export reads a fixed set of offset ranges, resolved before Spark starts (so the
  command fails in a second, clearly, on a wrong address or topic) and pinned for the Spark job.
  The ranges are the export's identity: its data files are named ``export-<id>-part-...`` and its
  manifest is ``<out>/_exports/<id>.json``. Running the same export again replaces those files
  instead of adding a second copy; an export whose ranges contain an earlier one's replaces that
  one too, and an export that only partly overlaps an earlier one is refused (it would duplicate
  records). Spark writes into a staging directory first, so a failed run leaves earlier files as
  they were. Names starting with ``_`` are ignored by Spark and pyarrow readers.
- ``--follow`` is a Structured Streaming query into Spark's file sink, whose commit log
  (``_spark_metadata``) and the checkpoint make every offset land in the output exactly once,
  across restarts; Ctrl-C stops it between micro-batches and exits 0.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ._options import (
    PROGRESS_OPTION,
    OffsetRange,
    SourceOptionError,
    offsets_json,
    parse_options,
    subscribed_partitions,
)
from ._progress import ProgressListener
from ._wire import KafkaSourceError

LOGGER = logging.getLogger(__name__)

FORMATS = ("parquet", "json", "csv")
PARTITION_COLUMNS = ("topic", "partition")
MANIFEST_DIR = "_exports"
#: Values are mostly distinct, opaque payloads: a dictionary page would be built and then
#: abandoned, and min/max statistics of them prune nothing. Skipping both saves ~15% of Spark's
#: CPU per record (measured with bench/bench_export.py). Keys keep both: they repeat and are
#: what readers filter on.
PARQUET_WRITE_OPTIONS = {
    "parquet.enable.dictionary#value": "false",
    "parquet.column.statistics.enabled#value": "false",
}
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``export`` options, for a parser of its own or a subcommand's."""
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                        help="broker to read from (any Kafka-protocol broker)")
    parser.add_argument("--topic", required=True, action="append", metavar="TOPIC",
                        help="topic to export; repeat for several")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory")
    parser.add_argument("--format", choices=FORMATS, default="parquet",
                        help="file format (default: parquet)")
    parser.add_argument("--partition-by", default=None, metavar="COLUMNS",
                        help="comma list of columns to lay out directories by: topic,partition")
    parser.add_argument("--starting-offsets", default="earliest", metavar="SPEC",
                        help="earliest, latest (follow only) or Spark's offset JSON "
                             '{"topic":{"0":23}} (default: earliest)')
    parser.add_argument("--ending-offsets", default="latest", metavar="SPEC",
                        help="latest or offset JSON (batch only; default: latest)")
    parser.add_argument("--master", default="local[*]",
                        help="Spark master URL (default: local[*]; e.g. spark://host:7077)")
    parser.add_argument("--follow", action="store_true",
                        help="keep exporting new records until Ctrl-C (a streaming query)")
    parser.add_argument("--checkpoint", default=None, metavar="DIR",
                        help="streaming checkpoint (default: DIR/_checkpoint)")
    parser.add_argument("--trigger-interval", default="1 second", metavar="INTERVAL",
                        help="how often --follow looks for new records (default: 1 second)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="extra source option, e.g. maxOffsetsPerTrigger=100000")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="trio-broker export",
        description="Export topics to files with Spark, exactly once.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Run an export from parsed ``add_arguments`` options; returns the exit status."""
    console = Console(stderr=False)
    errors = Console(stderr=True)
    interactive = sys.stdout.isatty()
    try:
        job = _Job(args)
    except (SourceOptionError, ValueError) as exc:
        errors.print(f"[red]error:[/red] {exc}", highlight=False)
        return EXIT_USAGE
    try:
        if args.follow:
            return job.follow(console, interactive)
        return job.batch(console, interactive)
    except KafkaSourceError as exc:
        errors.print(f"[red]error:[/red] {exc}", highlight=False)
        return EXIT_FAILED
    except _SparkFailure as exc:
        errors.print(f"[red]error:[/red] {exc}", highlight=False)
        return EXIT_FAILED


class _SparkFailure(Exception):
    """The Spark job failed; the message is the cause a user can act on."""


class _Job:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out).resolve()
        self.partition_by = _partition_columns(args.partition_by)
        if args.follow and args.ending_offsets != "latest":
            raise SourceOptionError("--ending-offsets does not apply to --follow")
        self.options: dict[str, str] = {
            "kafka.bootstrap.servers": args.bootstrap_server,
            "subscribe": ",".join(args.topic),
            "startingOffsets": args.starting_offsets,
            "includeHeaders": "true",
        }
        if not args.follow:
            self.options["endingOffsets"] = args.ending_offsets
        for item in args.option:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise SourceOptionError(f"--option {item!r} is not KEY=VALUE")
            self.options[key.strip()] = value
        self.source = parse_options(self.options, streaming=args.follow)

    # --- batch ----------------------------------------------------------------------------

    def batch(self, console: Console, interactive: bool) -> int:
        from .source import plan_batch

        started = time.monotonic()
        ranges = plan_batch(self.source)
        planned = sum(r.size for r in ranges)
        export_id = _export_id(ranges)
        manifests = _load_manifests(self.out)
        replaced = _replaced_exports(manifests, ranges, export_id)
        if planned == 0:
            if interactive:
                console.print("Nothing to export: the requested ranges hold no records.")
            return EXIT_OK

        staging = self.out / f"_staging-{export_id}-{uuid.uuid4().hex[:8]}"
        spark, log_path, created = self._session()
        try:
            result = self._write_batch(spark, ranges, staging, planned, console, interactive)
            files = _publish(staging, self.out, export_id)
        except KeyboardInterrupt:
            spark.sparkContext.cancelAllJobs()
            shutil.rmtree(staging, ignore_errors=True)
            return EXIT_INTERRUPTED
        except BaseException as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise self._failure(exc, log_path) from None
        finally:
            if created:
                spark.stop()
        elapsed = time.monotonic() - started
        manifest = {
            "export_id": export_id,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "bootstrap_servers": self.source.bootstrap_servers,
            "topics": list(self.args.topic),
            "format": self.args.format,
            "partition_by": list(self.partition_by),
            "ranges": [{"topic": r.topic, "partition": r.partition, "start": r.start,
                        "end": r.end} for r in ranges],
            "starting_offsets": json.loads(offsets_json({r.tp: r.start for r in ranges})),
            "ending_offsets": json.loads(offsets_json({r.tp: r.end for r in ranges})),
            "records": result["records"],
            "payload_bytes": result["bytes"],
            "files": files,
            "replaced": sorted(m["export_id"] for m in replaced),
        }
        _write_manifest(self.out, manifest)
        _remove_exports(self.out, replaced, keep_id=export_id, keep_files=files)
        if interactive:
            _summary(console, ranges, manifest, self.out, elapsed)
        return EXIT_OK

    def _write_batch(self, spark: Any, ranges: list[OffsetRange], staging: Path, planned: int,
                     console: Console, interactive: bool) -> dict[str, int]:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        from .source import register

        register(spark)
        outcome: dict[str, Any] = {}
        with ProgressListener() as listener:
            options = dict(self.options)
            options["startingOffsets"] = offsets_json({r.tp: r.start for r in ranges})
            options["endingOffsets"] = offsets_json({r.tp: r.end for r in ranges})
            options[PROGRESS_OPTION] = f"{listener.address[0]}:{listener.address[1]}"
            # Two tasks per core: partitions of unequal size still keep every core busy.
            options.setdefault("minPartitions", str(2 * spark.sparkContext.defaultParallelism))
            df = spark.read.format("trio_broker").options(**options).load()
            observation = Observation("export")
            payload = (F.coalesce(F.length("key"), F.lit(0))
                       + F.coalesce(F.length("value"), F.lit(0)))
            df = df.observe(observation, F.count(F.lit(1)).alias("records"),
                            F.coalesce(F.sum(payload), F.lit(0)).alias("bytes"))
            writer = _for_format(df, self.args.format).write.mode("overwrite").options(
                **_write_options(self.args.format))
            if self.partition_by:
                writer = writer.partitionBy(*self.partition_by)

            def write() -> None:
                try:
                    writer.format(self.args.format).save(str(staging))
                    outcome["metrics"] = observation.get
                except BaseException as exc:  # handed to the main thread
                    outcome["error"] = exc

            thread = threading.Thread(target=write, name="export-write", daemon=True)
            thread.start()
            if interactive:
                _show_progress(console, thread, listener, planned)
            else:
                while thread.is_alive():
                    thread.join(0.2)
        if "error" in outcome:
            raise outcome["error"]
        metrics = outcome["metrics"]
        return {"records": int(metrics["records"]), "bytes": int(metrics["bytes"])}

    # --- follow ---------------------------------------------------------------------------

    def follow(self, console: Console, interactive: bool) -> int:
        with self.source.client() as client:
            subscribed_partitions(client, self.source)  # unknown topic / no broker: fail now
        checkpoint = Path(self.args.checkpoint).resolve() if self.args.checkpoint \
            else self.out / "_checkpoint"
        spark, log_path, created = self._session()
        stop = threading.Event()
        previous = _install_stop_handlers(stop)
        try:
            from .source import register

            register(spark)
            df = spark.readStream.format("trio_broker").options(**self.options).load()
            writer = (_for_format(df, self.args.format).writeStream.format(self.args.format)
                      .options(**_write_options(self.args.format))
                      .option("path", str(self.out))
                      .option("checkpointLocation", str(checkpoint))
                      .trigger(processingTime=self.args.trigger_interval))
            if self.partition_by:
                writer = writer.partitionBy(*self.partition_by)
            query = writer.start()
            records = _watch(console, interactive, query, stop)
            query.stop()
            failure = query.exception()
            if failure is not None:
                raise self._failure(failure, log_path)
        except _SparkFailure:
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
        return EXIT_OK

    # --- helpers --------------------------------------------------------------------------

    def _session(self) -> tuple[Any, Path | None, bool]:
        from pyspark import SparkContext

        from ._session import build_session

        created = SparkContext._active_spark_context is None  # type: ignore[attr-defined]
        spark, log_path = build_session(master=self.args.master, app_name="trio-broker export")
        return spark, log_path, created

    def _failure(self, exc: BaseException, log_path: Path | None) -> _SparkFailure:
        from .source import user_message

        message = user_message(exc)
        if message is None:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            where = f"Spark's log: {log_path}" if log_path else "see Spark's log"
            message = f"{type(exc).__name__}: {first} ({where})"
        return _SparkFailure(message)


def _partition_columns(text: str | None) -> tuple[str, ...]:
    if not text:
        return ()
    columns = tuple(c.strip() for c in text.split(",") if c.strip())
    bad = [c for c in columns if c not in PARTITION_COLUMNS]
    if bad:
        raise SourceOptionError(f"--partition-by takes {', '.join(PARTITION_COLUMNS)}; "
                                f"not {', '.join(bad)}")
    return columns


#: A header row, and quotes inside fields doubled as RFC 4180 (and Python's csv) expect,
#: rather than Spark's default backslash escapes.
CSV_WRITE_OPTIONS = {"header": "true", "escape": '"'}


def _write_options(fmt: str) -> dict[str, str]:
    return {"parquet": PARQUET_WRITE_OPTIONS, "csv": CSV_WRITE_OPTIONS}.get(fmt, {}).copy()


def _for_format(df: Any, fmt: str) -> Any:
    """CSV has no binary or nested columns: keys and values become text, headers JSON."""
    if fmt != "csv":
        return df
    from pyspark.sql import functions as F

    return df.select(
        F.col("key").cast("string").alias("key"), F.col("value").cast("string").alias("value"),
        "topic", "partition", "offset", "timestamp", "timestampType",
        F.to_json("headers").alias("headers"))


def _export_id(ranges: Iterable[OffsetRange]) -> str:
    canonical = json.dumps(sorted((r.topic, r.partition, r.start, r.end) for r in ranges))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _load_manifests(out: Path) -> list[dict[str, Any]]:
    directory = out / MANIFEST_DIR
    if not directory.is_dir():
        return []
    manifests = []
    for path in sorted(directory.glob("*.json")):
        try:
            manifests.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            raise SourceOptionError(f"cannot read export manifest {path}: {exc}") from None
    return manifests


def _spans(manifest: Mapping[str, Any]) -> dict[tuple[str, int], tuple[int, int]]:
    return {(r["topic"], int(r["partition"])): (int(r["start"]), int(r["end"]))
            for r in manifest["ranges"] if int(r["end"]) > int(r["start"])}


def _replaced_exports(manifests: list[dict[str, Any]], ranges: list[OffsetRange],
                      export_id: str) -> list[dict[str, Any]]:
    """Earlier exports this one supersedes; a partial overlap is refused."""
    new = {(r.topic, r.partition): (r.start, r.end) for r in ranges if r.size}
    replaced = []
    for manifest in manifests:
        old = _spans(manifest)
        contained = all(tp in new and new[tp][0] <= lo and hi <= new[tp][1]
                        for tp, (lo, hi) in old.items())
        if contained or manifest.get("export_id") == export_id:
            replaced.append(manifest)
            continue
        clashes = [f"{t}-{p} {max(lo, new[t, p][0])}..{min(hi, new[t, p][1]) - 1}"
                   for (t, p), (lo, hi) in old.items()
                   if (t, p) in new and max(lo, new[t, p][0]) < min(hi, new[t, p][1])]
        if clashes:
            ends = offsets_json({_tp(t, p): hi for (t, p), (lo, hi) in old.items()})
            raise SourceOptionError(
                f"these offsets were already exported by export {manifest['export_id']} and "
                f"would be duplicated: {', '.join(clashes)}. Export a range that contains it "
                f"(to replace it) or continue after it with --starting-offsets '{ends}'")
    return replaced


def _tp(topic: str, partition: int) -> Any:
    from ._wire import TopicPartition

    return TopicPartition(topic, partition)


def _publish(staging: Path, out: Path, export_id: str) -> list[str]:
    """Move the staged data files into ``out`` under the export's name; returns them."""
    prefix = f"export-{export_id}-"
    published = []
    for path in sorted(staging.rglob("*")):
        rel = path.relative_to(staging)
        if not path.is_file() or any(part.startswith(("_", ".")) for part in rel.parts):
            continue
        target = out / rel.parent / (prefix + rel.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
        published.append(str(target.relative_to(out)))
    shutil.rmtree(staging, ignore_errors=True)
    return published


def _write_manifest(out: Path, manifest: Mapping[str, Any]) -> None:
    directory = out / MANIFEST_DIR
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{manifest['export_id']}.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmp, directory / f"{manifest['export_id']}.json")


def _remove_exports(out: Path, replaced: list[dict[str, Any]], *, keep_id: str,
                    keep_files: Iterable[str]) -> None:
    """Delete the files of superseded exports (an earlier run of this one included)."""
    keep = set(keep_files)
    for manifest in replaced:
        for name in manifest.get("files", []):
            if name not in keep:
                (out / name).unlink(missing_ok=True)
        if manifest["export_id"] != keep_id:
            (out / MANIFEST_DIR / f"{manifest['export_id']}.json").unlink(missing_ok=True)


# --- terminal output ---------------------------------------------------------------------------

def _show_progress(console: Console, thread: threading.Thread, listener: ProgressListener,
                   planned: int) -> None:
    columns = (
        TextColumn("[bold]exporting"), BarColumn(), TaskProgressColumn(),
        TextColumn("{task.fields[records]}"), TextColumn("{task.fields[bytes]}"),
        TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
    )
    started = time.monotonic()
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("export", total=planned, records="", bytes="", rate="")
        while thread.is_alive():
            thread.join(0.2)
            done = min(listener.records, planned)
            estimate = listener.bytes * planned / done if done else 0
            rate = done / max(time.monotonic() - started, 1e-9)
            bar.update(task, completed=done,
                       records=f"{done:,}/{planned:,} records",
                       bytes=f"{_size(listener.bytes)} of ~{_size(estimate)}",
                       rate=f"{rate:,.0f} rec/s")


def _summary(console: Console, ranges: list[OffsetRange], manifest: Mapping[str, Any],
             out: Path, elapsed_s: float) -> None:
    table = Table(title=f"Exported to {out}", title_justify="left")
    for name in ("topic", "partition", "from offset", "to offset", "offsets"):
        table.add_column(name, justify="left" if name == "topic" else "right")
    for r in ranges:
        last = f"{r.end - 1:,}" if r.size else "-"
        table.add_row(r.topic, str(r.partition), f"{r.start:,}", last, f"{r.size:,}")
    console.print(table)
    records = manifest["records"]
    console.print(
        f"{records:,} records, {_size(manifest['payload_bytes'])} of keys and values, "
        f"{len(manifest['files'])} {manifest['format']} files in {elapsed_s:.1f} s "
        f"({records / max(elapsed_s, 1e-9):,.0f} records/s); manifest "
        f"{MANIFEST_DIR}/{manifest['export_id']}.json"
        + (f"; replaced {len(manifest['replaced'])} earlier export(s)"
           if [r for r in manifest["replaced"] if r != manifest["export_id"]] else ""),
        highlight=False)


def _watch(console: Console, interactive: bool, query: Any, stop: threading.Event) -> int:
    """Wait for ``stop`` (or the query's end), showing batches as they commit; records seen."""
    counted: dict[int, int] = {}
    status = console.status("following", spinner="dots") if interactive else None
    if status is not None:
        status.start()
    try:
        while not stop.is_set() and query.isActive:
            stop.wait(0.5)
            for progress in query.recentProgress:
                counted[progress["batchId"]] = progress["numInputRows"]
            if status is not None:
                status.update(f"following: {sum(counted.values()):,} records in "
                              f"{len(counted)} batches; Ctrl-C stops")
    finally:
        if status is not None:
            status.stop()
    return sum(counted.values())


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


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} TB"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
