"""A consumer group's coordinator, as a client sees it: finding it (FindCoordinator), asking it
(a broken connection or a retriable error means: find it again), and the offsets it keeps
(OffsetCommit, OffsetFetch, each retried until its deadline).

Shared by the group members of both protocols (``group_coordinator``, ``consumer_member``), the
consumer's positions, the admin client and the web console's writes.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import trio

from ....protocol.api_keys import ApiKey
from ....protocol.errors import ErrorCode
from ...core import groups as requests
from ...core.errors import KafkaConnectionError, KafkaError, describe_code, error_for
from ...core.offsets import (
    offset_commit_request,
    offset_fetch_request,
    parse_offset_commit,
    parse_offset_fetch,
)
from ...core.structs import OffsetAndMetadata, TopicPartition
from ..network import NetworkClient

LOGGER = logging.getLogger(__name__)

#: answers that mean "ask FindCoordinator again"
COORDINATOR_ERRORS = frozenset({
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
})

OffsetMap = Mapping[TopicPartition, OffsetAndMetadata]
T = TypeVar("T")


class CoordinatorLookup:
    """Finds and remembers a group's coordinator node (FindCoordinator, key type 0)."""

    def __init__(self, client: NetworkClient, group_id: str) -> None:
        self._client = client
        self.group_id = group_id
        self.node_id: int | None = None

    def mark_unknown(self) -> None:
        if self.node_id is not None:
            LOGGER.info("group %s: coordinator node %s marked unknown", self.group_id,
                        self.node_id)
        self.node_id = None

    async def find(self) -> int:
        """The coordinator's node id, asking the least loaded broker until one answers."""
        attempts = 0
        while self.node_id is None:
            try:
                found = requests.parse_find_coordinator(await self._client.request_any(
                    ApiKey.FindCoordinator,
                    lambda v: requests.find_coordinator_request(v, self.group_id)))
                code = found.error
                if code == ErrorCode.NONE:
                    self.node_id = self._client.coordinator_node(found.node_id, found.host,
                                                                 found.port)
                    break
                error = error_for(code, f"FindCoordinator for group {self.group_id!r}: "
                                  f"{describe_code(code)}")
                if not error.retriable:
                    raise error
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                error = exc
            LOGGER.debug("group %s: FindCoordinator failed: %r", self.group_id, error)
            await trio.sleep(self._client.retry_backoff.backoff_ms(attempts) / 1000)
            attempts += 1
        return self.node_id

    def error(self, code: int, message: str) -> KafkaError:
        """The error for an answer's ``code``; one saying this node is not (or no longer) the
        coordinator marks it unknown, so the next request finds it again."""
        if code in COORDINATOR_ERRORS:
            self.mark_unknown()
        return error_for(code, message)

    async def request(self, api_key: int, body: Any, *, timeout_s: float | None = None,
                      version: int | None = None) -> Any:
        """A request to the coordinator; a broken connection marks the coordinator unknown."""
        node_id = await self.find()
        try:
            return await self._client.request(node_id, api_key, body, timeout_s=timeout_s,
                                              version=version)
        except KafkaConnectionError:
            self.mark_unknown()
            raise
        except KafkaError as exc:
            if exc.retriable:
                self.mark_unknown()
            raise


async def commit_offsets(coordinator: CoordinatorLookup, client: NetworkClient,
                         offsets: OffsetMap, *, generation: int, member_id: str,
                         timeout_s: float, version: int | None = None) -> None:
    """OffsetCommit, retrying retriable errors until ``timeout_s``; raises the rest.
    ``version`` pins one (a consumer-protocol member commits at v9+, with its epoch)."""
    if not offsets:
        await trio.lowlevel.checkpoint()
        return
    group_id = coordinator.group_id

    def body(version: int) -> Any:
        return offset_commit_request(version, group_id, offsets, generation=generation,
                                     member_id=member_id)

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


__all__ = ["COORDINATOR_ERRORS", "CoordinatorLookup", "OffsetMap", "commit_offsets",
           "fetch_committed"]
