"""A Trio-native Kafka client: producer, consumer and admin for any Kafka-compatible broker.

``open_producer``, ``open_consumer`` and ``open_admin`` are async context managers: every
background task of a client lives in the nursery they own and stops when the block is left.
The protocol work (requests, versions, bootstrap parsing, TLS and SASL settings, errors) is the
sans-IO client core's (``trio_broker.client.core``), shared with the blocking client.

What it owns: the client stack's public names, re-exported here from the Trio driver
(``client/trio``) and the client core (``client/core``); the blocking driver is
``client/blocking``. It may import those two; nothing of the broker.
"""

from typing import TYPE_CHECKING

from ..lazy_names import lazy_names
from .core.errors import KafkaError as KafkaError
from .core.partitioner import murmur2 as murmur2
from .core.partitioner import partition_for_key as partition_for_key
from .core.structs import ConsumerRecord as ConsumerRecord
from .core.structs import OffsetAndMetadata as OffsetAndMetadata
from .core.structs import OffsetAndTimestamp as OffsetAndTimestamp
from .core.structs import TopicPartition as TopicPartition
from .trio import errors as errors

#: the Trio driver's names, imported on first use: the blocking client and the command line,
#: which import this package as the blocking client's parent, never load Trio's client
_LAZY = {
    "Admin": "trio.admin",
    "NewTopic": "trio.admin",
    "open_admin": "trio.admin",
    "Consumer": "trio.consumer",
    "ConsumerRebalanceListener": "trio.consumer",
    "open_consumer": "trio.consumer",
    "Producer": "trio.producer",
    "RecordFuture": "trio.producer",
    "RecordMetadata": "trio.producer",
    "open_producer": "trio.producer",
    "AcknowledgeType": "trio.share_consumer",
    "ShareConsumer": "trio.share_consumer",
    "ShareConsumerRecord": "trio.share_consumer",
}

if TYPE_CHECKING:
    from .trio.admin import Admin as Admin
    from .trio.admin import NewTopic as NewTopic
    from .trio.admin import open_admin as open_admin
    from .trio.consumer import Consumer as Consumer
    from .trio.consumer import ConsumerRebalanceListener as ConsumerRebalanceListener
    from .trio.consumer import open_consumer as open_consumer
    from .trio.producer import Producer as Producer
    from .trio.producer import RecordFuture as RecordFuture
    from .trio.producer import RecordMetadata as RecordMetadata
    from .trio.producer import open_producer as open_producer
    from .trio.share_consumer import AcknowledgeType as AcknowledgeType
    from .trio.share_consumer import ShareConsumer as ShareConsumer
    from .trio.share_consumer import ShareConsumerRecord as ShareConsumerRecord

__all__ = [
    "AcknowledgeType",
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
    "ShareConsumer",
    "ShareConsumerRecord",
    "TopicPartition",
    "errors",
    "murmur2",
    "open_admin",
    "open_consumer",
    "open_producer",
    "partition_for_key",
]

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
