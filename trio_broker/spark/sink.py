"""``df.write.format("trio_broker")``: DataFrames to topics, as Spark's Kafka sink writes them.

Columns (Spark's Kafka sink's, matched by exact name; others are ignored):

    value      string or binary   required; null writes a tombstone
    key        string or binary   null: no key
    topic      string             unless the ``topic`` option is set, which wins over it
    headers    array<struct<key: string, value: binary>>
    partition  int                null: Java's default partitioner (murmur2 of the key, else a
                                  sticky partition)
    timestamp  timestamp or double (seconds)   the record's CreateTime; null: the write's time

Options: ``kafka.bootstrap.servers`` (required), ``topic``, and the Kafka producer's configs as
``kafka.<name>`` (``acks``, ``compression.type``, ``linger.ms``, ``batch.size`` (256 KiB by
default here: ``SINK_PRODUCER_DEFAULTS``), ``enable.idempotence`` (on by default), ...; see
``client.blocking.producer``), TLS and SASL as the source takes them. Other ``kafka.*``
options are ignored, as Kafka's producer ignores unknown configs. With ``value.format`` /
``key.format`` avro, protobuf or json_schema (``_formats``) the column may be of any type the
format maps (a struct, most often): the driver registers its schema, each task frames its rows
with the id before encoding the batches.

Where the work happens: the driver checks the options and the columns (``writer`` and
``streamWriter`` run before Spark plans a task, so a mistake is one clear error and no job);
each task turns the Arrow batches Spark hands it into record batches (``_encode``) and sends
them through one ``BlockingProducer`` to the partition leaders, flushing before it reports
success. Delivery is at least once: a task that fails after some batches were acknowledged is
re-run by Spark and writes them again (so does a streaming micro-batch re-run after a restart;
Spark's checkpoint holds which micro-batches were committed).

Spark refuses the default save mode (ErrorIfExists) for every Python data source before this
code runs: write with ``.mode("append")``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    DoubleType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..client.blocking import (
    PRODUCER_DEFAULTS,
    BlockingClient,
    BlockingProducer,
    ConfigError,
    ProducerSettings,
    RecordBlock,
    TopicPartition,
    parse_bootstrap,
)
from ..client.core.security import SECURITY_DEFAULTS, resolve_security
from ._encode import HEADERS_TYPE, BatchEncoder, SinkRows, StickyPartitioner, murmur2_partitions
from ._formats import (
    ColumnFormat,
    encode_batch,
    formatted_spark_type,
    parse_format_options,
    resolve_write,
)
from ._options import DEFAULT_REQUEST_TIMEOUT_MS, PROGRESS_OPTION
from ._progress import ProgressSender

LOGGER = logging.getLogger(__name__)

#: hidden option: a file the driver's commit writes the write's summary to (``import``)
SUMMARY_OPTION = "trio_broker.summarypath"

#: where the sink's defaults differ from Kafka's producer: a task has its rows at hand, so a
#: larger batch fills at once and costs no latency, while each batch costs the producer and the
#: broker a fixed amount of work whatever its size (the CPU per record at each size:
#: docs/benchmarks.md, "Spark: export, sink and the end-to-end export"); ``kafka.batch.size`` wins
SINK_PRODUCER_DEFAULTS = {"batch.size": "262144"}

_HEADERS_SPARK_TYPE = ArrayType(StructType([StructField("key", StringType()),
                                            StructField("value", BinaryType())]))


class SinkError(ConfigError):
    """The options, the columns or a row cannot be written as Kafka records."""


@dataclass(frozen=True)
class SinkSettings:
    """What a write task needs (picklable, small)."""

    bootstrap_servers: str
    topic: str | None
    producer: tuple[tuple[str, str], ...]
    security: tuple[tuple[str, str], ...]
    client_id: str
    request_timeout_ms: int
    progress_address: tuple[str, int] | None
    summary_path: str | None
    #: ``key.format`` / ``value.format`` (``_formats``): the schemas the columns are written with
    formats: tuple[ColumnFormat, ...] = ()

    def producer_settings(self) -> ProducerSettings:
        return ProducerSettings.from_config(dict(self.producer))

    def client(self) -> BlockingClient:
        return BlockingClient(self.bootstrap_servers, timeout_s=self.request_timeout_ms / 1000,
                              client_id=self.client_id, config=dict(self.security))


def parse_sink_options(options: Mapping[str, str]) -> SinkSettings:
    """The sink's options, checked as Spark's Kafka sink and Kafka's producer check them."""
    opts = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
    servers = opts.get("kafka.bootstrap.servers", "").strip()
    if not servers:
        raise SinkError("Option 'kafka.bootstrap.servers' must be specified for configuring "
                        "Kafka producer")
    if "kafka.key.serializer" in opts:
        raise SinkError("Kafka option 'key.serializer' is not supported as keys are "
                        "serialized with ByteArraySerializer.")
    if "kafka.value.serializer" in opts:
        raise SinkError("Kafka option 'value.serializer' is not supported as value are "
                        "serialized with ByteArraySerializer.")
    producer = tuple(sorted({**SINK_PRODUCER_DEFAULTS, **{
        key: opts[f"kafka.{key}"] for key in PRODUCER_DEFAULTS if f"kafka.{key}" in opts}
    }.items()))
    security = tuple(sorted((key, opts[f"kafka.{key}"]) for key in SECURITY_DEFAULTS
                            if f"kafka.{key}" in opts))
    known = {f"kafka.{k}" for k in (*PRODUCER_DEFAULTS, *SECURITY_DEFAULTS,
                                    "bootstrap.servers", "client.id")}
    ignored = sorted(k for k in opts if k.startswith("kafka.") and k not in known)
    if ignored:
        LOGGER.info("ignoring producer options this sink does not use: %s", ", ".join(ignored))
    try:
        parse_bootstrap(servers)
        resolve_security({**SECURITY_DEFAULTS, **dict(security)}, servers)
        ProducerSettings.from_config(dict(producer))
    except ConfigError as exc:
        raise SinkError(f"{exc} (set as option 'kafka.<key>')") from None
    topic = opts["topic"].strip() if "topic" in opts else None
    progress = None
    if PROGRESS_OPTION in opts:
        host, _, port = opts[PROGRESS_OPTION].rpartition(":")
        progress = (host, int(port))
    return SinkSettings(
        bootstrap_servers=servers, topic=topic or None, producer=producer, security=security,
        client_id=opts.get("kafka.client.id", "trio-broker-spark"),
        request_timeout_ms=int(dict(producer).get("request.timeout.ms",
                                                  DEFAULT_REQUEST_TIMEOUT_MS)),
        progress_address=progress, summary_path=opts.get(SUMMARY_OPTION))


