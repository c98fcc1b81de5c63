"""The blocking client's calls: offsets, produce, fetch, topics and configs, groups.

Every call builds its requests and reads the answers with the client core; what is here is only
where each request goes (leader, controller, coordinator, every broker) and which errors are
retried. Errors are the core's ``KafkaError`` classes, named after Kafka's codes, with one-line
messages a tool can print as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..core import admin as admin_requests
from ..core import groups as group_requests
from ..core import offsets as offset_requests
from ..core.admin import ConfigEntry, NewTopic
from ..core.connection import InFlight
from ..core.errors import KafkaError, UnsupportedVersionError, error_for, error_name
from ..core.fetch import (
    FetchedPartition,
    fetch_entry,
    fetch_request,
    parse_fetch,
)
from ..core.groups import GroupDescription, GroupListing
from ..core.produce import PartitionResult, parse_produce, produce_request
from ..core.structs import OffsetAndMetadata, TopicPartition
from .admin import AdminCalls
from .cluster import COORDINATOR_ERRORS, LEADER_ERRORS
from .connection import BrokerConnection


class FetchHandle(NamedTuple):
    """A Fetch sent and not yet received (``send_fetch`` / ``receive_fetch``)."""

    conn: BrokerConnection
    request: InFlight
    tp: TopicPartition
    timeout_s: float


class BlockingClient(AdminCalls):
    """A blocking Kafka client for tools, the Spark source and tests; see ``Cluster`` for
    connections, metadata and retries, ``AdminCalls`` for the operator's calls."""

    # --- ListOffsets ---------------------------------------------------------------------

    def list_offsets(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """For each partition: ``EARLIEST``, ``LATEST`` (or another special), or the first
        offset whose timestamp is at or after the given one (-1 when there is none), asked of
        each leader; leadership errors and lost connections are retried."""
        result: dict[TopicPartition, int] = {}
        pending = {TopicPartition(*tp): ts for tp, ts in timestamps.items()}

        def attempt() -> None:
            failed: KafkaError | None = None
            for conn, tps in self.by_leader(pending).values():
                asked = {tp: pending[tp] for tp in tps}

                def build(version: int, asked: dict[TopicPartition, int] = asked) -> Any:
                    return offset_requests.list_offsets_request(version, asked)

                answers = offset_requests.parse_list_offsets(conn.request(ApiKey.ListOffsets,
                                                                          build))
                for tp in asked:
                    code, found = answers.get(tp, (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None))
                    if code == ErrorCode.NONE and found is not None:
                        result[tp] = found.offset
                        del pending[tp]
                    elif code in LEADER_ERRORS:
                        failed = error_for(code, f"ListOffsets for {tp}: {error_name(code)}")
                    elif code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        raise error_for(code, f"partition {tp} does not exist")
                    else:
                        raise error_for(code, f"ListOffsets for {tp} failed: {error_name(code)}")
            if failed is not None:
                raise failed

        if pending:
            self.retrying("ListOffsets", attempt)
        return result

    # --- Produce -------------------------------------------------------------------------

    def produce(self, batches: Mapping[TopicPartition, bytes], *, acks: int,
                timeout_ms: int = 30_000, min_version: int = 3,
                ) -> dict[TopicPartition, PartitionResult]:
        """Send one batch per partition, one request per leader, all before any answer is
        read; per-partition results (never retried: without idempotence a retry could
        duplicate). With ``acks=0`` nothing is answered and every result is (0, -1, -1).

        ``min_version``: the lowest Produce version the batches need (zstd needs v7).
        """
        sent = []
        for conn, tps in self.by_leader(batches).values():
            version = conn.version_for(ApiKey.Produce)
            if version < min_version:
                raise UnsupportedVersionError(f"{conn.where} speaks Produce up to v{version}; "
                                              f"these batches need v{min_version}")
            body = produce_request(version, ((tp.topic, tp.partition, batches[tp]) for tp in tps),
                                   acks=acks, timeout_ms=timeout_ms)
            sent.append((conn, tps, conn.send(ApiKey.Produce, body, version=version,
                                              expect_response=acks != 0)))
        out: dict[TopicPartition, PartitionResult] = {}
        for conn, tps, request in sent:
            if request is None:
                out.update(dict.fromkeys(tps, PartitionResult(0, -1, -1)))
                continue
            answers = parse_produce(conn.receive(request,
                                                 timeout_s=self.timeout_s + timeout_ms / 1000))
            for tp in tps:
                out[tp] = answers.get(tp, PartitionResult(ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1))
        return out

    # --- Fetch ---------------------------------------------------------------------------

    def send_fetch(self, tp: TopicPartition, offset: int, *, max_bytes: int,
                   max_wait_ms: int = 0) -> FetchHandle:
        """Send a Fetch for one partition to its leader; ``receive_fetch`` collects it.

        Split in two so a reader can ask for the next chunk before decoding the current one.
        """
        tp = TopicPartition(*tp)
        conn = self.leader(tp)
        request = conn.send(ApiKey.Fetch, lambda v: fetch_request(
            v, [(tp.topic, fetch_entry(tp.partition, offset, max_bytes))],
            max_wait_ms=max_wait_ms, max_bytes=max_bytes))
        assert request is not None
        return FetchHandle(conn, request, tp, self.timeout_s + max_wait_ms / 1000)

    def receive_fetch(self, handle: FetchHandle) -> FetchedPartition:
        conn, request, tp, timeout_s = handle
        code, parts = parse_fetch(conn.receive(request, timeout_s=timeout_s))
        if code:
            raise error_for(code, f"Fetch for {tp} failed: {error_name(code)}")
        found = parts.get(tp)
        if found is None:
            raise error_for(ErrorCode.UNKNOWN_SERVER_ERROR,
                            f"the Fetch answer from {conn.where} lacks {tp}")
        return found

    def fetch(self, tp: TopicPartition, offset: int, *, max_bytes: int,
              max_wait_ms: int = 0) -> FetchedPartition:
        """Fetch from ``offset``, retrying leadership errors and lost connections; other
        per-partition errors (OFFSET_OUT_OF_RANGE, ...) come back in the result."""
        def attempt() -> FetchedPartition:
            result = self.receive_fetch(self.send_fetch(tp, offset, max_bytes=max_bytes,
                                                        max_wait_ms=max_wait_ms))
            if result.error in LEADER_ERRORS:
                raise error_for(result.error, f"Fetch for {tp}: {error_name(result.error)}")
            return result

        return self.retrying(f"Fetch for {tp}", attempt)

    def fetch_many(self, positions: Mapping[TopicPartition, int], *, max_wait_ms: int,
                   min_bytes: int = 1, max_bytes: int = 52_428_800,
                   partition_max_bytes: int = 1_048_576) -> list[FetchedPartition]:
        """One Fetch to every leader at once (answers read in turn); per-partition results."""
        sent: list[tuple[BrokerConnection, InFlight]] = []
        for conn, tps in self.by_leader(positions).values():
            entries = [(tp.topic, fetch_entry(tp.partition, positions[tp], partition_max_bytes))
                       for tp in tps]

            def build(version: int, entries: list[tuple[str, Any]] = entries) -> Any:
                return fetch_request(version, entries, max_wait_ms=max_wait_ms,
                                     min_bytes=min_bytes, max_bytes=max_bytes)

            request = conn.send(ApiKey.Fetch, build)
            assert request is not None
            sent.append((conn, request))
        out: list[FetchedPartition] = []
        for conn, request in sent:
            code, parts = parse_fetch(conn.receive(
                request, timeout_s=self.timeout_s + max_wait_ms / 1000))
            if code:
                raise error_for(code, f"Fetch from {conn.where}: {error_name(code)}")
            out.extend(parts.values())
        return out

    # --- topics and configs --------------------------------------------------------------

    def _settle(self, results: Iterable[tuple[str, int, str | None]], what: str) -> None:
        for name, code, message in results:
            if code:
                raise error_for(code, f"{what} {name!r}: {error_name(code)}"
                                + (f": {message}" if message else ""))

    def create_topic(self, name: str, partitions: int = -1, replication_factor: int = -1,
                     configs: Mapping[str, str] | None = None, *,
                     validate_only: bool = False) -> None:
        """CreateTopics at the controller; -1 means the broker's default."""
        topic = NewTopic(name, partitions, replication_factor, configs)
        body = self.controller().request(ApiKey.CreateTopics, lambda v: (
            admin_requests.create_topics_request(v, [topic], timeout_ms=int(self.timeout_s * 1000),
                                                 validate_only=validate_only)))
        self._settle(admin_requests.parse_create_topics(body), "cannot create topic")

    def delete_topic(self, name: str) -> None:
        body = self.controller().request(ApiKey.DeleteTopics, lambda v: (
            admin_requests.delete_topics_request(v, [name], timeout_ms=int(self.timeout_s * 1000))))
        self._settle(admin_requests.parse_delete_topics(body), "cannot delete topic")

    def create_partitions(self, topic: str, total: int) -> None:
        """Grow ``topic`` to ``total`` partitions."""
        body = self.controller().request(ApiKey.CreatePartitions, lambda v: (
            admin_requests.create_partitions_request(v, {topic: total},
                                                     timeout_ms=int(self.timeout_s * 1000))))
        self._settle(admin_requests.parse_create_partitions(body), "cannot add partitions to")

    def describe_configs(self, name: str, *, resource_type: int = admin_requests.TOPIC_RESOURCE,
                         ) -> list[ConfigEntry]:
        """A topic's (or, with ``BROKER_RESOURCE`` and a broker id, a broker's; ``""``: the
        brokers' default) configs, sorted by name; ``source_name(entry.source)`` names where
        each value comes from."""
        conn = (self.connection(int(name))
                if resource_type == admin_requests.BROKER_RESOURCE and name
                else self.any_connection())
        body = conn.request(ApiKey.DescribeConfigs, lambda v: (
            admin_requests.describe_configs_request(v, [(resource_type, name)])))
        [(resource, code, message, entries)] = admin_requests.parse_describe_configs(body)
        self._settle([(resource, code, message)], "cannot describe")
        return sorted(entries.values())

    def list_config_resources(self, resource_type: int) -> list[str]:
        """The names of the config resources of ``resource_type`` (ListConfigResources; the
        client-metrics subscriptions are the ones only it lists)."""
        body = self.any_connection().request(ApiKey.ListConfigResources, lambda v: (
            admin_requests.list_config_resources_request(v, [resource_type])))
        code, found = admin_requests.parse_list_config_resources(body)
        if code:
            raise error_for(code, f"cannot list config resources: {error_name(code)}")
        return sorted(name for kind, name in found if kind == resource_type)

    # --- groups --------------------------------------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        """Every group on every broker (each lists only the groups it coordinates)."""
        listings: list[GroupListing] = []
        for broker_id in sorted(self.metadata([]).brokers):
            conn = self.connection(broker_id)
            code, found = group_requests.parse_list_groups(
                conn.request(ApiKey.ListGroups, group_requests.list_groups_request))
            if code:
                raise error_for(code, f"ListGroups on {conn.where}: {error_name(code)}")
            listings.extend(found)
        return sorted(listings)

    def _group_call(self, group_id: str, api_key: int, build: Any,
                    code_of: Any) -> Any:
        """A request to the coordinator; a coordinator error looks the coordinator up again."""
        def attempt() -> Any:
            body = self.coordinator(group_id).request(api_key, build)
            code = code_of(body)
            if code in COORDINATOR_ERRORS:
                raise error_for(code, f"group {group_id!r}: {error_name(code)}")
            return body

        return self.retrying(f"group {group_id!r}", attempt,
                             on_retry=lambda _: self.forget_coordinator(group_id))

    def describe_group(self, group_id: str) -> GroupDescription:
        """Members (with decoded assignments), state and protocol, from the coordinator; a
        group that does not exist is described as ``Dead`` with no members, as Kafka does."""
        body = self._group_call(group_id, ApiKey.DescribeGroups,
                                lambda v: group_requests.describe_groups_request(v, [group_id]),
                                lambda b: b.groups[0].error_code if b.groups else 0)
        [(code, description)] = group_requests.parse_describe_groups(body)
        if code:
            raise error_for(code, f"DescribeGroups {group_id!r}: {error_name(code)}")
        return description

    def committed(self, group_id: str, partitions: Iterable[TopicPartition] | None = None,
                  ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (None: every partition it committed)."""
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        body = self._group_call(group_id, ApiKey.OffsetFetch,
                                lambda v: offset_requests.offset_fetch_request(v, group_id, wanted),
                                lambda b: offset_requests.parse_offset_fetch(b)[0])
        code, committed = offset_requests.parse_offset_fetch(body)
        if code:
            raise error_for(code, f"OffsetFetch for group {group_id!r}: {error_name(code)}")
        return committed

    def commit(self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
               ) -> None:
        """Commit ``offsets`` (next offsets to read) outside any group generation, as a tool
        resetting a group's offsets does; the group must have no active members."""
        prepared = {TopicPartition(*tp): (v if isinstance(v, tuple)
                                          else OffsetAndMetadata(int(v), ""))
                    for tp, v in offsets.items()}
        codes = offset_requests.parse_offset_commit(self._group_call(
            group_id, ApiKey.OffsetCommit,
            lambda v: offset_requests.offset_commit_request(v, group_id, prepared),
            lambda b: next(iter(offset_requests.parse_offset_commit(b).values()), 0)))
        for tp, code in sorted(codes.items()):
            if code:
                raise error_for(code, f"committing {tp} for group {group_id!r}: "
                                f"{error_name(code)}")


__all__ = ["BlockingClient", "FetchHandle"]
