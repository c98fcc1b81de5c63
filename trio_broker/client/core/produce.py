"""Produce and InitProducerId: building the requests and reading the answers.

Batches arrive here as bytes (``protocol.records.build_batch``, or ``seal_batch`` for records
encoded elsewhere): a producer encodes each batch once, and a retry resends the same bytes so
the broker recognises duplicates by sequence.

Why ``RecordBlock`` and ``seal_batch``: a columnar encoder (the Spark sink) writes the records
of many batches at once, before it is known which producer id and sequence each batch will
carry; the header, which holds those and the CRC over everything after it, is added when the
batch is first sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from ...protocol.api_keys import ApiKey, request_class
from ...protocol.batch import BATCH_HEADER_SIZE, TRANSACTIONAL_BIT, finish_batch
from ...protocol.compression import Compression, compress
from ...protocol.messages import make_request
from .errors import ConfigError
from .structs import TopicPartition

_PRODUCE: Any = request_class(ApiKey.Produce)
_TOPIC = _PRODUCE.TopicProduceData
_PARTITION = _TOPIC.PartitionProduceData

#: ``acks`` values by every name Kafka's clients accept
ACKS = {"all": -1, "-1": -1, "0": 0, "1": 1, -1: -1, 0: 0, 1: 1}
#: ``compression.type`` values (Kafka's names) and the codecs they select
COMPRESSION_TYPES = {"none": Compression.NONE, "gzip": Compression.GZIP,
                     "snappy": Compression.SNAPPY, "lz4": Compression.LZ4,
                     "zstd": Compression.ZSTD}
#: the lowest Produce version that may carry batches of each codec (zstd arrived in v7)
MIN_PRODUCE_VERSION = {Compression.ZSTD: 7}


def compression_type(name: str) -> Compression:
    """The codec ``compression.type`` names; ``ConfigError`` for anything else."""
    codec = COMPRESSION_TYPES.get(str(name).strip().lower())
    if codec is None:
        raise ConfigError(f"Invalid value {name} for configuration compression.type: String "
                          f"must be one of: {', '.join(COMPRESSION_TYPES)}")
    return codec


class RecordBlock(NamedTuple):
    """The records of one future batch, encoded (``protocol.records`` layout) and uncompressed,
    without the batch header."""

    records: bytes | bytearray | memoryview
    num_records: int
    #: timestamp of the first record (the batch's base timestamp) and the largest one
    base_timestamp: int
    max_timestamp: int

    @property
    def size(self) -> int:
        """Bytes of the batch before compression."""
        return BATCH_HEADER_SIZE + len(self.records)


def seal_batch(block: RecordBlock, *, compression: Compression = Compression.NONE,
               producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
               is_transactional: bool = False) -> bytearray:
    """The whole batch for ``block``: the records compressed as one block, then the header with
    the producer's id, epoch and sequence and the CRC over all of it (the buffer it was built
    in: a batch is megabytes at times, and no caller changes it)."""
    if block.num_records <= 0:
        raise ValueError("a record batch needs at least one record")
    body = bytearray(BATCH_HEADER_SIZE)
    body += (block.records if compression == Compression.NONE
             else compress(compression, block.records))
    finish_batch(body, attributes=int(compression) | (TRANSACTIONAL_BIT if is_transactional
                                                      else 0),
                 records_count=block.num_records, base_timestamp=block.base_timestamp,
                 max_timestamp=block.max_timestamp, producer_id=producer_id,
                 producer_epoch=producer_epoch, base_sequence=base_sequence)
    return body


class PartitionResult(NamedTuple):
    error: int
    base_offset: int  # -1 when the broker does not say
    log_append_time: int  # -1 for CreateTime topics


def produce_request(version: int, batches: Iterable[tuple[str, int, bytes | bytearray]], *,
                    acks: int, timeout_ms: int, transactional_id: str | None = None) -> Any:
    """One Produce request carrying ``(topic, partition, batch bytes)``."""
    topics: dict[str, list[Any]] = {}
    for topic, partition, records in batches:
        entry = _PARTITION(index=partition, records=records)
        entries = topics.get(topic)
        if entries is None:
            topics[topic] = [entry]
        else:
            entries.append(entry)
    return make_request(ApiKey.Produce, version, transactional_id=transactional_id, acks=acks,
                        timeout_ms=timeout_ms,
                        topic_data=[_TOPIC(name=name, partition_data=data)
                                    for name, data in topics.items()])


def parse_produce(response: Any) -> dict[TopicPartition, PartitionResult]:
    out: dict[TopicPartition, PartitionResult] = {}
    for topic in response.responses:
        for part in topic.partition_responses:
            append_time = getattr(part, "log_append_time_ms", -1)
            out[TopicPartition(topic.name, part.index)] = PartitionResult(
                part.error_code, part.base_offset, -1 if append_time is None else append_time)
    return out


def init_producer_id_request(version: int, *, transactional_id: str | None = None,
                             transaction_timeout_ms: int = 60_000) -> Any:
    return make_request(ApiKey.InitProducerId, version, transactional_id=transactional_id,
                        transaction_timeout_ms=transaction_timeout_ms, producer_id=-1,
                        producer_epoch=-1)


def parse_init_producer_id(response: Any) -> tuple[int, int, int]:
    """(error code, producer id, producer epoch)"""
    return response.error_code, response.producer_id, response.producer_epoch


__all__ = ["ACKS", "COMPRESSION_TYPES", "MIN_PRODUCE_VERSION", "PartitionResult", "RecordBlock",
           "compression_type", "init_producer_id_request", "parse_init_producer_id",
           "parse_produce", "produce_request", "seal_batch"]
