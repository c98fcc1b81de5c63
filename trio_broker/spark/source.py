"""``spark.read.format("trio_broker")``: Kafka-protocol topics as DataFrames, batch or streaming.

Why a Python data source rather than Spark's own Kafka source: that one needs the JVM
``spark-sql-kafka`` connector jar on every classpath; this one is plain Python, speaks the Kafka
protocol itself, and so reads trio-broker and any Kafka-compatible cluster alike.

Where the work happens:
- driver (planning): options are checked, partitions and offsets resolved with Metadata and
  ListOffsets, and every range checked against the log (retention, log end), so a mistake is one
  clear error before any task starts;
- executors (``read``): each input partition is one ``[start, end)`` range of one topic-partition,
  fetched from the partition leader and decoded straight to Arrow (``_decode``).

With ``value.format`` / ``key.format`` avro, protobuf or json_schema (``_formats``), the driver
maps the subject's latest schema to the column's Spark type and each task decodes the framed
values into it after decoding the fetch.

Streaming offsets are Spark's Kafka JSON, ``{"topic": {"partition": next offset}}``; Spark
checkpoints them, so a restarted query resumes exactly where the last committed batch ended.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from ..client.blocking import (
    EARLIEST,
    LATEST,
    BlockingClient,
    TopicPartition,
    error_name,
    next_fetch_offset,
)
from ..client.core import errors
from ..client.core.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    error_for,
)
from ..protocol.errors import ErrorCode
from ._codecs import SerializationError
from ._decode import decode_fetched, schema_ddl
from ._formats import (
    ColumnFormat,
    decode_batch,
    parse_format_options,
    resolve_read,
    source_columns,
)
from ._options import (
    DATA_LOSS_HINT,
    OffsetRange,
    SourceOptionError,
    SourceOptions,
    offsets_dict,
    parse_offsets_dict,
    parse_options,
)
from ._planning import (
    check_range,
    ending_offsets,
    rate_limit,
    split_ranges,
    starting_offsets,
    subscribed_partitions,
)
from ._progress import ProgressSender
from ._registry_client import SchemaRegistryError
from ._schema_types import UnmappableSchema
from .sink import SinkError, writer_for

try:  # read limits arrived in pyspark 4.2; older versions call latestOffset() without them
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        ReadMinRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - exercised only on pyspark 4.0/4.1
    ReadAllAvailable = ReadLimit = ReadMaxRows = ReadMinRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

LOGGER = logging.getLogger(__name__)

FORMAT_NAME = "trio_broker"


@dataclass(frozen=True)
class _ReadSettings:
    """What an executor needs besides the range (picklable, small)."""

    bootstrap_servers: str
    request_timeout_ms: int
    client_id: str
    max_partition_fetch_bytes: int
    include_headers: bool
    fail_on_data_loss: bool
    progress_address: tuple[str, int] | None
    security: tuple[tuple[str, str], ...]
    #: ``key.format`` / ``value.format`` other than binary, resolved by the driver
    formats: tuple[ColumnFormat, ...] = ()

    @classmethod
    def of(cls, opts: SourceOptions, formats: tuple[ColumnFormat, ...] = ()) -> _ReadSettings:
        return cls(opts.bootstrap_servers, opts.request_timeout_ms, opts.client_id,
                   opts.max_partition_fetch_bytes, opts.include_headers, opts.fail_on_data_loss,
                   opts.progress_address, opts.security, formats)


class KafkaInputPartition(InputPartition):
    """One ``[start, end)`` offset range of one topic-partition: one Spark task."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.range = offset_range


class TrioBrokerDataSource(DataSource):
    """Options and columns as Spark's Kafka source: existing jobs change only the format name."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> str | StructType:
        # Called at load(): catch what is wrong for both batch and streaming reads here, before
        # Spark plans anything; the mode-specific rules are checked by reader()/streamReader().
        try:
            opts = parse_options(self.options, streaming=False)
        except SourceOptionError as batch_error:
            try:
                opts = parse_options(self.options, streaming=True)
            except SourceOptionError:
                raise batch_error from None
        formats = read_formats(self.options, opts)
        if not formats:
            return schema_ddl(opts.include_headers)
        return source_columns(opts.include_headers, formats)

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_options(self.options, streaming=False)
        return KafkaBatchReader(opts, read_formats(self.options, opts))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = parse_options(self.options, streaming=True)
        return KafkaStreamReader(opts, read_formats(self.options, opts))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return writer_for(self.options, schema, overwrite, streaming=False)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return writer_for(self.options, schema, overwrite, streaming=True)


def read_formats(options: Any, opts: SourceOptions) -> tuple[ColumnFormat, ...]:
    """The formatted columns' types, from the registry (``_formats``)."""
    formats = parse_format_options(options)
    if not formats:
        return ()
    topics = opts.subscribe or tuple(sorted({tp.topic for tp in opts.assign or ()}))
    return resolve_read(formats, topics)


