"""The admin client: topics, partitions, configs, consumer groups and offsets.

Why requests are routed the way Kafka's ``KafkaAdminClient`` routes them: topic creation,
deletion and partition changes go to the controller (``NOT_CONTROLLER`` means the metadata is
stale: refresh and retry), group operations to the group's coordinator, ListGroups to every
broker (each knows only the groups it coordinates), offsets to each partition's leader, and the
rest to the least loaded broker. Each call retries retriable errors until
``default.api.timeout.ms`` and raises the first other error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

import trio

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..core import admin as requests
from ..core import groups as group_requests
from ..core.admin import BROKER_RESOURCE, TOPIC_RESOURCE
from ..core.admin import ConfigEntry as ConfigEntry
from ..core.admin import ConfigSource as ConfigSource
from ..core.admin import NewTopic as NewTopic
from ..core.errors import KafkaError, KafkaTimeoutError, describe_code, error_for
from ..core.groups import GroupDescription as GroupDescription
from ..core.groups import GroupListing as GroupListing
from ..core.groups import MemberDescription as MemberDescription
from ..core.metadata import metadata_request
from ..core.structs import (
    EARLIEST,
    LATEST,
    BrokerInfo,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    PartitionInfo,
    TopicPartition,
)
from .config import ADMIN_DEFAULTS, normalize
from .consumer.committed_offsets import fetch_committed
from .consumer.coordinator_lookup import CoordinatorLookup
from .network import NetworkClient
from .offsets import list_offsets


class TopicDescription(NamedTuple):
    name: str
    internal: bool
    partitions: list[PartitionInfo]


class ClusterDescription(NamedTuple):
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerInfo]


class _Final(Exception):
    """A per-resource error the broker settled (e.g. the topic exists): not to be retried."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__(error)
        self.error = error


_RETRY_CODES = frozenset({ErrorCode.NOT_CONTROLLER, ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                          ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                          ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})


