"""``key.format`` / ``value.format``: Schema Registry formats for the source's and the sink's
``key`` and ``value`` columns.

Options (case-insensitive, as every option of the source and the sink):

    value.format, key.format   binary (the default; also ``raw``), string, avro, protobuf,
                               json_schema
    schema.registry.url        required by avro, protobuf and json_schema
    value.subject, key.subject the subject; default ``<topic>-value`` / ``<topic>-key``
                               (TopicNameStrategy), which needs one topic
    value.protobuf.message     the message of a Protobuf schema (full name; default: its first)
    auto.register.schemas      sink: register the column's schema (true, the default) or only
                               look it up (false), as confluent-kafka's serializers do
    use.latest.version         sink: write with the subject's latest schema instead

Why the driver resolves them: the read's column type is the subject's latest schema, mapped to a
Spark type (``_schema_types``), and Spark needs it when the query is planned; the write's schema
is registered once, by the driver, not by every task. Tasks only fetch writer schemas by id,
each once per Python worker (``_codecs``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..client.core.errors import ConfigError
from . import _codecs, _schema_types
from ._codecs import HEADER, AvroCodec, JsonCodec, ProtobufCodec, SerializationError
from ._registry_client import RegisteredSchema, RegistryClient, SchemaRegistryError

#: ``value.format`` -> the registry's ``schemaType``
REGISTRY_FORMATS = {"avro": "AVRO", "protobuf": "PROTOBUF", "json_schema": "JSON"}
PLAIN_FORMATS = ("binary", "raw", "string")


@dataclass(frozen=True)
class FormatOption:
    """What the options say about one column (not yet resolved against the registry)."""

    column: str  # "key" or "value"
    format: str
    registry_url: str | None
    subject: str | None
    protobuf_message: str | None


@dataclass(frozen=True)
class ColumnFormat:
    """One column's resolved format: picklable, shipped to every task."""

    column: str
    format: str
    registry_url: str
    subject: str
    #: the read's reader schema, or the schema a write writes with
    schema: RegisteredSchema
    spark_type: DataType
    #: Protobuf: the message's full name
    message: str | None = None

    @property
    def arrow_type(self) -> pa.DataType:
        return to_arrow_type(self.spark_type, timezone="UTC")


def parse_format_options(options: Mapping[str, str]) -> tuple[FormatOption, ...]:
    """The ``key.format`` / ``value.format`` options, checked; none set: ()."""
    opts = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
    out = []
    for column in ("key", "value"):
        fmt = opts.get(f"{column}.format", "binary").strip().lower()
        if fmt in ("binary", "raw"):
            continue
        if fmt not in PLAIN_FORMATS and fmt not in REGISTRY_FORMATS:
            raise ConfigError(f"Option '{column}.format' must be one of binary, string, "
                              f"{', '.join(REGISTRY_FORMATS)}; got {opts[f'{column}.format']!r}")
        url = opts.get("schema.registry.url", "").strip() or None
        if fmt in REGISTRY_FORMATS and url is None:
            raise ConfigError(f"Option 'schema.registry.url' must be specified for "
                              f"'{column}.format' {fmt}")
        out.append(FormatOption(column, fmt, url, opts.get(f"{column}.subject"),
                                opts.get(f"{column}.protobuf.message")))
    return tuple(out)


def _subject(option: FormatOption, topics: Sequence[str]) -> str:
    if option.subject:
        return option.subject
    if len(topics) != 1:
        raise ConfigError(f"Option '{option.column}.subject' must be specified when "
                          f"'{option.column}.format' is {option.format} and the query reads or "
                          f"writes other than one topic (TopicNameStrategy names the subject "
                          f"'<topic>-{option.column}' after one topic)")
    return f"{topics[0]}-{option.column}"


def _check_type(option: FormatOption, schema: RegisteredSchema, subject: str) -> None:
    if schema.schema_type != REGISTRY_FORMATS[option.format]:
        raise ConfigError(f"Subject '{subject}' holds a {schema.schema_type} schema (id "
                          f"{schema.id}), not {REGISTRY_FORMATS[option.format]} as "
                          f"'{option.column}.format' {option.format} says")


def _spark_type_of(client: RegistryClient, schema: RegisteredSchema,
                   message: str | None) -> tuple[DataType, str | None]:
    if schema.schema_type == "AVRO":
        named: dict[str, Any] = {}
        _named_spark_types(client, schema, named)
        return _schema_types.avro_to_spark(json.loads(schema.schema), named), None
    if schema.schema_type == "JSON":
        return _schema_types.json_schema_to_spark(json.loads(schema.schema)), None
    codec = ProtobufCodec(client, schema)
    if message is None:
        if not codec.file.message_types_by_name:
            raise ConfigError(f"Protobuf schema {schema.id} defines no message")
        descriptor = next(iter(codec.file.message_types_by_name.values()))
    else:
        try:
            descriptor = codec.pool.FindMessageTypeByName(message)
        except KeyError:
            raise ConfigError(f"Protobuf schema {schema.id} has no message {message!r}") from None
    return _schema_types.proto_to_spark(descriptor), descriptor.full_name


