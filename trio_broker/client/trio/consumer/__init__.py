"""The consumer, in parts as Kafka's and aiokafka's: ``consumer`` (the public ``Consumer``),
``subscription_state``, ``fetcher``, ``positions``, ``coordinator_lookup``,
``committed_offsets``, ``classic_member``, ``consumer_member`` and ``assignors``."""

from ...core.structs import ConsumerRecord as ConsumerRecord
from ...core.structs import OffsetAndMetadata as OffsetAndMetadata
from .consumer import Consumer as Consumer
from .consumer import open_consumer as open_consumer
from .subscription_state import ConsumerRebalanceListener as ConsumerRebalanceListener

__all__ = ["Consumer", "ConsumerRebalanceListener", "ConsumerRecord", "OffsetAndMetadata",
           "open_consumer"]
