"""A consumer group's coordinator, as a client sees it (``CoordinatorLookup``): finding it
(FindCoordinator) and asking it; a broken connection or an answer saying it is not (or no longer)
the coordinator means: find it again.

Shared by the group members of both protocols (``classic_member``, ``consumer_member``), the
committed-offsets calls (``committed_offsets``), the admin client and the web console's writes.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from ....protocol.api_keys import ApiKey
from ....protocol.errors import ErrorCode
from ...core import groups as requests
from ...core.errors import KafkaConnectionError, KafkaError, describe_code, error_for
from ..network import NetworkClient

LOGGER = logging.getLogger(__name__)

#: answers that mean "ask FindCoordinator again"
COORDINATOR_ERRORS = frozenset({
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
})


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


__all__ = ["COORDINATOR_ERRORS", "CoordinatorLookup"]
