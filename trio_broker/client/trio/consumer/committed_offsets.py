"""A group's committed offsets, asked of its coordinator: OffsetCommit and OffsetFetch, each
retried until its deadline.

Why apart from the membership: commits and fetches are made by the consumer (its commits and
positions), by the admin client and by the web console, whichever group protocol a member
speaks; the membership only supplies the identity a commit carries (``commit_identity``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import trio

from ....protocol.api_keys import ApiKey
from ....protocol.errors import ErrorCode
from ...core.errors import KafkaError, describe_code
from ...core.offsets import (
    offset_commit_request,
    offset_fetch_request,
    parse_offset_commit,
    parse_offset_fetch,
)
from ...core.structs import OffsetAndMetadata, TopicPartition
from ..network import NetworkClient
from .coordinator_lookup import CoordinatorLookup

LOGGER = logging.getLogger(__name__)

OffsetMap = Mapping[TopicPartition, OffsetAndMetadata]
T = TypeVar("T")


async def commit_offsets(coordinator: CoordinatorLookup, client: NetworkClient,
                         offsets: OffsetMap, *, generation: int, member_id: str,
                         timeout_s: float, version: int | None = None,
                         group_instance_id: str | None = None) -> None:
    """OffsetCommit, retrying retriable errors until ``timeout_s``; raises the rest.
    ``version`` pins one (a consumer-protocol member commits at v9+, with its epoch)."""
    if not offsets:
        await trio.lowlevel.checkpoint()
        return
    group_id = coordinator.group_id

    def body(version: int) -> Any:
        return offset_commit_request(version, group_id, offsets, generation=generation,
                                     member_id=member_id, group_instance_id=group_instance_id)

    async def commit() -> None:
        response = await coordinator.request(ApiKey.OffsetCommit, body, version=version)
        for tp, code in parse_offset_commit(response).items():
            if code:
                raise coordinator.error(code, f"committing {tp.topic}-{tp.partition}: "
                                        f"{describe_code(code)}")

    await _retrying(client, timeout_s, "commit", commit)


async def fetch_committed(coordinator: CoordinatorLookup, client: NetworkClient,
                          partitions: Iterable[TopicPartition] | None, *,
                          timeout_s: float) -> dict[TopicPartition, OffsetAndMetadata]:
    """OffsetFetch: committed (offset, metadata) per partition; partitions never committed are
    absent. ``partitions=None`` asks for every partition the group committed."""
    group_id = coordinator.group_id
    wanted = None if partitions is None else list(partitions)

    def body(version: int) -> Any:
        return offset_fetch_request(version, group_id, wanted)

    async def fetch() -> dict[TopicPartition, OffsetAndMetadata]:
        code, result = parse_offset_fetch(await coordinator.request(ApiKey.OffsetFetch, body))
        if code != ErrorCode.NONE:
            raise coordinator.error(code, f"OffsetFetch for group {group_id!r}: "
                                    f"{describe_code(code)}")
        return result

    return await _retrying(client, timeout_s, "offset fetch", fetch)


async def _retrying(client: NetworkClient, timeout_s: float, what: str,
                    attempt: Callable[[], Awaitable[T]]) -> T:
    """``attempt()`` until it returns, retrying retriable errors with the client's backoff, for
    at most ``timeout_s`` (then ``trio.TooSlowError``); other errors are raised."""
    attempts = 0
    with trio.fail_after(timeout_s):
        while True:
            try:
                return await attempt()
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                LOGGER.debug("%s failed (%r); retrying", what, exc)
            await trio.sleep(client.retry_backoff.backoff_ms(attempts) / 1000)
            attempts += 1


__all__ = ["OffsetMap", "commit_offsets", "fetch_committed"]