class Admin:
    """A Kafka admin client for Trio; make one with ``open_admin``."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self._client = NetworkClient(config, allow_auto_topic_creation=False)
        self._timeout_s = config["default.api.timeout.ms"] / 1000
        self._request_timeout_ms = config["request.timeout.ms"]

    @property
    def client(self) -> NetworkClient:
        return self._client

    # --- plumbing ----------------------------------------------------------------------------

    async def _retrying(self, call: Any) -> Any:
        """Run ``call()`` until it returns, retrying retriable KafkaErrors until the timeout."""
        attempts = 0
        last: KafkaError | None = None
        with trio.move_on_after(self._timeout_s):
            while True:
                try:
                    return await call()
                except _Final as final:
                    raise final.error from None
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    last = exc
                    self._client.request_update()
                await trio.sleep(self._client.retry_backoff.backoff_ms(attempts) / 1000)
                attempts += 1
        raise KafkaTimeoutError(f"admin call timed out after {self._timeout_s * 1000:.0f} ms"
                                + (f"; last error: {last!r}" if last else ""))

    async def _controller(self) -> int:
        metadata = self._client.metadata
        if metadata.controller_id not in metadata.brokers:
            await self._client.refresh_metadata()
        if metadata.controller_id in metadata.brokers:
            return metadata.controller_id
        return self._client.least_loaded_node()  # e.g. a controller id naming no broker

    async def _to_controller(self, api_key: int, body: Any) -> Any:
        response = await self._client.request(await self._controller(), api_key, body)
        return response

    @staticmethod
    def _raise_first(results: Iterable[tuple[str, int, str | None]], what: str) -> None:
        """Raise for the first (name, error code, message) whose code is not NONE.

        As in Kafka's admin client, only "ask someone else / later" codes are retried; any other
        per-resource error is the answer.
        """
        for name, code, message in results:
            if code == ErrorCode.NONE:
                continue
            error = error_for(code, f"{what} {name!r}: {describe_code(code)}"
                              + (f": {message}" if message else ""))
            if code in _RETRY_CODES:
                error.retriable = True
                raise error
            raise _Final(error)

    # --- topics ------------------------------------------------------------------------------

    async def create_topics(self, topics: Iterable[NewTopic], *, validate_only: bool = False,
                            ) -> None:
        """Create ``topics``; raises the first topic's error (e.g. ``TopicAlreadyExistsError``).
        """
        wanted = list(topics)

        def build(version: int) -> Any:
            return requests.create_topics_request(version, wanted,
                                                  timeout_ms=self._request_timeout_ms,
                                                  validate_only=validate_only)

        async def call() -> None:
            response = await self._to_controller(ApiKey.CreateTopics, build)
            self._raise_first(requests.parse_create_topics(response), "creating topic")

        await self._retrying(call)

    async def delete_topics(self, names: Iterable[str]) -> None:
        names = list(names)

        async def call() -> None:
            response = await self._to_controller(ApiKey.DeleteTopics, lambda v: (
                requests.delete_topics_request(v, names, timeout_ms=self._request_timeout_ms)))
            self._raise_first(requests.parse_delete_topics(response), "deleting topic")

        await self._retrying(call)

    async def create_partitions(self, new_counts: Mapping[str, int], *,
                                validate_only: bool = False) -> None:
        """Grow each topic to the given total number of partitions."""
        async def call() -> None:
            response = await self._to_controller(ApiKey.CreatePartitions, lambda v: (
                requests.create_partitions_request(v, new_counts,
                                                   timeout_ms=self._request_timeout_ms,
                                                   validate_only=validate_only)))
            self._raise_first(requests.parse_create_partitions(response),
                              "creating partitions of")

        await self._retrying(call)

    async def _metadata(self, names: list[str] | None) -> Any:
        return await self._retrying(lambda: self._client.request_any(
            ApiKey.Metadata, lambda v: metadata_request(v, names)))

    async def list_topics(self, *, internal: bool = False) -> set[str]:
        response = await self._metadata(None)
        return {t.name for t in response.topics
                if t.error_code == 0 and (internal or not getattr(t, "is_internal", False))}

    async def describe_topics(self, names: Iterable[str] | None = None,
                              ) -> dict[str, TopicDescription]:
        """Partitions, leaders and replicas; raises ``UnknownTopicOrPartitionError`` for a
        missing topic."""
        response = await self._metadata(None if names is None else list(names))
        result: dict[str, TopicDescription] = {}
        for t in response.topics:
            if t.error_code:
                raise error_for(t.error_code, f"describing topic {t.name!r}: "
                                f"{describe_code(t.error_code)}")
            parts = sorted((PartitionInfo(p.partition_index, p.leader_id,
                                          tuple(p.replica_nodes or ()), tuple(p.isr_nodes or ()),
                                          p.error_code) for p in t.partitions or ()),
                           key=lambda p: p.partition)
            result[t.name] = TopicDescription(t.name, bool(getattr(t, "is_internal", False)),
                                              parts)
        return result

    async def describe_cluster(self) -> ClusterDescription:
        response = await self._metadata([])
        brokers = [BrokerInfo(b.node_id, b.host, b.port, getattr(b, "rack", None))
                   for b in response.brokers]
        controller = getattr(response, "controller_id", -1)
        return ClusterDescription(getattr(response, "cluster_id", None),
                                  -1 if controller is None else controller, brokers)

    # --- configs -----------------------------------------------------------------------------

    async def describe_topic_configs(self, *topics: str,
                                     ) -> dict[str, dict[str, ConfigEntry]]:
        return await self._describe_configs(TOPIC_RESOURCE, list(topics), None)

    async def describe_broker_configs(self, broker_id: int) -> dict[str, ConfigEntry]:
        result = await self._describe_configs(BROKER_RESOURCE, [str(broker_id)], broker_id)
        return result[str(broker_id)]

    async def _describe_configs(self, resource_type: int, names: list[str],
                                node_id: int | None) -> dict[str, dict[str, ConfigEntry]]:
        def body(version: int) -> Any:
            return requests.describe_configs_request(version, [(resource_type, n)
                                                               for n in names])

        async def call() -> Any:
            if node_id is None:
                return await self._client.request_any(ApiKey.DescribeConfigs, body)
            return await self._client.request(node_id, ApiKey.DescribeConfigs, body)

        results = requests.parse_describe_configs(await self._retrying(call))
        self._raise_first(((name, code, message) for name, code, message, _ in results),
                          "describing configs of")
        return {name: entries for name, _, _, entries in results}

    async def alter_topic_configs(self, topic: str, configs: Mapping[str, str | None], *,
                                  validate_only: bool = False) -> None:
        """Replace the topic's config overrides with ``configs`` (AlterConfigs semantics:
        overrides not named here return to their defaults)."""
        async def call() -> None:
            response = await self._client.request_any(ApiKey.AlterConfigs, lambda v: (
                requests.alter_configs_request(v, TOPIC_RESOURCE, topic, configs,
                                               validate_only=validate_only)))
            self._raise_first(requests.parse_alter_configs(response), "altering configs of")

        await self._retrying(call)

    # --- groups ------------------------------------------------------------------------------

    async def list_groups(self) -> list[GroupListing]:
        """Every group on every broker."""
        await self._retrying(self._client.refresh_metadata)
        listings: list[GroupListing] = []
        errors: list[KafkaError] = []

        async def ask(node_id: int) -> None:
            try:
                code, found = group_requests.parse_list_groups(await self._retrying(
                    lambda: self._client.request(node_id, ApiKey.ListGroups,
                                                 group_requests.list_groups_request)))
            except KafkaError as exc:
                errors.append(exc)
                return
            if code:
                errors.append(error_for(code, f"ListGroups on node {node_id}: "
                                        f"{describe_code(code)}"))
                return
            listings.extend(found)

        async with trio.open_nursery() as nursery:
            for node_id in self._client.metadata.brokers:
                nursery.start_soon(ask, node_id)
        if errors:
            raise errors[0]
        return sorted(listings)

    async def _coordinator(self, group_id: str) -> CoordinatorLookup:
        lookup = CoordinatorLookup(self._client, group_id)
        with trio.fail_after(self._timeout_s):
            await lookup.find()
        return lookup

    async def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        result: dict[str, GroupDescription] = {}
        for group_id in group_ids:
            result[group_id] = await self._describe_group(group_id)
        return result

    async def _describe_group(self, group_id: str) -> GroupDescription:
        async def call() -> GroupDescription:
            lookup = await self._coordinator(group_id)
            response = await lookup.request(ApiKey.DescribeGroups, lambda v: (
                group_requests.describe_groups_request(v, [group_id])))
            [(code, description)] = group_requests.parse_describe_groups(response)
            if code == ErrorCode.GROUP_ID_NOT_FOUND or (not code and description.state == "Dead"):
                # not a classic group (DescribeGroups v6+ says so; older versions say Dead):
                # a KIP-848 group is described by ConsumerGroupDescribe, as Kafka's admin does
                answer = await lookup.request(ApiKey.ConsumerGroupDescribe, lambda v: (
                    group_requests.consumer_group_describe_request(v, group_id)))
                consumer_code, consumer = group_requests.parse_consumer_group_describe(answer)
                if not consumer_code:
                    return consumer
            if code:
                if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                    lookup.mark_unknown()
                raise error_for(code, f"describing group {group_id!r}: {describe_code(code)}")
            return description

        result: GroupDescription = await self._retrying(call)
        return result

    async def delete_groups(self, group_ids: Iterable[str]) -> None:
        """Delete empty groups (``NonEmptyGroupError`` while members remain)."""
        for group_id in group_ids:
            async def call(group_id: str = group_id) -> None:
                lookup = await self._coordinator(group_id)
                results = group_requests.parse_delete_groups(await lookup.request(
                    ApiKey.DeleteGroups,
                    lambda v: group_requests.delete_groups_request(v, [group_id])))
                if any(code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE)
                       for code in results.values()):
                    lookup.mark_unknown()
                self._raise_first(((g, code, None) for g, code in results.items()),
                                  "deleting group")

            await self._retrying(call)

    async def list_consumer_group_offsets(self, group_id: str,
                                          ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed (offset, metadata) of every partition the group committed."""
        lookup = await self._coordinator(group_id)
        return await fetch_committed(lookup, self._client, None, timeout_s=self._timeout_s)

    # --- offsets -----------------------------------------------------------------------------

    async def list_offsets(self, specs: Mapping[TopicPartition, str | int],
                           ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Per partition: ``"earliest"``, ``"latest"`` or a timestamp in ms (the earliest offset
        whose record timestamp is at least it; offset -1 when there is none)."""
        timestamps: dict[TopicPartition, int] = {}
        for tp, spec in specs.items():
            if spec == "earliest":
                timestamps[TopicPartition(*tp)] = EARLIEST
            elif spec == "latest":
                timestamps[TopicPartition(*tp)] = LATEST
            elif isinstance(spec, int) and spec >= 0:
                timestamps[TopicPartition(*tp)] = spec
            else:
                raise ValueError(f"offset spec {spec!r}: use 'earliest', 'latest' or a "
                                 "timestamp in ms")
        return await list_offsets(self._client, timestamps, timeout_s=self._timeout_s)


@asynccontextmanager
async def open_admin(bootstrap_servers: str | list[str] | None = None, *,
                     config: Mapping[str, Any] | None = None,
                     **kwargs: Any) -> AsyncIterator[Admin]:
    """An admin client whose background tasks live exactly as long as the ``async with``."""
    if bootstrap_servers is not None:
        kwargs["bootstrap_servers"] = bootstrap_servers
    admin = Admin(normalize("admin", ADMIN_DEFAULTS, config, kwargs))
    async with trio.open_nursery() as nursery:
        admin.client.start(nursery)
        try:
            yield admin
        finally:
            admin.client.close()
            nursery.cancel_scope.cancel()


__all__ = ["Admin", "ClusterDescription", "ConfigEntry", "ConfigSource", "GroupDescription",
           "GroupListing", "MemberDescription", "NewTopic", "TopicDescription", "open_admin"]
