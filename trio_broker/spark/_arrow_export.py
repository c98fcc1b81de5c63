"""A batch Parquet export whose records never enter Spark's JVM: each task writes its own file.

Why: through Spark's Python data source every record crosses into the JVM twice over, Arrow
batches turned into Spark rows and those rows written by Spark's Parquet writer; that costs the
JVM more than writing the same rows from memory does, and keeps the export below Spark's own
Parquet ceiling (docs/benchmarks.md, "Spark: export, sink and the end-to-end export"). The rows
are already Arrow batches in the
task's Python process, so pyarrow writes them there. Spark still plans and distributes the
work (one task per offset range, on the executors, locally or on a cluster); a task returns
only its file's name and counts.

The files are what Spark's writer makes of the same rows: Spark's Kafka-source columns and
types (timestamps as INT64 TIMESTAMP_MICROS, UTC), snappy compression, no dictionary or
statistics for ``value`` (``job.PARQUET_WRITE_OPTIONS``), ``col=value`` directories for the
partition columns (which then leave the files, as Spark's ``partitionBy`` does).

Commit, as Spark's file committer does it: a task attempt writes under
``<staging>/_temporary/<attempt>/``; only the attempts whose results reach the driver (one per
task; failed or duplicate attempts never do) are moved into ``<staging>`` when every task has
succeeded, and ``_SUCCESS`` is written last. The export then publishes ``<staging>`` as it does
for Spark's writers (``manifest.publish``); a failed job leaves only ``<staging>``, which the
export removes.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ._decode import arrow_schema
from ._formats import ColumnFormat
from ._options import OffsetRange, SourceOptions
from .source import _ReadSettings, read_range

#: Rows a task gathers before writing a row group: row groups of about 16 MB of these records,
#: rather than one per fetch response (a few thousand rows).
ROW_GROUP_ROWS = 131_072
#: pyarrow's codec name for Spark's default (``spark.sql.parquet.compression.codec``).
COMPRESSION = "snappy"
_TEMPORARY = "_temporary"


@dataclass(frozen=True)
class ParquetTask:
    """One offset range to one Parquet file (what the driver ships to an executor)."""

    index: int
    range: OffsetRange
    settings: _ReadSettings
    staging: str
    job_id: str
    partition_by: tuple[str, ...]
    row_group_rows: int


@dataclass(frozen=True)
class TaskResult:
    """What a task attempt returns: its file (relative to the staging directory) and counts."""

    attempt: str
    file: str | None  # None: the range held no records to write
    records: int
    payload_bytes: int
    file_bytes: int
    read_cpu_s: float  # fetching and decoding
    write_cpu_s: float  # encoding, compressing and writing Parquet


def plan_tasks(ranges: Sequence[OffsetRange], opts: SourceOptions, *, staging: Path,
               partition_by: tuple[str, ...],
               progress_address: tuple[str, int] | None,
               formats: tuple[ColumnFormat, ...] = ()) -> list[ParquetTask]:
    """One task per range (already split as the source would split them)."""
    settings = replace(_ReadSettings.of(opts, formats), progress_address=progress_address)
    job_id = str(uuid.uuid4())
    return [ParquetTask(i, r, settings, str(staging), job_id, partition_by, ROW_GROUP_ROWS)
            for i, r in enumerate(ranges)]


def file_schema(include_headers: bool, partition_by: Iterable[str],
                formats: Sequence[ColumnFormat] = ()) -> pa.Schema:
    """The columns inside each file: the source's (``key``/``value`` of their format's type),
    less the directory (partition) columns."""
    schema = arrow_schema(include_headers)
    for fmt in formats:
        schema = schema.set(schema.get_field_index(fmt.column),
                            pa.field(fmt.column, fmt.arrow_type))
    drop = set(partition_by)
    return pa.schema([f for f in schema if f.name not in drop])


def writer_options(schema: pa.Schema) -> dict[str, Any]:
    """``pq.ParquetWriter`` options matching the export's Spark writer options."""
    leaves = [path for path in _leaf_paths(schema) if path != "value"]
    return {"compression": COMPRESSION, "use_dictionary": leaves, "write_statistics": leaves}


def _leaf_paths(schema: pa.Schema) -> Iterator[str]:
    """Parquet column paths, as the writer names them (``headers.list.element.key``)."""
    for f in schema:
        if pa.types.is_list(f.type) and pa.types.is_struct(f.type.value_type):
            for leaf in f.type.value_type:
                yield f"{f.name}.list.element.{leaf.name}"
        else:
            yield f.name