def _same_type(a: DataType, b: DataType) -> bool:
    """Equal types, nullability aside (Spark's ``DataTypeUtils.sameType``)."""
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return _same_type(a.elementType, b.elementType)
    if isinstance(a, StructType) and isinstance(b, StructType):
        return len(a.fields) == len(b.fields) and all(
            x.name == y.name and _same_type(x.dataType, y.dataType)
            for x, y in zip(a.fields, b.fields))
    return type(a) is type(b)


def check_columns(schema: StructType, topic: str | None,
                  serialized: frozenset[str] = frozenset()) -> None:
    """Spark's Kafka sink checks (``KafkaWriter.validateQuery``), with its messages; the
    ``serialized`` columns (a registry format is set for them) may be of any type."""
    fields = {f.name: f.dataType for f in schema.fields}

    def check(name: str, allowed: tuple[DataType, ...]) -> None:
        found = fields.get(name)
        if found is None or name in serialized:
            return
        if not any(_same_type(found, t) for t in allowed):
            raise SinkError(f"{name} attribute unsupported type {found.simpleString()}. {name} "
                            f"must be a(n) {' or '.join(t.simpleString() for t in allowed)}")

    if topic is None:
        if "topic" not in fields:
            raise SinkError("topic option required when no 'topic' attribute is present. Use "
                            "the topic option for setting a topic.")
        check("topic", (StringType(),))
    check("key", (StringType(), BinaryType()))
    if "value" not in fields:
        raise SinkError("Required attribute 'value' not found")
    check("value", (StringType(), BinaryType()))
    check("headers", (_HEADERS_SPARK_TYPE,))
    check("partition", (IntegerType(),))
    check("timestamp", (DoubleType(), TimestampType()))