def _named_spark_types(client: RegistryClient, schema: RegisteredSchema,
                       named: dict[str, Any]) -> None:
    for ref in schema.references:
        sub = client.version(ref.subject, ref.version)
        _named_spark_types(client, sub, named)
        _schema_types.avro_to_spark(json.loads(sub.schema), named)


def resolve_read(formats: Sequence[FormatOption], topics: Sequence[str]
                 ) -> tuple[ColumnFormat, ...]:
    """Driver: each registry-format column's type, from its subject's latest schema."""
    out = []
    for option in formats:
        if option.format == "string":
            out.append(ColumnFormat(option.column, "string", "", "",
                                    RegisteredSchema(0, "", ""), StringType()))
            continue
        assert option.registry_url is not None
        subject = _subject(option, topics)
        client = RegistryClient(option.registry_url)
        latest = client.version(subject, "latest")
        _check_type(option, latest, subject)
        spark_type, message = _spark_type_of(client, latest, option.protobuf_message)
        out.append(ColumnFormat(option.column, option.format, option.registry_url, subject,
                                latest, spark_type, message))
    return tuple(out)


def resolve_write(formats: Sequence[FormatOption], schema: StructType, topics: Sequence[str],
                  options: Mapping[str, str]) -> tuple[ColumnFormat, ...]:
    """Driver: the schema each registry-format column is written with, registered or looked up
    under its subject as confluent-kafka's serializers do (``auto.register.schemas``,
    ``use.latest.version``)."""
    opts = {str(k).lower(): str(v).strip().lower() for k, v in options.items() if v is not None}
    auto_register = _flag(opts, "auto.register.schemas", "true")
    use_latest = _flag(opts, "use.latest.version", "false")
    fields = {f.name: f.dataType for f in schema.fields}
    out = []
    for option in formats:
        if option.format == "string" or option.column not in fields:
            continue
        assert option.registry_url is not None
        subject = _subject(option, topics)
        client = RegistryClient(option.registry_url)
        column_type = fields[option.column]
        if use_latest:
            written = client.version(subject, "latest")
            _check_type(option, written, subject)
            _, message = _spark_type_of(client, written, option.protobuf_message)
        else:
            derived, message = derive_schema(option, column_type, subject)
            schema_id = (client.register(subject, derived) if auto_register
                         else client.lookup(subject, derived))
            written = RegisteredSchema(schema_id, derived.schema_type, derived.schema)
        out.append(ColumnFormat(option.column, option.format, option.registry_url, subject,
                                written, column_type, message))
    return tuple(out)


def _flag(opts: Mapping[str, str], name: str, default: str) -> bool:
    value = opts.get(name, default)
    if value not in ("true", "false"):
        raise ConfigError(f"Option '{name}' must be true or false, got {value!r}")
    return value == "true"


def derive_schema(option: FormatOption, column_type: DataType,
                  subject: str) -> tuple[RegisteredSchema, str | None]:
    """The schema a column of ``column_type`` is written with (and, for Protobuf, its
    message's name)."""
    if option.format == "avro":
        avro = _schema_types.spark_to_avro(column_type)
        return RegisteredSchema(0, "AVRO", json.dumps(avro, separators=(",", ":"))), None
    if option.format == "json_schema":
        return RegisteredSchema(0, "JSON", json.dumps(
            _schema_types.spark_to_json_schema(column_type), separators=(",", ":"))), None
    import base64

    if not isinstance(column_type, StructType):
        raise ConfigError(f"'{option.column}.format' protobuf writes a struct column, not "
                          f"{column_type.simpleString()}")
    message = option.protobuf_message or "TopLevelRecord"
    file = _schema_types.spark_to_proto(column_type, message, f"{subject}.proto")
    text = base64.b64encode(file.SerializeToString()).decode()
    return RegisteredSchema(0, "PROTOBUF", text), message


def source_columns(include_headers: bool, formats: Sequence[ColumnFormat]) -> StructType:
    """The source's columns (``_decode.SCHEMA_DDL``) with the formatted ones' types."""
    types = {f.column: f.spark_type for f in formats}
    fields = [StructField("key", types.get("key", BinaryType())),
              StructField("value", types.get("value", BinaryType())),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([
            StructField("key", StringType()), StructField("value", BinaryType())]))))
    return StructType(fields)


def decode_batch(formats: Sequence[ColumnFormat], batch: pa.RecordBatch,
                 partition: str) -> pa.RecordBatch:
    """A fetched batch with its formatted columns decoded."""
    offsets = batch.column(batch.schema.get_field_index("offset"))

    def where(i: int) -> str:
        return f"offset {offsets[i].as_py()} of {partition}"

    for fmt in formats:
        index = batch.schema.get_field_index(fmt.column)
        column = decode_column(fmt, batch.column(index), where)
        batch = batch.set_column(index, pa.field(fmt.column, column.type), column)
    return batch


