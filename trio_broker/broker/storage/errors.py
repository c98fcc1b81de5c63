"""Storage-layer exceptions, each carrying the Kafka error code a client should see.

Why codes live on the exceptions: the API layer turns any of these into a per-partition error
without a lookup table that could drift from the code that raises them.
"""

from __future__ import annotations

from typing import ClassVar

from ...protocol.errors import ErrorCode


class StorageError(Exception):
    """Base class; ``error_code`` is what the partition's response carries."""

    error_code: ClassVar[ErrorCode] = ErrorCode.UNKNOWN_SERVER_ERROR


class KafkaStorageError(StorageError):
    """The disk failed us (ENOSPC, EIO, permissions); nothing half-written is visible."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class OffsetOutOfRangeError(StorageError):
    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class InvalidProducerEpochError(StorageError):
    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class OutOfOrderSequenceError(StorageError):
    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidTxnStateError(StorageError):
    """A producer wrote outside the transaction it has open (Kafka INVALID_TXN_STATE)."""

    error_code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(StorageError):
    """A marker from an older coordinator epoch than the partition has seen."""

    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class TopicAlreadyExistsError(StorageError):
    error_code = ErrorCode.TOPIC_ALREADY_EXISTS


class UnknownTopicOrPartitionError(StorageError):
    error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class InvalidTopicError(StorageError):
    error_code = ErrorCode.INVALID_TOPIC_EXCEPTION


class InvalidPartitionsError(StorageError):
    error_code = ErrorCode.INVALID_PARTITIONS


class InvalidConfigError(StorageError):
    """A topic or broker config value that cannot be used; the message fits on one line."""

    error_code = ErrorCode.INVALID_CONFIG

    def __init__(self, key: str, value: str | None, expected: str) -> None:
        super().__init__(f"Invalid value {value!r} for configuration {key}: {expected}")
        self.key = key
        self.value = value
        self.expected = expected