# --- the writers Spark drives ---------------------------------------------------------------

@dataclass
class SinkCommit(WriterCommitMessage):
    """What one task wrote: records, key and value bytes, offsets per partition."""

    records: int = 0
    payload_bytes: int = 0
    #: (topic, partition) -> [first offset, last offset, records]; offsets -1 with acks=0
    ranges: dict[tuple[str, int], list[int]] = field(default_factory=dict)


def summarize(messages: list[SinkCommit | None]) -> dict[str, Any]:
    """The tasks' commit messages as one summary (the JSON ``import`` reads)."""
    ranges: dict[tuple[str, int], list[int]] = {}
    records = payload = 0
    for message in messages:
        if not isinstance(message, SinkCommit):
            continue
        records += message.records
        payload += message.payload_bytes
        for tp, (first, last, count) in message.ranges.items():
            merged = ranges.setdefault(tp, [first, last, 0])
            if first >= 0:
                merged[0] = first if merged[0] < 0 else min(merged[0], first)
                merged[1] = max(merged[1], last)
            merged[2] += count
    return {"records": records, "payload_bytes": payload,
            "ranges": [{"topic": t, "partition": p, "first_offset": r[0],
                        "last_offset": r[1], "records": r[2]}
                       for (t, p), r in sorted(ranges.items())]}


def writer_for(options: Mapping[str, str], schema: StructType, overwrite: bool,
               streaming: bool) -> Any:
    """Checked in the driver, before any task: options, save mode, columns, the broker."""
    if overwrite and not streaming:
        raise SinkError('Save mode Overwrite not allowed for Kafka topics: records are only '
                        'ever appended. Write with .mode("append") (Spark refuses the default '
                        'ErrorIfExists mode for Python data sources before the sink runs).')
    settings = parse_sink_options(options)
    try:
        formats = parse_format_options(options)
    except ConfigError as exc:
        raise SinkError(str(exc)) from None
    check_columns(schema, settings.topic, frozenset(
        column for column in ("key", "value") if formatted_spark_type(formats, column)))
    if settings.topic is not None:
        with settings.client() as client:  # no broker, or a topic that cannot be: fail now
            client.topic(settings.topic, allow_auto_create=True)
    if formats:
        settings = replace(settings, formats=resolve_write(
            formats, schema, [settings.topic] if settings.topic else [], options))
    fields = tuple(f.name for f in schema.fields)
    if streaming:
        return KafkaStreamSinkWriter(settings, fields)
    return KafkaSinkWriter(settings, fields)


class KafkaSinkWriter(DataSourceArrowWriter):
    def __init__(self, settings: SinkSettings, fields: tuple[str, ...]) -> None:
        self._settings = settings
        self._fields = fields

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return produce_batches(self._settings, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        summary = summarize(messages)  # type: ignore[arg-type]
        LOGGER.info("wrote %d records", summary["records"])
        if self._settings.summary_path:
            path = Path(self._settings.summary_path)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(summary))
            tmp.replace(path)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        done = summarize(messages)["records"]  # type: ignore[arg-type]
        LOGGER.warning("the write failed; %d records were acknowledged and stay in their "
                       "topics (delivery is at least once)", done)


