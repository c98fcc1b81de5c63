"""ListOffsets: offsets by timestamp (-2 earliest, -1 latest), asked of each partition's leader.

Why shared: the consumer resets positions with it, the consumer's and the admin client's offset
queries expose it; all need the same leader routing and the same retry of stale-metadata errors.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, NamedTuple

import trio

from ..client_core.errors import KafkaError, KafkaTimeoutError, describe_code, error_for
from ..protocol.api_keys import ApiKey, request_class
from ..protocol.errors import ErrorCode
from .metadata import TopicPartition
from .network import NetworkClient

LOGGER = logging.getLogger(__name__)

EARLIEST = -2
LATEST = -1


class OffsetAndTimestamp(NamedTuple):
    offset: int  # -1 when no record has a timestamp at or after the one asked for
    timestamp: int


async def list_offsets(client: NetworkClient, timestamps: Mapping[TopicPartition, int], *,
                       timeout_s: float) -> dict[TopicPartition, OffsetAndTimestamp]:
    """The offset for each partition's timestamp (``EARLIEST``, ``LATEST`` or ms since epoch).

    Retries retriable errors (refreshing metadata) until ``timeout_s``; raises the others.
    """
    result: dict[TopicPartition, OffsetAndTimestamp] = {}
    remaining = dict(timestamps)
    attempts = 0
    with trio.move_on_after(timeout_s):
        while remaining:
            for topic in {tp.topic for tp in remaining}:
                await client.wait_for_topic(topic, timeout_s)
            by_node: dict[int, dict[TopicPartition, int]] = {}
            for tp, ts in remaining.items():
                leader = client.metadata.leader_for(tp)
                if leader < 0:
                    info = client.metadata.topics.get(tp.topic)
                    if info is not None and tp.partition not in info.partitions:
                        raise error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                        f"topic {tp.topic!r} has no partition {tp.partition}")
                    continue
                by_node.setdefault(leader, {})[tp] = ts
            errors: list[KafkaError] = []
            async with trio.open_nursery() as nursery:
                for node_id, wanted in by_node.items():
                    nursery.start_soon(_ask_node, client, node_id, wanted, result, errors)
            for tp in result:
                remaining.pop(tp, None)
            fatal = [e for e in errors if not e.retriable]
            if fatal:
                raise fatal[0]
            if remaining:
                client.request_update()
                await trio.sleep(client.retry_backoff.backoff_ms(attempts) / 1000)
                attempts += 1
        return result
    raise KafkaTimeoutError(f"ListOffsets for {sorted(remaining)} did not complete within "
                            f"{timeout_s * 1000:.0f} ms")


async def _ask_node(client: NetworkClient, node_id: int, wanted: dict[TopicPartition, int],
                    result: dict[TopicPartition, OffsetAndTimestamp],
                    errors: list[KafkaError]) -> None:
    cls = request_class(ApiKey.ListOffsets)
    assert cls is not None
    topic_cls = cls.ListOffsetsTopic
    part_cls = topic_cls.ListOffsetsPartition
    by_topic: dict[str, list[Any]] = {}
    for tp, ts in wanted.items():
        by_topic.setdefault(tp.topic, []).append(part_cls(
            partition_index=tp.partition, current_leader_epoch=-1, timestamp=ts,
            max_num_offsets=1))
    body = {"replica_id": -1, "isolation_level": 0,
            "topics": [topic_cls(name=t, partitions=p) for t, p in by_topic.items()]}
    try:
        response = await client.request(node_id, ApiKey.ListOffsets, body)
    except KafkaError as exc:
        errors.append(exc)
        return
    for topic in response.topics:
        for part in topic.partitions:
            tp = TopicPartition(topic.name, part.partition_index)
            if tp not in wanted:
                continue
            if part.error_code == ErrorCode.NONE:
                offset = part.offset
                if offset is None or (offset == -1 and part.old_style_offsets):
                    offset = part.old_style_offsets[0]
                result[tp] = OffsetAndTimestamp(offset, part.timestamp)
            else:
                errors.append(error_for(part.error_code, f"ListOffsets for {tp.topic}-"
                                        f"{tp.partition}: {describe_code(part.error_code)}"))
