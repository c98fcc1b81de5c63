"""ListOffsets: offsets by timestamp (-2 earliest, -1 latest), asked of each partition's leader.

Why shared: the consumer resets positions with it, the consumer's and the admin client's offset
queries expose it; all need the same leader routing and the same retry of stale-metadata errors.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import trio

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..core.errors import KafkaError, KafkaTimeoutError, describe_code, error_for
from ..core.offsets import READ_UNCOMMITTED, list_offsets_request, parse_list_offsets
from ..core.structs import OffsetAndTimestamp, TopicPartition
from .network import NetworkClient

LOGGER = logging.getLogger(__name__)


async def list_offsets(client: NetworkClient, timestamps: Mapping[TopicPartition, int], *,
                       timeout_s: float, isolation_level: int = READ_UNCOMMITTED
                       ) -> dict[TopicPartition, OffsetAndTimestamp]:
    """The offset for each partition's timestamp (``EARLIEST``, ``LATEST`` or ms since epoch);
    under ``READ_COMMITTED``, ``LATEST`` is the last stable offset.

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
                    nursery.start_soon(_ask_node, client, node_id, wanted, result, errors,
                                       isolation_level)
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
                    errors: list[KafkaError], isolation_level: int) -> None:
    try:
        response = await client.request(
            node_id, ApiKey.ListOffsets,
            lambda v: list_offsets_request(v, wanted, isolation_level=isolation_level))
    except KafkaError as exc:
        errors.append(exc)
        return
    for tp, (code, found) in parse_list_offsets(response).items():
        if tp not in wanted:
            continue
        if code == ErrorCode.NONE:
            result[tp] = found
        else:
            errors.append(error_for(code, f"ListOffsets for {tp.topic}-{tp.partition}: "
                                    f"{describe_code(code)}"))
