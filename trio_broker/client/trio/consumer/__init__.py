"""The consumer, in parts as Kafka's and aiokafka's: ``consumer`` (the public ``Consumer``),
``subscription_state`` (assignment and processed positions), ``fetcher`` (pipelined fetches),
``positions`` (committed offsets, ``auto.offset.reset``), ``coordinator_lookup`` (finding and
asking the group coordinator), ``committed_offsets`` (OffsetCommit, OffsetFetch),
``classic_member`` (classic membership: join, sync, heartbeats, leave), ``consumer_member``
(KIP-848 membership) and ``assignors`` (client-side assignors).

May import the Trio client's connection layer (``client.trio``), the client core and the
protocol; nothing of the broker.
"""

from ...core.structs import ConsumerRecord as ConsumerRecord
from ...core.structs import OffsetAndMetadata as OffsetAndMetadata
from .consumer import Consumer as Consumer
from .consumer import open_consumer as open_consumer
from .subscription_state import ConsumerRebalanceListener as ConsumerRebalanceListener

__all__ = ["Consumer", "ConsumerRebalanceListener", "ConsumerRecord", "OffsetAndMetadata",
           "open_consumer"]
