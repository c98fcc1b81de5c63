"""A blocking Kafka-protocol client over plain sockets, for the console tools, the Spark driver
and executors, and tests: no event loop, one socket per broker, a deadline on every call.

It drives the sans-IO client core (``trio_broker.client.core``), so it parses bootstrap servers,
negotiates versions, speaks TLS and SASL and names errors exactly as the Trio client does::

    from trio_broker.client.blocking import BlockingClient, TopicPartition, EARLIEST

    with BlockingClient("127.0.0.1:9092") as client:
        client.create_topic("events", 3)
        start = client.list_offsets({TopicPartition("events", 0): EARLIEST})

``BlockingProducer`` sends record batches encoded elsewhere (``RecordBlock``) with Kafka's
delivery semantics: idempotence, bounded in-flight requests, ordered retries.

Every failure is a ``KafkaError`` (``client.core.errors``: one class per Kafka error code, plus
``KafkaConnectionError`` and ``KafkaTimeoutError``, both retriable) whose text is one line; a bad
bootstrap server or setting is a ``ConfigError`` (a ``ValueError``).

What it owns: ``client`` (``BlockingClient``), ``connection`` (one socket to one broker),
``cluster`` (metadata and routing to leaders), ``admin``, ``group`` (a consumer group member)
and ``producer`` (``BlockingProducer``). May import the client core and the protocol; nothing of
the broker, nor the Trio client.
"""

from ..core.admin import BROKER_RESOURCE as BROKER_RESOURCE
from ..core.admin import CLIENT_METRICS_RESOURCE as CLIENT_METRICS_RESOURCE
from ..core.admin import TOPIC_RESOURCE as TOPIC_RESOURCE
from ..core.admin import ClusterDescription as ClusterDescription
from ..core.admin import ConfigEntry as ConfigEntry
from ..core.admin import ConfigOperation as ConfigOperation
from ..core.admin import source_name as source_name
from ..core.bootstrap import parse_address as parse_address
from ..core.bootstrap import parse_bootstrap as parse_bootstrap
from ..core.errors import ConfigError as ConfigError
from ..core.errors import KafkaConnectionError as KafkaConnectionError
from ..core.errors import KafkaError as KafkaError
from ..core.errors import KafkaTimeoutError as KafkaTimeoutError
from ..core.errors import error_name as error_name
from ..core.fetch import FetchedPartition as FetchedPartition
from ..core.fetch import next_fetch_offset as next_fetch_offset
from ..core.groups import GroupDescription as GroupDescription
from ..core.groups import GroupListing as GroupListing
from ..core.groups import MemberDescription as MemberDescription
from ..core.metadata import MetadataResponse as MetadataResponse
from ..core.metadata import TopicInfo as TopicInfo
from ..core.partitioner import murmur2 as murmur2
from ..core.partitioner import partition_for_key as partition_for_key
from ..core.produce import PartitionResult as PartitionResult
from ..core.produce import RecordBlock as RecordBlock
from ..core.produce import seal_batch as seal_batch
from ..core.structs import EARLIEST as EARLIEST
from ..core.structs import LATEST as LATEST
from ..core.structs import OffsetAndMetadata as OffsetAndMetadata
from ..core.structs import TopicPartition as TopicPartition
from .client import BlockingClient as BlockingClient
from .client import FetchHandle as FetchHandle
from .cluster import DEFAULT_BOOTSTRAP as DEFAULT_BOOTSTRAP
from .connection import BrokerConnection as BrokerConnection
from .group import GroupMember as GroupMember
from .producer import PRODUCER_DEFAULTS as PRODUCER_DEFAULTS
from .producer import BlockingProducer as BlockingProducer
from .producer import ProducerSettings as ProducerSettings

__all__ = ["BROKER_RESOURCE", "CLIENT_METRICS_RESOURCE", "DEFAULT_BOOTSTRAP", "EARLIEST", "LATEST",
           "PRODUCER_DEFAULTS",
           "TOPIC_RESOURCE", "BlockingClient", "BlockingProducer", "BrokerConnection",
           "ClusterDescription", "ConfigEntry", "ConfigError", "ConfigOperation",
           "FetchHandle", "FetchedPartition", "GroupDescription", "GroupListing",
           "GroupMember", "KafkaConnectionError", "KafkaError", "KafkaTimeoutError",
           "MemberDescription", "MetadataResponse", "OffsetAndMetadata", "PartitionResult",
           "ProducerSettings", "RecordBlock", "TopicInfo", "TopicPartition", "error_name",
           "murmur2", "next_fetch_offset", "parse_address", "parse_bootstrap",
           "partition_for_key", "seal_batch", "source_name"]