def register(spark: Any) -> None:
    """Make ``spark.read.format("trio_broker")`` / ``readStream.format(...)`` available."""
    spark.dataSource.register(TrioBrokerDataSource)


# --- batch -------------------------------------------------------------------------------------

def plan_batch(opts: SourceOptions) -> list[OffsetRange]:
    """The checked, unsplit offset ranges a batch query over ``opts`` reads (driver side)."""
    with opts.client() as client:
        tps = subscribed_partitions(client, opts)
        if not tps:
            return []
        earliest = client.list_offsets({tp: EARLIEST for tp in tps})
        latest = client.list_offsets({tp: LATEST for tp in tps})
        starts = starting_offsets(client, tps, opts)
        ends = ending_offsets(client, tps, opts)
        return check_range(client, starts, ends, fail_on_data_loss=opts.fail_on_data_loss,
                           earliest=earliest, latest=latest)


class KafkaBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions, formats: tuple[ColumnFormat, ...] = ()) -> None:
        self._opts = opts
        self._settings = _ReadSettings.of(opts, formats)

    def partitions(self) -> list[InputPartition]:
        ranges = split_ranges(plan_batch(self._opts), min_partitions=self._opts.min_partitions,
                              max_records=self._opts.max_records_per_partition)
        LOGGER.info("reading %d offset ranges", len(ranges))
        return [KafkaInputPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaInputPartition):
            return iter(())  # Spark plans one empty InputPartition(None) when there is nothing
        return read_range(self._settings, partition.range)


# --- streaming ---------------------------------------------------------------------------------

