"""Produce and InitProducerId: building the requests and reading the answers.

Batches arrive here as bytes (``protocol.records.build_batch``): a producer encodes each batch
once, and a retry resends the same bytes so the broker recognises duplicates by sequence.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from ..protocol.api_keys import ApiKey, request_class
from ..protocol.messages import make_request
from .structs import TopicPartition

_PRODUCE: Any = request_class(ApiKey.Produce)
_TOPIC = _PRODUCE.TopicProduceData
_PARTITION = _TOPIC.PartitionProduceData

#: ``acks`` values by every name Kafka's clients accept
ACKS = {"all": -1, "-1": -1, "0": 0, "1": 1, -1: -1, 0: 0, 1: 1}


class PartitionResult(NamedTuple):
    error: int
    base_offset: int  # -1 when the broker does not say
    log_append_time: int  # -1 for CreateTime topics


def produce_request(version: int, batches: Iterable[tuple[str, int, bytes]], *, acks: int,
                    timeout_ms: int, transactional_id: str | None = None) -> Any:
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


__all__ = ["ACKS", "PartitionResult", "init_producer_id_request", "parse_init_producer_id",
           "parse_produce", "produce_request"]
