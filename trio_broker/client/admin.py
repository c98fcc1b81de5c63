"""The admin client: topics, partitions, configs, consumer groups and offsets.

Why requests are routed the way Kafka's ``KafkaAdminClient`` routes them: topic creation,
deletion and partition changes go to the controller (``NOT_CONTROLLER`` means the metadata is
stale: refresh and retry), group operations to the group's coordinator, ListGroups to every
broker (each knows only the groups it coordinates), offsets to each partition's leader, and the
rest to the least loaded broker. Each call retries retriable errors until
``default.api.timeout.ms`` and raises the first other error.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

import trio

from ..client_core.errors import KafkaError, KafkaTimeoutError, describe_code, error_for
from ..protocol.api_keys import ApiKey, request_class
from ..protocol.errors import ErrorCode
from .assignors import ProtocolPayloadError, decode_assignment
from .config import ADMIN_DEFAULTS, normalize
from .group import CoordinatorLookup, fetch_committed
from .metadata import BrokerInfo, PartitionInfo, TopicPartition
from .network import NetworkClient
from .offsets import EARLIEST, LATEST, OffsetAndTimestamp, list_offsets


class NewTopic(NamedTuple):
    """A topic to create; -1 partitions or replication factor means the broker's default."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] | None = None


class TopicDescription(NamedTuple):
    name: str
    internal: bool
    partitions: list[PartitionInfo]


class ClusterDescription(NamedTuple):
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerInfo]


class ConfigSource(enum.IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ConfigEntry(NamedTuple):
    name: str
    value: str | None
    read_only: bool
    source: int
    sensitive: bool


class GroupListing(NamedTuple):
    group_id: str
    protocol_type: str


class MemberDescription(NamedTuple):
    member_id: str
    client_id: str
    client_host: str
    assignment: frozenset[TopicPartition]


class GroupDescription(NamedTuple):
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]


