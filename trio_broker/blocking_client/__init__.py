"""A blocking Kafka-protocol client over plain sockets, for the console tools, the Spark driver
and executors, and tests: no event loop, one socket per broker, a deadline on every call.

It drives the sans-IO client core (``trio_broker.client_core``), so it parses bootstrap servers,
negotiates versions, speaks TLS and SASL and names errors exactly as the Trio client does::

    from trio_broker.blocking_client import BlockingClient, TopicPartition, EARLIEST

    with BlockingClient("127.0.0.1:9092") as client:
        client.create_topic("events", 3)
        start = client.list_offsets({TopicPartition("events", 0): EARLIEST})

``BlockingProducer`` sends record batches encoded elsewhere (``RecordBlock``) with Kafka's
delivery semantics: idempotence, bounded in-flight requests, ordered retries.

Every failure is a ``KafkaError`` (``client_core.errors``: one class per Kafka error code, plus
``KafkaConnectionError`` and ``KafkaTimeoutError``, both retriable) whose text is one line; a bad
bootstrap server or setting is a ``ConfigError`` (a ``ValueError``).
"""

from ..client_core.admin import BROKER_RESOURCE as BROKER_RESOURCE
from ..client_core.admin import TOPIC_RESOURCE as TOPIC_RESOURCE
from ..client_core.admin import ClusterDescription as ClusterDescription
from ..client_core.admin import ConfigEntry as ConfigEntry
from ..client_core.admin import ConfigOperation as ConfigOperation
from ..client_core.admin import source_name as source_name
from ..client_core.bootstrap import parse_address as parse_address
from ..client_core.bootstrap import parse_bootstrap as parse_bootstrap
from ..client_core.errors import ConfigError as ConfigError
from ..client_core.errors import KafkaConnectionError as KafkaConnectionError
from ..client_core.errors import KafkaError as KafkaError
from ..client_core.errors import KafkaTimeoutError as KafkaTimeoutError
from ..client_core.errors import error_name as error_name
from ..client_core.fetch import FetchedPartition as FetchedPartition
from ..client_core.fetch import next_fetch_offset as next_fetch_offset
from ..client_core.groups import GroupDescription as GroupDescription
from ..client_core.groups import GroupListing as GroupListing
from ..client_core.groups import MemberDescription as MemberDescription
from ..client_core.metadata import MetadataResponse as MetadataResponse
from ..client_core.metadata import TopicInfo as TopicInfo
from ..client_core.partitioner import murmur2 as murmur2
from ..client_core.partitioner import partition_for_key as partition_for_key
from ..client_core.produce import PartitionResult as PartitionResult
from ..client_core.produce import RecordBlock as RecordBlock
from ..client_core.produce import seal_batch as seal_batch
from ..client_core.structs import EARLIEST as EARLIEST
from ..client_core.structs import LATEST as LATEST
from ..client_core.structs import OffsetAndMetadata as OffsetAndMetadata
from ..client_core.structs import TopicPartition as TopicPartition
from .client import BlockingClient as BlockingClient
from .client import FetchHandle as FetchHandle
from .cluster import DEFAULT_BOOTSTRAP as DEFAULT_BOOTSTRAP
from .connection import BrokerConnection as BrokerConnection
from .group import GroupMember as GroupMember
from .producer import PRODUCER_DEFAULTS as PRODUCER_DEFAULTS
from .producer import BlockingProducer as BlockingProducer
from .producer import ProducerSettings as ProducerSettings

__all__ = ["BROKER_RESOURCE", "DEFAULT_BOOTSTRAP", "EARLIEST", "LATEST", "PRODUCER_DEFAULTS",
           "TOPIC_RESOURCE", "BlockingClient", "BlockingProducer", "BrokerConnection",
           "ClusterDescription", "ConfigEntry", "ConfigError", "ConfigOperation",
           "FetchHandle", "FetchedPartition", "GroupDescription", "GroupListing",
           "GroupMember", "KafkaConnectionError", "KafkaError", "KafkaTimeoutError",
           "MemberDescription", "MetadataResponse", "OffsetAndMetadata", "PartitionResult",
           "ProducerSettings", "RecordBlock", "TopicInfo", "TopicPartition", "error_name",
           "murmur2", "next_fetch_offset", "parse_address", "parse_bootstrap",
           "partition_for_key", "seal_batch", "source_name"]