def _client(fmt: ColumnFormat) -> RegistryClient:
    return RegistryClient(fmt.registry_url)


def _decoder(fmt: ColumnFormat, schema_id: int) -> Any:
    key = (fmt.registry_url, schema_id, fmt.format, fmt.schema.id)
    if fmt.format == "avro":
        return _codecs.cached(key, lambda: AvroCodec(
            _client(fmt), _client(fmt).schema_by_id(schema_id), fmt.schema))
    if fmt.format == "protobuf":
        return _codecs.cached(key, lambda: ProtobufCodec(
            _client(fmt), _client(fmt).schema_by_id(schema_id)))
    return _codecs.cached(key, lambda: JsonCodec(_client(fmt).schema_by_id(schema_id)))


def decode_column(fmt: ColumnFormat, column: pa.Array, where: Any) -> pa.Array:
    """Framed values to a column of ``fmt``'s type; ``where(i)`` names row ``i`` for errors."""
    if fmt.format == "string":
        return column.cast(pa.string())
    values: list[Any] = []
    append = values.append
    decoders: dict[int, Any] = {}  # by schema id: the cached codecs' decode methods
    for i, raw in enumerate(column.to_pylist()):
        if raw is None:
            append(None)
            continue
        try:
            if raw[:1] == b"\x00" and len(raw) >= HEADER.size:
                found = decoders.get(int.from_bytes(raw[1:HEADER.size], "big"))
            else:
                found = None
            if found is None:
                schema_id = _codecs.schema_id(raw)
                found = decoders[schema_id] = _decoder(fmt, schema_id).decode
            append(found(raw))
        except SerializationError as exc:
            raise SerializationError(f"{fmt.column} of {where(i)}: {exc}") from None
        except SchemaRegistryError as exc:
            raise SchemaRegistryError(f"{fmt.column} of {where(i)}: {exc}",
                                      exc.error_code) from None
    try:
        return pa.array(values, type=fmt.arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise SerializationError(f"{fmt.column} values do not fit the column type "
                                 f"{fmt.spark_type.simpleString()} of subject '{fmt.subject}' "
                                 f"(schema {fmt.schema.id}): {exc}") from None


def _encoder(fmt: ColumnFormat) -> Any:
    key = ("encode", fmt.registry_url, fmt.schema.id, fmt.format, fmt.message)
    if fmt.format == "avro":
        return _codecs.cached(key, lambda: AvroCodec(_client(fmt), fmt.schema).encode)
    if fmt.format == "protobuf":
        message = fmt.message
        assert message is not None
        return _codecs.cached(key, lambda: ProtobufCodec(_client(fmt), fmt.schema)
                              .encoder(message))
    return _codecs.cached(key, lambda: JsonCodec(fmt.schema).encode)


def encode_column(fmt: ColumnFormat, column: pa.Array) -> pa.Array:
    """A column's values in Confluent's wire format (null stays null: a tombstone, no key)."""
    encode = _encoder(fmt)
    header = HEADER.pack(0, fmt.schema.id)
    out = [None if value is None else header + encode(value) for value in python_values(column)]
    return pa.array(out, type=pa.binary())


def python_values(array: pa.Array) -> list[Any]:
    """``array.to_pylist()`` (maps as dicts), a struct built from its fields' lists: Arrow
    converts a primitive column to Python in one C loop, a struct row by row at several times
    the cost."""
    if not pa.types.is_struct(array.type) or array.type.num_fields == 0:
        return array.to_pylist(maps_as_pydicts="strict")  # type: ignore[no-any-return]
    names = [array.type.field(i).name for i in range(array.type.num_fields)]
    rows: list[Any] = [dict(zip(names, values)) for values in zip(
        *(python_values(array.field(i)) for i in range(len(names))))]
    if array.null_count:
        rows = [row if valid else None for row, valid in zip(rows, array.is_valid().to_pylist())]
    return rows


def encode_batch(formats: Sequence[ColumnFormat], batch: pa.RecordBatch) -> pa.RecordBatch:
    for fmt in formats:
        if fmt.column in batch.schema.names:
            index = batch.schema.get_field_index(fmt.column)
            batch = batch.set_column(index, pa.field(fmt.column, pa.binary()),
                                     encode_column(fmt, batch.column(index)))
    return batch


def formatted_spark_type(formats: Sequence[FormatOption], column: str) -> bool:
    """Whether the sink takes any type for ``column`` (a registry format is set for it)."""
    return any(f.column == column and f.format in REGISTRY_FORMATS for f in formats)


__all__ = ["PLAIN_FORMATS", "REGISTRY_FORMATS", "ColumnFormat", "FormatOption",
           "decode_batch", "decode_column", "derive_schema", "encode_batch", "encode_column",
           "formatted_spark_type", "parse_format_options", "resolve_read", "resolve_write",
           "source_columns"]