class _Final(Exception):
    """A per-resource error the broker settled (e.g. the topic exists): not to be retried."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__(error)
        self.error = error


_RETRY_CODES = frozenset({ErrorCode.NOT_CONTROLLER, ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                          ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                          ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})

_TOPIC_RESOURCE = 2
_BROKER_RESOURCE = 4


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
        cls = request_class(ApiKey.CreateTopics)
        assert cls is not None
        topic_cls = cls.CreatableTopic
        config_cls = topic_cls.CreatableTopicConfig
        wanted = list(topics)

        def build(version: int) -> Any:
            default = -1 if version >= 4 else 1
            return cls[version](
                topics=[topic_cls(
                    name=t.name,
                    num_partitions=t.num_partitions if t.num_partitions > 0 else default,
                    replication_factor=(t.replication_factor if t.replication_factor > 0
                                        else default),
                    assignments=[],
                    configs=[config_cls(name=k, value=v) for k, v in (t.configs or {}).items()])
                    for t in wanted],
                timeout_ms=self._request_timeout_ms, validate_only=validate_only)

        async def call() -> None:
            response = await self._to_controller(ApiKey.CreateTopics, build)
            self._raise_first(((t.name, t.error_code, t.error_message)
                               for t in response.topics), "creating topic")

        await self._retrying(call)

    async def delete_topics(self, names: Iterable[str]) -> None:
        names = list(names)

        async def call() -> None:
            response = await self._to_controller(ApiKey.DeleteTopics, {
                "topic_names": names, "timeout_ms": self._request_timeout_ms})
            self._raise_first(((r.name, r.error_code, None) for r in response.responses),
                              "deleting topic")

        await self._retrying(call)

    async def create_partitions(self, new_counts: Mapping[str, int], *,
                                validate_only: bool = False) -> None:
        """Grow each topic to the given total number of partitions."""
        cls = request_class(ApiKey.CreatePartitions)
        assert cls is not None
        topic_cls = cls.CreatePartitionsTopic

        async def call() -> None:
            response = await self._to_controller(ApiKey.CreatePartitions, {
                "topics": [topic_cls(name=t, count=n, assignments=None)
                           for t, n in new_counts.items()],
                "timeout_ms": self._request_timeout_ms, "validate_only": validate_only})
            self._raise_first(((r.name, r.error_code, r.error_message)
                               for r in response.results), "creating partitions of")

        await self._retrying(call)

    async def _metadata(self, names: list[str] | None) -> Any:
        cls = request_class(ApiKey.Metadata)
        assert cls is not None

        def build(version: int) -> Any:
            topics: list[Any] | None
            if names is None:
                topics = [] if version == 0 else None
            else:
                topics = [cls.MetadataRequestTopic(name=n) for n in names]
            return cls[version](topics=topics, allow_auto_topic_creation=False)

        return await self._retrying(lambda: self._client.request_any(ApiKey.Metadata, build))

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
        return await self._describe_configs(_TOPIC_RESOURCE, list(topics), None)

    async def describe_broker_configs(self, broker_id: int) -> dict[str, ConfigEntry]:
        result = await self._describe_configs(_BROKER_RESOURCE, [str(broker_id)], broker_id)
        return result[str(broker_id)]

    async def _describe_configs(self, resource_type: int, names: list[str],
                                node_id: int | None) -> dict[str, dict[str, ConfigEntry]]:
        cls = request_class(ApiKey.DescribeConfigs)
        assert cls is not None
        resource_cls = cls.DescribeConfigsResource
        body = {"resources": [resource_cls(resource_type=resource_type, resource_name=n,
                                           configuration_keys=None) for n in names],
                "include_synonyms": False, "include_documentation": False}

        async def call() -> Any:
            if node_id is None:
                return await self._client.request_any(ApiKey.DescribeConfigs, body)
            return await self._client.request(node_id, ApiKey.DescribeConfigs, body)

        response = await self._retrying(call)
        self._raise_first(((r.resource_name, r.error_code, r.error_message)
                           for r in response.results), "describing configs of")
        return {r.resource_name: {
            c.name: ConfigEntry(c.name, c.value, c.read_only,
                                c.config_source if c.config_source is not None else 0,
                                c.is_sensitive)
            for c in r.configs} for r in response.results}

    async def alter_topic_configs(self, topic: str, configs: Mapping[str, str | None], *,
                                  validate_only: bool = False) -> None:
        """Replace the topic's config overrides with ``configs`` (AlterConfigs semantics:
        overrides not named here return to their defaults)."""
        cls = request_class(ApiKey.AlterConfigs)
        assert cls is not None
        resource_cls = cls.AlterConfigsResource
        config_cls = resource_cls.AlterableConfig
        body = {"resources": [resource_cls(
            resource_type=_TOPIC_RESOURCE, resource_name=topic,
            configs=[config_cls(name=k, value=v) for k, v in configs.items()])],
            "validate_only": validate_only}

        async def call() -> None:
            response = await self._client.request_any(ApiKey.AlterConfigs, body)
            self._raise_first(((r.resource_name, r.error_code, r.error_message)
                               for r in response.responses), "altering configs of")

        await self._retrying(call)

    # --- groups ------------------------------------------------------------------------------

    async def list_groups(self) -> list[GroupListing]:
        """Every group on every broker."""
        await self._retrying(self._client.refresh_metadata)
        listings: list[GroupListing] = []
        errors: list[KafkaError] = []

        async def ask(node_id: int) -> None:
            try:
                response = await self._retrying(
                    lambda: self._client.request(node_id, ApiKey.ListGroups, {}))
            except KafkaError as exc:
                errors.append(exc)
                return
            if response.error_code:
                errors.append(error_for(response.error_code, f"ListGroups on node {node_id}: "
                                        f"{describe_code(response.error_code)}"))
                return
            listings.extend(GroupListing(g.group_id, g.protocol_type) for g in response.groups)

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
        async def call() -> Any:
            lookup = await self._coordinator(group_id)
            response = await lookup.request(ApiKey.DescribeGroups, {
                "groups": [group_id], "include_authorized_operations": False})
            group = response.groups[0]
            if group.error_code:
                if group.error_code in (ErrorCode.NOT_COORDINATOR,
                                        ErrorCode.COORDINATOR_NOT_AVAILABLE):
                    lookup.mark_unknown()
                raise error_for(group.error_code, f"describing group {group_id!r}: "
                                f"{describe_code(group.error_code)}")
            return group

        group = await self._retrying(call)
        members = []
        for m in group.members:
            assignment: frozenset[TopicPartition] = frozenset()
            if group.protocol_type == "consumer":
                try:
                    parsed = decode_assignment(bytes(m.member_assignment or b""))
                    assignment = frozenset(TopicPartition(t, p) for t, parts in parsed.items()
                                           for p in parts)
                except ProtocolPayloadError:
                    pass
            members.append(MemberDescription(m.member_id, m.client_id, m.client_host,
                                             assignment))
        return GroupDescription(group.group_id, group.group_state, group.protocol_type,
                                group.protocol_data, members)

    async def delete_groups(self, group_ids: Iterable[str]) -> None:
        """Delete empty groups (``NonEmptyGroupError`` while members remain)."""
        for group_id in group_ids:
            async def call(group_id: str = group_id) -> None:
                lookup = await self._coordinator(group_id)
                response = await lookup.request(ApiKey.DeleteGroups, {"groups_names": [group_id]})
                for r in response.results:
                    if r.error_code in (ErrorCode.NOT_COORDINATOR,
                                        ErrorCode.COORDINATOR_NOT_AVAILABLE):
                        lookup.mark_unknown()
                self._raise_first(((r.group_id, r.error_code, None) for r in response.results),
                                  "deleting group")

            await self._retrying(call)

    async def list_consumer_group_offsets(self, group_id: str,
                                          ) -> dict[TopicPartition, tuple[int, str | None]]:
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
