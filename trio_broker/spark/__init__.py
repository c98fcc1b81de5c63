"""The Spark stage: a Kafka-protocol data source and sink for Spark, and the jobs behind
``trio-broker export`` and ``trio-broker import``.

Imported only with the ``spark`` extra, so the broker itself never pays for importing Spark::

    import trio_broker.spark
    trio_broker.spark.register(spark)
    df = (spark.read.format("trio_broker")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())
    (df.write.format("trio_broker").mode("append")
       .option("kafka.bootstrap.servers", "127.0.0.1:9092").option("topic", "copy").save())

It reads through the one blocking client (``trio_broker.client.blocking``), so its errors are
the client core's: a ``KafkaError`` per Kafka error code (``OffsetOutOfRangeError`` when
retention deleted planned offsets, ``UnknownTopicOrPartitionError``, ``KafkaConnectionError``),
``SourceOptionError`` and ``SinkError`` (``ValueError``s) for options and columns Spark's Kafka
source and sink would refuse.

``key.format`` / ``value.format`` read and write Avro, Protobuf and JSON Schema values in
Confluent's wire format with a Schema Registry (``_formats``); a failure there is a
``SchemaRegistryError``, a ``SerializationError`` or, for a schema with no Spark type (or a
column type with no schema), ``UnmappableSchema``.

May import the blocking client, the client core and the protocol; never the broker (an
executor needs nothing of it) except the Schema Registry's descriptor reader, for a Protobuf
schema (``broker.schema_registry.descriptors``); never the Trio client.
"""

from __future__ import annotations

try:
    import numpy  # noqa: F401
    import pyarrow  # noqa: F401
    import pyspark.sql.datasource  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise ImportError(
        f"the Spark stage needs pyspark>=4.0, pyarrow and numpy ({exc}): "
        "pip install 'trio-broker[spark]'"
    ) from exc

from ..client.core.errors import (
    KafkaConnectionError,
    KafkaError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from ._codecs import SerializationError
from ._options import SourceOptionError
from ._registry_client import SchemaRegistryError
from ._schema_types import UnmappableSchema
from .sink import SinkError
from .source import FORMAT_NAME, TrioBrokerDataSource, register, user_message

__all__ = [
    "FORMAT_NAME",
    "KafkaConnectionError",
    "KafkaError",
    "OffsetOutOfRangeError",
    "SchemaRegistryError",
    "SerializationError",
    "SinkError",
    "SourceOptionError",
    "TrioBrokerDataSource",
    "UnknownTopicOrPartitionError",
    "UnmappableSchema",
    "register",
    "user_message",
]
