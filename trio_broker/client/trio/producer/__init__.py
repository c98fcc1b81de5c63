"""The producer, in parts as Kafka's and aiokafka's: ``producer`` (the public ``Producer``),
``accumulator`` (batches per partition, ``buffer.memory``), ``sender`` (the sender task, retries),
``transaction_manager`` (idempotence: producer id, epochs, sequences), ``transactions`` (the
transaction coordinator's requests) and ``batch`` (batches and record futures).

May import the Trio client's connection layer (``client.trio``), the client core and the
protocol; nothing of the broker.
"""

from .batch import RecordFuture as RecordFuture
from .batch import RecordMetadata as RecordMetadata
from .producer import Producer as Producer
from .producer import open_producer as open_producer

__all__ = ["Producer", "RecordFuture", "RecordMetadata", "open_producer"]
