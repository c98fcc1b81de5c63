"""Plain values every client face shares: partitions, offsets, brokers, ListOffsets specials.

Why one module: a ``TopicPartition`` made by the Trio consumer, the blocking client or a test
helper must be the same type, so dictionaries keyed by one are found by the others; these are
what aiokafka's and Kafka's ``structs`` hold.
"""

from __future__ import annotations

from typing import NamedTuple

#: ListOffsets timestamps with a meaning of their own (Kafka's ``ListOffsetsRequest``)
LATEST = -1  #: the log end offset (the high watermark)
EARLIEST = -2  #: the log start offset
MAX_TIMESTAMP = -3  #: the offset of the record with the largest timestamp (KIP-734)
EARLIEST_LOCAL = -4  #: the first offset still on local disk (KIP-405)
LATEST_TIERED = -5  #: the last offset in remote storage (KIP-1005)

#: The largest response frame a client accepts. A Fetch answer is bounded by its ``max_bytes``
#: plus one oversized batch (KIP-74), and the Spark reader doubles its request size up to 1 GiB
#: for a batch that does not fit; beyond that a size prefix is garbage, refused before buffering.
MAX_RESPONSE_BYTES = 1 << 30


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class OffsetAndMetadata(NamedTuple):
    """A committed offset (the next one to read) with its metadata string."""

    offset: int
    metadata: str | None = ""


class OffsetAndTimestamp(NamedTuple):
    offset: int  # -1 when no record has a timestamp at or after the one asked for
    timestamp: int


class BrokerInfo(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None


class PartitionInfo(NamedTuple):
    partition: int
    leader: int  # -1 when there is none
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: int


__all__ = ["EARLIEST", "EARLIEST_LOCAL", "LATEST", "LATEST_TIERED", "MAX_RESPONSE_BYTES",
           "MAX_TIMESTAMP", "BrokerInfo", "ConsumerRecord", "OffsetAndMetadata",
           "OffsetAndTimestamp", "PartitionInfo", "TopicPartition"]