class KafkaStreamSinkWriter(DataSourceStreamArrowWriter):
    def __init__(self, settings: SinkSettings, fields: tuple[str, ...]) -> None:
        self._settings = settings
        self._fields = fields

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return produce_batches(self._settings, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        LOGGER.info("micro-batch %d: wrote %d records", batchId,
                    summarize(messages)["records"])  # type: ignore[arg-type]

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        LOGGER.warning("micro-batch %d failed; Spark runs it again (at least once)", batchId)


# --- executor side ----------------------------------------------------------------------------

class _Task:
    """One write task: rows to per-topic encoders to one producer."""

    def __init__(self, settings: SinkSettings, client: BlockingClient) -> None:
        self.settings = settings
        self.client = client
        producer_settings = settings.producer_settings()
        self.producer_settings = producer_settings
        self.commit = SinkCommit()
        self.progress = ProgressSender(settings.progress_address)
        self.producer = BlockingProducer(client, producer_settings, on_delivery=self._delivered)
        self.sticky = StickyPartitioner(producer_settings.batch_size)
        self.encoders: dict[str, BatchEncoder] = {}
        self.partitions: dict[str, int] = {}

    def _delivered(self, tp: TopicPartition, base_offset: int, block: RecordBlock) -> None:
        count = block.num_records
        entry = self.commit.ranges.setdefault((tp.topic, tp.partition), [-1, -1, 0])
        if base_offset >= 0:
            entry[0] = base_offset if entry[0] < 0 else min(entry[0], base_offset)
            entry[1] = max(entry[1], base_offset + count - 1)
        entry[2] += count
        self.progress.add(count, len(block.records))

    def partition_count(self, topic: str) -> int:
        count = self.partitions.get(topic)
        if count is None:
            count = self.partitions[topic] = len(
                self.client.topic(topic, allow_auto_create=True).partitions)
        return count

    def encoder(self, topic: str) -> BatchEncoder:
        encoder = self.encoders.get(topic)
        if encoder is None:
            s = self.producer_settings
            encoder = self.encoders[topic] = BatchEncoder(
                batch_size=s.batch_size, linger_ms=s.linger_ms,
                max_request_size=s.max_request_size)
        return encoder

    def add(self, batch: pa.RecordBatch) -> None:
        if self.settings.formats:
            batch = encode_batch(self.settings.formats, batch)
        for topic, rows in self.split(batch):
            self.producer.send_all((TopicPartition(topic, partition), block)
                                   for partition, block in self.encoder(topic).add(rows))

    def finish(self) -> SinkCommit:
        for topic, encoder in self.encoders.items():
            self.producer.send_all((TopicPartition(topic, partition), block)
                                   for partition, block in encoder.drain())
        self.producer.flush()
        self.progress.close()
        self.commit.records = sum(r[2] for r in self.commit.ranges.values())
        return self.commit

    def split(self, batch: pa.RecordBatch) -> Iterator[tuple[str, SinkRows]]:
        """The batch's rows per topic, with partitions resolved."""
        n = batch.num_rows
        if n == 0:
            return
        names = batch.schema.names
        value = _as_binary(batch.column(names.index("value")))
        key = (_as_binary(batch.column(names.index("key"))) if "key" in names
               else pa.nulls(n, pa.binary()))
        headers = batch.column(names.index("headers")) if "headers" in names else None
        if headers is not None and headers.type != HEADERS_TYPE:
            headers = headers.cast(HEADERS_TYPE)
        self.commit.payload_bytes += int(pc.sum(pc.binary_length(key)).as_py() or 0) + int(
            pc.sum(pc.binary_length(value)).as_py() or 0)
        timestamps = _timestamps_ms(batch.column(names.index("timestamp")) if "timestamp" in
                                    names else None, n)
        partition = batch.column(names.index("partition")) if "partition" in names else None
        groups: list[tuple[str, np.ndarray | None]]
        if self.settings.topic is not None:
            groups = [(self.settings.topic, None)]
        else:
            topics = batch.column(names.index("topic"))
            if topics.null_count:
                raise SinkError("null topic present in the data. Use the topic option for "
                                "setting a default topic.")
            encoded = topics.dictionary_encode()
            indices = np.asarray(encoded.indices.to_numpy(zero_copy_only=False))
            names_list = encoded.dictionary.to_pylist()
            if len(names_list) == 1:
                groups = [(names_list[0], None)]
            else:
                groups = [(name, np.flatnonzero(indices == i))
                          for i, name in enumerate(names_list)]
        for topic, rows in groups:
            part = SinkRows(key, value, headers, np.zeros(n, np.int32), timestamps)
            explicit = partition
            if rows is not None:
                part = part.take(rows)
                explicit = None if partition is None else partition.take(pa.array(rows))
            yield topic, part._replace(partition=self.resolve(topic, part, explicit))

    def resolve(self, topic: str, rows: SinkRows, explicit: pa.Array | None) -> np.ndarray:
        count = self.partition_count(topic)
        n = rows.num_rows
        out = np.full(n, -1, dtype=np.int64)
        if explicit is not None:
            given = np.asarray(explicit.fill_null(-1).to_numpy(zero_copy_only=False),
                               dtype=np.int64)
            valid = np.asarray(explicit.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            bad = valid & ((given < 0) | (given >= count))
            if bad.any():
                p = int(given[np.argmax(bad)])
                if p < 0:
                    raise SinkError(f"Invalid partition: {p}. Partition number should always "
                                    "be non-negative or null.")
                raise SinkError(f"Invalid partition given with record: {p} is not in the range "
                                f"[0...{count}) of topic '{topic}'.")
            out = np.where(valid, given, -1)
        open_rows = out < 0
        if open_rows.any():
            keyed = open_rows & np.asarray(rows.key.is_valid().to_numpy(zero_copy_only=False),
                                           dtype=bool)
            if keyed.any():
                if keyed.all():
                    out = murmur2_partitions(rows.key, count).astype(np.int64)
                else:
                    index = np.flatnonzero(keyed)
                    out[index] = murmur2_partitions(rows.key.take(pa.array(index)), count)
            loose = open_rows & ~keyed
            if loose.any():
                index = np.flatnonzero(loose)
                sizes = np.asarray(pc.binary_length(rows.value.take(pa.array(index)))
                                   .fill_null(0).to_numpy(zero_copy_only=False)) + 16
                out[index] = self.sticky.assign(topic, sizes, count)
        return out.astype(np.int32)


def _as_binary(array: pa.Array) -> pa.Array:
    """Strings as their UTF-8 bytes (Spark casts a string key or value the same way)."""
    return array if pa.types.is_binary(array.type) else array.cast(pa.binary())


def _timestamps_ms(column: pa.Array | None, n: int) -> np.ndarray:
    """Milliseconds since the epoch; null (or no column): now, as Kafka's producer stamps."""
    now = int(time.time() * 1000)
    if column is None:
        return np.full(n, now, dtype=np.int64)
    if pa.types.is_timestamp(column.type):
        micros = np.asarray(column.cast(pa.timestamp("us", tz=column.type.tz)).cast(pa.int64())
                            .fill_null(now * 1000).to_numpy(zero_copy_only=False),
                            dtype=np.int64)
    else:  # double: seconds, as Spark casts a double to a timestamp
        seconds = np.asarray(column.fill_null(now / 1000).to_numpy(zero_copy_only=False),
                             dtype=np.float64)
        micros = (seconds * 1_000_000).astype(np.int64)
    return np.where(micros >= 0, micros // 1000, -((-micros) // 1000))  # Java's division


def produce_batches(settings: SinkSettings, batches: Iterator[pa.RecordBatch]) -> SinkCommit:
    """One write task: every row of ``batches`` acknowledged by its partition's leader."""
    with settings.client() as client:
        task = _Task(settings, client)
        try:
            for batch in batches:
                task.add(batch)
            return task.finish()
        except ValueError as exc:  # a row the encoder cannot write (a null header key)
            if isinstance(exc, ConfigError):
                raise
            raise SinkError(str(exc)) from None
        finally:
            task.progress.close()


__all__ = ["SINK_PRODUCER_DEFAULTS", "SUMMARY_OPTION", "KafkaSinkWriter",
           "KafkaStreamSinkWriter", "SinkCommit", "SinkError", "SinkSettings", "check_columns",
           "parse_sink_options", "produce_batches", "summarize", "writer_for"]
