"""A transactional producer's conversation with its transaction coordinator (the transactional
half of Kafka's ``TransactionManager``).

Why the sender asks before it sends: a record may go to a partition only once the coordinator
has added that partition to the transaction (AddPartitionsToTxn), so the sender adds every
partition it is about to send to first (``add_partitions``), in one request. Under transaction
version 2 (KIP-890 part 2: the coordinator's broker finalizes ``transaction.version`` 2, decided
at each ``begin``) it does not: Produce v12 adds the partition and TxnOffsetCommit v5 the group,
and EndTxn v5 answers the bumped epoch (or a new producer id) the next transaction uses.
Commit flushes every record and then ends the transaction (EndTxn); abort waits for what is in
flight and ends it; ``send_offsets`` adds a group's offsets (AddOffsetsToTxn, then
TxnOffsetCommit to the group's coordinator). Errors keep Kafka's names
(``ProducerFencedError``, ``InvalidProducerEpochError``, ``InvalidTxnStateError``...): a fenced
producer can do nothing more, any other failure inside a transaction means the application must
abort it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import trio

from ....protocol.api_keys import ApiKey, request_class
from ....protocol.errors import ErrorCode
from ....protocol.messages import make_request
from ...core.errors import KafkaError, error_for
from ...core.groups import (
    GROUP_KEY,
    TRANSACTION_KEY,
    find_coordinator_request,
    parse_find_coordinator,
)
from ...core.produce import parse_init_producer_id
from ...core.structs import TopicPartition
from ...core.versions import TRANSACTION_VERSION_2, transaction_version_2
from ..network import NetworkClient

LOGGER = logging.getLogger(__name__)

_APT = request_class(ApiKey.AddPartitionsToTxn)
_TOC = request_class(ApiKey.TxnOffsetCommit)
_FENCED = (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH)


class TransactionalState:
    """The transactional id, its coordinator, and the partitions of the open transaction."""

    def __init__(self, transactional_id: str, timeout_ms: int) -> None:
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.in_transaction = False
        self.added: set[tuple[str, int]] = set()
        self.offsets_added = False
        #: the error that dooms the open transaction (abort is the only way on); fatal if fenced
        self.error: KafkaError | None = None
        self.fenced = False
        #: this transaction speaks transaction version 2 (``refresh_version``)
        self.v2 = False
        self._coordinator: int | None = None

    def version(self, api_key: int) -> int | None:
        """The version to pin for ``api_key`` in this transaction (None: negotiate, which stays
        below every version-2 version: a broker takes Produce v12 for version 2)."""
        return TRANSACTION_VERSION_2.get(api_key) if self.v2 else None

    async def refresh_version(self, client: NetworkClient) -> None:
        """Decide, for the transaction about to begin, whether to speak version 2 (from the
        coordinator's ApiVersions, as Java decides at each beginTransaction)."""
        conn = await client.connection(await self.coordinator(client))
        self.v2 = transaction_version_2(conn.api_versions, conn.finalized_features)

    async def coordinator(self, client: NetworkClient, key: str = "",
                          key_type: int = TRANSACTION_KEY) -> int:
        """The node id of the coordinator of ``key`` (the transactional id by default)."""
        if key_type == TRANSACTION_KEY and self._coordinator is not None:
            return self._coordinator
        found = parse_find_coordinator(await client.request_any(
            ApiKey.FindCoordinator,
            lambda v: find_coordinator_request(v, key or self.transactional_id, key_type)))
        if found.error:
            raise error_for(found.error, f"FindCoordinator for {key or self.transactional_id!r}")
        node = client.coordinator_node(found.node_id, found.host, found.port)
        if key_type == TRANSACTION_KEY:
            self._coordinator = node
        return node

    async def _call(self, client: NetworkClient, api_key: int, fields: dict[str, Any],
                    what: str, version: int | None = None) -> Any:
        """One request to the transaction coordinator, retrying retriable errors."""
        attempts = 0
        while True:
            node = await self.coordinator(client)
            response = await client.request(node, api_key,
                                            lambda v: make_request(api_key, v, **fields),
                                            version=version)
            code = _first_error(response)
            if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self._coordinator = None
            if code == ErrorCode.NONE:
                return response
            error = error_for(code, f"{what} for transactional id {self.transactional_id!r}")
            if code in _FENCED:
                self.fenced = True
                self.error = error
                raise error
            if not error.retriable or attempts >= 20:
                raise error
            attempts += 1
            await trio.sleep(client.retry_backoff.backoff_ms(attempts - 1) / 1000)

    async def init_producer_id(self, client: NetworkClient) -> tuple[int, int]:
        response = await self._call(client, ApiKey.InitProducerId, {
            "transactional_id": self.transactional_id,
            "transaction_timeout_ms": self.timeout_ms, "producer_id": -1,
            "producer_epoch": -1}, "InitProducerId")
        _, producer_id, epoch = parse_init_producer_id(response)
        return producer_id, epoch

    async def add_partitions(self, client: NetworkClient, producer_id: int, epoch: int,
                             partitions: Iterable[tuple[str, int]]) -> None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(set(partitions) - self.added):
            by_topic.setdefault(topic, []).append(partition)
        if not by_topic:
            return
        await self._call(client, ApiKey.AddPartitionsToTxn, {
            "v3_and_below_transactional_id": self.transactional_id,
            "v3_and_below_producer_id": producer_id, "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [_APT.AddPartitionsToTxnTopic(name=t, partitions=p)
                                    for t, p in by_topic.items()]}, "AddPartitionsToTxn")
        self.added.update((t, p) for t, parts in by_topic.items() for p in parts)

    async def send_offsets(self, client: NetworkClient, producer_id: int, epoch: int,
                           offsets: Mapping[TopicPartition, int], group_id: str,
                           generation_id: int = -1, member_id: str = "") -> None:
        if not self.v2:  # version 2: TxnOffsetCommit v5 adds the group itself
            await self._call(client, ApiKey.AddOffsetsToTxn, {
                "transactional_id": self.transactional_id, "producer_id": producer_id,
                "producer_epoch": epoch, "group_id": group_id}, "AddOffsetsToTxn")
        self.offsets_added = True
        by_topic: dict[str, list[Any]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                _TOC.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                    partition_index=tp.partition, committed_offset=offset,
                    committed_metadata=None))
        fields = {"transactional_id": self.transactional_id, "group_id": group_id,
                  "producer_id": producer_id, "producer_epoch": epoch,
                  "generation_id": generation_id, "member_id": member_id,
                  "topics": [_TOC.TxnOffsetCommitRequestTopic(name=t, partitions=p)
                             for t, p in by_topic.items()]}
        node = await self.coordinator(client, group_id, key_type=GROUP_KEY)
        response = await client.request(node, ApiKey.TxnOffsetCommit,
                                        lambda v: make_request(ApiKey.TxnOffsetCommit, v,
                                                               **fields),
                                        version=self.version(ApiKey.TxnOffsetCommit))
        code = _first_error(response)
        if code:
            error = error_for(code, f"TxnOffsetCommit for group {group_id!r}")
            if code in _FENCED:
                self.fenced = True
                self.error = error
            raise error

    async def end(self, client: NetworkClient, producer_id: int, epoch: int,
                  committed: bool) -> tuple[int, int] | None:
        """EndTxn; under version 2, the producer id and epoch to go on with (None: the same)."""
        bumped = None
        if self.added or self.offsets_added:  # else the coordinator holds no transaction
            response = await self._call(client, ApiKey.EndTxn, {
                "transactional_id": self.transactional_id, "producer_id": producer_id,
                "producer_epoch": epoch, "committed": committed}, "EndTxn",
                version=self.version(ApiKey.EndTxn))
            if self.v2:
                bumped = response.producer_id, response.producer_epoch
        self.added = set()
        self.offsets_added = False
        return bumped


def _first_error(response: Any) -> int:
    """The first error code anywhere in a transactional API's response."""
    code = getattr(response, "error_code", 0)
    if code:
        return int(code)
    for topic in (getattr(response, "results_by_topic_v3_and_below", None) or
                  getattr(response, "topics", None) or []):
        for part in (getattr(topic, "results_by_partition", None) or
                     getattr(topic, "partitions", None) or []):
            code = getattr(part, "partition_error_code", None)
            if code is None:
                code = getattr(part, "error_code", 0)
            if code:
                return int(code)
    return 0


__all__ = ["TransactionalState"]
