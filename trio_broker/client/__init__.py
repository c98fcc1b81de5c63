"""A Trio-native Kafka client: producer, consumer and admin for any Kafka-compatible broker.

``open_producer``, ``open_consumer`` and ``open_admin`` are async context managers: every
background task of a client lives in the nursery they own and stops when the block is left.
The protocol work (requests, versions, bootstrap parsing, TLS and SASL settings, errors) is the
sans-IO client core's (``trio_broker.client_core``), shared with the blocking client.
"""

from ..client_core.errors import KafkaError as KafkaError
from ..client_core.partitioner import murmur2 as murmur2
from ..client_core.partitioner import partition_for_key as partition_for_key
from ..client_core.structs import ConsumerRecord as ConsumerRecord
from ..client_core.structs import OffsetAndMetadata as OffsetAndMetadata
from ..client_core.structs import OffsetAndTimestamp as OffsetAndTimestamp
from ..client_core.structs import TopicPartition as TopicPartition
from . import errors as errors
from .admin import Admin as Admin
from .admin import NewTopic as NewTopic
from .admin import open_admin as open_admin
from .consumer import Consumer as Consumer
from .consumer import ConsumerRebalanceListener as ConsumerRebalanceListener
from .consumer import open_consumer as open_consumer
from .producer import Producer as Producer
from .producer import RecordFuture as RecordFuture
from .producer import RecordMetadata as RecordMetadata
from .producer import open_producer as open_producer

__all__ = [
    "Admin",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "KafkaError",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "Producer",
    "RecordFuture",
    "RecordMetadata",
    "TopicPartition",
    "errors",
    "murmur2",
    "open_admin",
    "open_consumer",
    "open_producer",
    "partition_for_key",
]