class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """Micro-batches of offset ranges; the offsets Spark checkpoints are Spark's Kafka JSON.

    How much a micro-batch takes, as Spark's Kafka source decides it: everything available, at
    most ``maxOffsetsPerTrigger`` (shared in proportion to each partition's backlog), and with
    ``minOffsetsPerTrigger`` nothing until that many offsets are waiting or ``maxTriggerDelay``
    passed since the last micro-batch (the first one never waits). With
    ``Trigger.AvailableNow`` the query reads up to the offsets current when it started and
    stops; ``minOffsetsPerTrigger`` does not hold it back.
    """

    def __init__(self, opts: SourceOptions, formats: tuple[ColumnFormat, ...] = ()) -> None:
        self._opts = opts
        self._settings = _ReadSettings.of(opts, formats)
        self._client: BlockingClient | None = None
        self._last_end: dict[TopicPartition, int] | None = None
        self._available_now: dict[TopicPartition, int] | None = None
        self._last_trigger_s: float | None = None  # when the last micro-batch was let through

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client"] = None  # sockets stay in the process that opened them
        return state

    def _get_client(self) -> BlockingClient:
        if self._client is None:
            self._client = self._opts.client()
        return self._client

    def _reset_on_failure(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def initialOffset(self) -> dict:
        try:
            client = self._get_client()
            tps = subscribed_partitions(client, self._opts)
            return offsets_dict(starting_offsets(client, tps, self._opts))
        except BaseException:
            self._reset_on_failure()
            raise

    def getDefaultReadLimit(self) -> Any:
        if ReadAllAvailable is None:
            return None
        if self._opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self._opts.max_offsets_per_trigger)
        if self._opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self._opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        try:
            return self._latest(start, limit)
        except BaseException:
            self._reset_on_failure()
            raise

    def _latest(self, start: dict | None, limit: Any) -> dict:
        client = self._get_client()
        if start is not None:
            starts = parse_offsets_dict(start)
        elif self._last_end is not None:
            starts = dict(self._last_end)
        else:
            starts = parse_offsets_dict(self.initialOffset())
        tps = subscribed_partitions(client, self._opts)
        latest = client.list_offsets({tp: LATEST for tp in tps})
        new = [tp for tp in tps if tp not in starts]
        if new:  # partitions that appeared since the query started are read from the beginning
            starts.update(client.list_offsets({tp: EARLIEST for tp in new}))
        for tp, offset in starts.items():
            latest.setdefault(tp, offset)  # a partition we cannot see any more stays where it was
        if self._available_now is not None:
            for tp, cap in self._available_now.items():
                if tp in latest:
                    latest[tp] = min(latest[tp], max(cap, starts.get(tp, cap)))
        if ReadAllAvailable is not None and isinstance(limit, ReadAllAvailable):
            return offsets_dict(latest)  # Trigger.Once: all of it, whatever the options say
        min_rows, max_rows = self._limits(limit)
        if min_rows is not None and self._available_now is None and self._delay(
                min_rows, starts, latest):
            return offsets_dict(starts)  # no micro-batch yet
        if max_rows is not None:
            latest = rate_limit(starts, latest, max_rows)
        return offsets_dict(latest)

    def _limits(self, limit: Any) -> tuple[int | None, int | None]:
        """(minimum, maximum) offsets for this micro-batch."""
        opts = self._opts
        if limit is None:  # pyspark < 4.2: the options are the limits
            return opts.min_offsets_per_trigger, opts.max_offsets_per_trigger
        if ReadMinRows is not None and isinstance(limit, ReadMinRows):
            return int(limit.min_rows), None
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            return opts.min_offsets_per_trigger, int(limit.max_rows)
        return None, None

    def _delay(self, min_rows: int, starts: dict[TopicPartition, int],
               latest: dict[TopicPartition, int]) -> bool:
        """Whether to wait for more records (Spark's ``delayBatch``)."""
        now = time.monotonic()
        if self._last_trigger_s is None or (
                (now - self._last_trigger_s) * 1000 >= self._opts.max_trigger_delay_ms):
            self._last_trigger_s = now
            return False
        waiting = sum(max(0, end - starts.get(tp, end)) for tp, end in latest.items())
        if waiting < min_rows:
            return True
        self._last_trigger_s = now
        return False

    def prepareForTriggerAvailableNow(self) -> None:
        client = self._get_client()
        tps = subscribed_partitions(client, self._opts)
        self._available_now = client.list_offsets({tp: LATEST for tp in tps})

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        try:
            return self._partitions(start, end)
        except BaseException:
            self._reset_on_failure()
            raise

    def _partitions(self, start: dict, end: dict) -> list[InputPartition]:
        client = self._get_client()
        starts = parse_offsets_dict(start)
        ends = parse_offsets_dict(end)
        self._last_end = dict(ends)
        new = [tp for tp in ends if tp not in starts]
        if new:
            starts.update(client.list_offsets({tp: EARLIEST for tp in new}))
        moving = {tp: starts[tp] for tp in ends if ends[tp] > starts[tp]}
        for tp in ends:
            if ends[tp] < starts[tp]:
                message = (f"{tp} went back from offset {starts[tp]} to {ends[tp]}: the topic "
                           f"was deleted and recreated, or its log truncated. {DATA_LOSS_HINT}")
                if self._opts.fail_on_data_loss:
                    raise OffsetOutOfRangeError(message)
                LOGGER.warning("%s", message)
        if not moving:
            return []
        ranges = check_range(client, moving, {tp: ends[tp] for tp in moving},
                             fail_on_data_loss=self._opts.fail_on_data_loss)
        ranges = split_ranges(ranges, min_partitions=self._opts.min_partitions,
                              max_records=self._opts.max_records_per_partition)
        return [KafkaInputPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaInputPartition):
            return iter(())  # Spark plans one empty InputPartition(None) when there is nothing
        return read_range(self._settings, partition.range)

    def commit(self, end: dict) -> None:
        self._last_end = parse_offsets_dict(end)

    def stop(self) -> None:
        self._reset_on_failure()


# --- executor side -----------------------------------------------------------------------------