def relative_dir(task: ParquetTask) -> str:
    """``topic=<t>/partition=<p>`` for the partition columns, in ``partition_by`` order."""
    values = {"topic": task.range.topic, "partition": str(task.range.partition)}
    return "/".join(f"{column}={values[column]}" for column in task.partition_by)


def file_name(task: ParquetTask) -> str:
    return f"part-{task.index:05d}-{task.job_id}-c000.{COMPRESSION}.parquet"


def write_task(task: ParquetTask) -> TaskResult:
    """Executor side: read ``task.range`` from its leader and write it as one Parquet file."""
    attempt = uuid.uuid4().hex
    rel = os.path.join(relative_dir(task), file_name(task))
    path = os.path.join(task.staging, _TEMPORARY, attempt, rel)
    schema = file_schema(task.settings.include_headers, task.partition_by,
                         task.settings.formats)
    columns = schema.names
    records = payload_bytes = 0
    read_cpu = write_cpu = 0.0
    writer: pq.ParquetWriter | None = None
    pending: list[pa.RecordBatch] = []
    pending_rows = 0

    def flush() -> None:
        nonlocal writer, pending_rows
        if writer is None:
            # mkdir, not makedirs, for the attempt: once the driver removed a failed job's
            # staging directory, a straggling attempt fails rather than recreate it.
            os.mkdir(os.path.join(task.staging, _TEMPORARY, attempt))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            writer = pq.ParquetWriter(path, schema, **writer_options(schema))
        writer.write_table(pa.Table.from_batches(pending, schema=schema),
                           row_group_size=pending_rows)
        pending.clear()
        pending_rows = 0

    try:
        batches = read_range(task.settings, task.range)
        mark = time.process_time()
        for batch in batches:
            pending.append(batch.select(columns))
            pending_rows += batch.num_rows
            records += batch.num_rows
            payload_bytes += _payload_bytes(batch)
            now = time.process_time()
            read_cpu += now - mark
            mark = now
            if pending_rows >= task.row_group_rows:
                flush()
                now = time.process_time()
                write_cpu += now - mark
                mark = now
        if pending:
            flush()
        if writer is not None:
            writer.close()
            writer = None
        write_cpu += time.process_time() - mark
    except BaseException:
        if writer is not None:
            writer.close()
        shutil.rmtree(os.path.join(task.staging, _TEMPORARY, attempt), ignore_errors=True)
        raise
    if records == 0:
        return TaskResult(attempt, None, 0, 0, 0, read_cpu, write_cpu)
    return TaskResult(attempt, rel, records, payload_bytes, os.path.getsize(path), read_cpu,
                      write_cpu)


def _payload_bytes(batch: pa.RecordBatch) -> int:
    """Key and value bytes, as the Spark path counts them (``length(key) + length(value)``);
    a column decoded by its ``key.format`` / ``value.format`` into a struct has no byte length
    and is left out, as in the Spark path."""
    return sum(int(pc.sum(pc.binary_length(column)).as_py() or 0)
               for column in (batch.column("key"), batch.column("value"))
               if pa.types.is_binary(column.type) or pa.types.is_string(column.type))


def commit(staging: Path, results: Sequence[TaskResult], *, include_headers: bool,
           partition_by: tuple[str, ...], formats: Sequence[ColumnFormat] = ()) -> None:
    """Driver side, after every task succeeded: the winning attempts' files into ``staging``,
    then ``_SUCCESS``. With no records at all, one empty file keeps the schema readable (Spark's
    writer does the same)."""
    for result in results:
        if result.file is None:
            continue
        target = staging / result.file
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / _TEMPORARY / result.attempt / result.file, target)
    if not any(result.file for result in results) and not partition_by:
        schema = file_schema(include_headers, partition_by, formats)
        pq.write_table(schema.empty_table(), staging / f"part-00000-{uuid.uuid4()}-c000."
                       f"{COMPRESSION}.parquet", **writer_options(schema))
    shutil.rmtree(staging / _TEMPORARY, ignore_errors=True)
    (staging / "_SUCCESS").touch()


def run(spark: Any, tasks: Sequence[ParquetTask]) -> list[TaskResult]:
    """The Spark job: one task per ``ParquetTask``, results (small) collected on the driver."""
    if not tasks:
        return []
    sc = spark.sparkContext
    os.makedirs(os.path.join(tasks[0].staging, _TEMPORARY), exist_ok=True)
    return list(sc.parallelize(list(tasks), len(tasks)).map(write_task).collect())
