"""The producer, in parts as Kafka's and aiokafka's: ``producer`` (the public ``Producer``),
``accumulator``, ``sender``, ``transaction_manager`` (idempotence) and ``batch``."""

from .batch import RecordFuture as RecordFuture
from .batch import RecordMetadata as RecordMetadata
from .producer import Producer as Producer
from .producer import open_producer as open_producer

__all__ = ["Producer", "RecordFuture", "RecordMetadata", "open_producer"]