def read_range(settings: _ReadSettings, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Fetch and decode ``offset_range`` from its leader, one Arrow batch per fetch response.

    The next Fetch is sent before the current response is decoded, so the broker reads and sends
    while this process decodes.
    """
    tp = offset_range.tp
    end = offset_range.end
    offset = offset_range.start
    progress = ProgressSender(settings.progress_address)
    max_bytes = settings.max_partition_fetch_bytes
    client = BlockingClient(settings.bootstrap_servers,
                            timeout_s=settings.request_timeout_ms / 1000,
                            client_id=settings.client_id, config=dict(settings.security))
    try:
        pending = None
        while offset < end:
            if pending is not None:
                try:
                    result = client.receive_fetch(pending)
                except (KafkaConnectionError, KafkaTimeoutError):  # fetch() retries those
                    result = client.fetch(tp, offset, max_bytes=max_bytes)
                pending = None
            else:
                result = client.fetch(tp, offset, max_bytes=max_bytes)
            if result.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                offset = _after_out_of_range(client, tp, offset, end, settings.fail_on_data_loss)
                continue
            if result.error:
                raise error_for(result.error, f"Fetch for {tp} at offset {offset} failed: "
                                f"{error_name(result.error)}")
            next_offset = next_fetch_offset(result.records, offset)
            if next_offset <= offset:
                if result.high_watermark <= offset:
                    message = (f"{tp} ends at offset {result.high_watermark}, but offsets up to "
                               f"{end - 1} were planned: the log was truncated. {DATA_LOSS_HINT}")
                    if settings.fail_on_data_loss:
                        raise OffsetOutOfRangeError(message)
                    LOGGER.warning("%s", message)
                    break
                # A batch larger than the fetch size from a broker that does not return it
                # whole anyway (pre KIP-74): ask for more.
                max_bytes = min(max_bytes * 2, 1 << 30)
                continue
            if next_offset < end:
                try:
                    pending = client.send_fetch(tp, next_offset, max_bytes=max_bytes)
                except (KafkaConnectionError, KafkaTimeoutError):
                    pending = None  # the next round's fetch() reconnects and retries
            chunk = decode_fetched(result.records, topic=tp.topic, partition=tp.partition,
                                   start=offset, end=end,
                                   include_headers=settings.include_headers)
            offset = next_offset
            if chunk.batch is not None and chunk.batch.num_rows:
                progress.add(chunk.batch.num_rows, chunk.payload_bytes)
                yield (decode_batch(settings.formats, chunk.batch, str(tp)) if settings.formats
                       else chunk.batch)
    finally:
        progress.close()
        client.close()


def _after_out_of_range(client: BlockingClient, tp: TopicPartition, offset: int, end: int,
                        fail_on_data_loss: bool) -> int:
    """Where to continue after OFFSET_OUT_OF_RANGE (retention ran while the task was reading)."""
    earliest = client.list_offsets({tp: EARLIEST})[tp]
    latest = client.list_offsets({tp: LATEST})[tp]
    if offset < earliest:
        message = (f"offsets {offset}..{min(end, earliest) - 1} of {tp} were deleted by retention "
                   f"while being read (the log now starts at {earliest}). {DATA_LOSS_HINT}")
        if fail_on_data_loss:
            raise OffsetOutOfRangeError(message)
        LOGGER.warning("%s", message)
        return min(earliest, end)
    message = (f"offset {offset} of {tp} is past the end of the log ({latest}). {DATA_LOSS_HINT}")
    if fail_on_data_loss:
        raise OffsetOutOfRangeError(message)
    LOGGER.warning("%s", message)
    return end


#: the errors the source raises: the client's (one per Kafka error code, connection and
#: timeout errors, bad settings) and bad options
_ERROR_NAMES = "|".join(sorted(
    {name for name in errors.__all__ if isinstance(cls := getattr(errors, name), type)
     and issubclass(cls, KafkaError | errors.ConfigError)}
    | {SourceOptionError.__name__, SinkError.__name__, SerializationError.__name__,
       SchemaRegistryError.__name__, UnmappableSchema.__name__}))


def user_message(exc: BaseException) -> str | None:
    """The message of the trio-broker source error buried in a Spark exception, if any.

    Spark wraps errors raised in Python data sources into its own exceptions, whose text holds
    the Python traceback (and, for task failures, JVM frames); callers show just this line.
    """
    text = str(exc)
    found = re.findall(rf"(?:^|\.)({_ERROR_NAMES}): (.+)", text, flags=re.MULTILINE)
    if not found:
        return None
    return found[-1][1].strip()


__all__ = [
    "FORMAT_NAME",
    "KafkaBatchReader",
    "KafkaInputPartition",
    "KafkaStreamReader",
    "TrioBrokerDataSource",
    "plan_batch",
    "read_formats",
    "read_range",
    "register",
    "user_message",
]
