"""What the console's pages show, read through the Kafka protocol with the project's Trio client.

Why the protocol and not the broker's objects: the console is one more client of its own broker
(topics from Metadata, offsets from ListOffsets, configs and their sources from DescribeConfigs,
groups from ListGroups and DescribeGroups, committed offsets from OffsetFetch), so it shows
exactly what any client would see, with the logged-in user's rights: partition sizes and log
dirs come from DescribeLogDirs too. Only the live rates come from the broker's own objects, its
request metrics (``live.py``).

Each page's work is bounded: the topic and group lists are paged (``PAGE_SIZE``), so a page costs
one Metadata request for every topic plus a fixed number of requests for the rows shown,
however many topics and groups the broker holds. Calls are single attempts; an error is shown on
the page rather than retried behind the user's back.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import attrs
import trio

from ...client.core import admin as admin_requests
from ...client.core import groups as group_requests
from ...client.core.admin import TOPIC_RESOURCE, ConfigEntry, source_name
from ...client.core.errors import describe_code, error_for, error_name
from ...client.core.groups import GroupDescription
from ...client.core.metadata import MetadataResponse, TopicInfo, metadata_request, parse_metadata
from ...client.core.offsets import list_offsets_request, parse_list_offsets
from ...client.core.structs import EARLIEST, LATEST, TopicPartition
from ...client.trio.admin import Admin
from ...protocol.api_keys import ApiKey

PAGE_SIZE = 100
#: topics per DescribeConfigs request: the broker answers each request in one go on its event
#: loop, so a page asks in small requests that client requests can queue between
CONFIGS_PER_REQUEST = 10
#: topic configs the topic list shows
LIST_CONFIGS = ("cleanup.policy", "retention.ms", "retention.bytes")


class Offsets(NamedTuple):
    start: int
    end: int
    error: int = 0


@attrs.define
class LogDir:
    """One log dir of a broker, as DescribeLogDirs describes it."""

    path: str
    error: str | None
    partitions: int = 0
    size: int = 0
    #: the file system's size and free space (DescribeLogDirs v4+; -1 before)
    total: int = -1
    usable: int = -1


@attrs.define
class TopicRow:
    name: str
    partitions: int
    internal: bool
    messages: int | None = None
    size: int | None = None
    configs: dict[str, str | None] = attrs.Factory(dict)
    error: str | None = None


@attrs.define
class PartitionRow:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    start: int | None
    end: int | None
    size: int | None
    error: str | None


@attrs.define
class GroupRow:
    group_id: str
    protocol_type: str
    state: str = ""
    protocol: str = ""
    members: int = 0
    coordinator: int = -1
    error: str | None = None


@attrs.define
class LagRow:
    topic: str
    partition: int
    committed: int | None
    end: int | None
    member: str

    @property
    def lag(self) -> int | None:
        if self.end is None or self.committed is None:
            return None
        return max(0, self.end - self.committed)


def paged(items: list[Any], page: int, size: int = PAGE_SIZE) -> tuple[list[Any], int, int]:
    """(the items of ``page``, the page actually shown, the number of pages)."""
    pages = max(1, -(-len(items) // size))
    page = min(max(page, 1), pages)
    return items[(page - 1) * size: page * size], page, pages


class KafkaView:
    """The console's reads over one admin client's connections."""

    def __init__(self, admin: Admin, node_id: int) -> None:
        self.admin = admin
        self.client = admin.client
        #: the broker serving the console
        self.node_id = node_id

    async def _ready(self) -> None:
        if not self.client.metadata.brokers:
            await self.client.refresh_metadata()

    async def metadata(self, topics: list[str] | None = None) -> MetadataResponse:
        """Metadata for ``topics`` (None: every topic), never creating one."""
        await self._ready()
        response = await self.client.request_any(
            ApiKey.Metadata, lambda v: metadata_request(v, topics, allow_auto_create=False))
        return parse_metadata(response)

    async def offsets(self, topics: Iterable[TopicInfo], spec: int = LATEST,
                      ) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets to each partition's leader: {partition: (error code, offset)}."""
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        for info in topics:
            for p in info.partitions.values():
                by_leader.setdefault(p.leader, {})[TopicPartition(info.name, p.partition)] = spec
        out: dict[TopicPartition, tuple[int, int]] = {}
        for leader, wanted in by_leader.items():
            if leader < 0:
                out.update({tp: (5, -1) for tp in wanted})  # LEADER_NOT_AVAILABLE
                continue
            response = await self.client.request(leader, ApiKey.ListOffsets, functools.partial(
                list_offsets_request, timestamps=wanted))
            for tp, (code, found) in parse_list_offsets(response).items():
                out[tp] = (code, found.offset)
        return out

    async def start_end(self, topics: Iterable[TopicInfo]) -> dict[TopicPartition, Offsets]:
        topics = list(topics)
        starts: dict[TopicPartition, tuple[int, int]] = {}
        ends: dict[TopicPartition, tuple[int, int]] = {}

        async def ask(spec: int, into: dict[TopicPartition, tuple[int, int]]) -> None:
            into.update(await self.offsets(topics, spec))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, EARLIEST, starts)
            nursery.start_soon(ask, LATEST, ends)
        return {tp: Offsets(starts[tp][1], end, starts[tp][0] or code)
                for tp, (code, end) in ends.items() if tp in starts}

    async def configs(self, topics: list[str], keys: list[str] | None = None,
                      ) -> dict[str, tuple[str | None, dict[str, ConfigEntry]]]:
        """DescribeConfigs: {topic: (error text or None, {name: entry})}."""
        out: dict[str, tuple[str | None, dict[str, ConfigEntry]]] = {}

        async def ask(chunk: list[tuple[int, str]]) -> None:
            response = await self.client.request_any(ApiKey.DescribeConfigs, functools.partial(
                admin_requests.describe_configs_request, resources=chunk, keys=keys))
            for name, code, message, entries in admin_requests.parse_describe_configs(response):
                error = describe_code(code) + (f": {message}" if message else "")
                out[name] = (error if code else None, entries)

        if topics:
            await self._ready()
        async with trio.open_nursery() as nursery:  # pipelined on one connection
            for start in range(0, len(topics), CONFIGS_PER_REQUEST):
                nursery.start_soon(ask, [(TOPIC_RESOURCE, t)
                                         for t in topics[start:start + CONFIGS_PER_REQUEST]])
        return out

    async def log_dirs(self, node_id: int, partitions: Mapping[str, list[int]] | None = None,
                       ) -> tuple[list[LogDir], dict[TopicPartition, int]]:
        """DescribeLogDirs on ``node_id``: its log dirs, and the size of each partition asked
        for (None: every partition it holds)."""
        await self._ready()
        code, described = admin_requests.parse_describe_log_dirs(await self.client.request(
            node_id, ApiKey.DescribeLogDirs, functools.partial(
                admin_requests.describe_log_dirs_request, partitions=partitions)))
        if code:
            raise error_for(code, f"DescribeLogDirs on node {node_id}: {describe_code(code)}")
        dirs: list[LogDir] = []
        sizes: dict[TopicPartition, int] = {}
        for d in described:
            dirs.append(LogDir(d.path, error_name(d.error) if d.error else None,
                               len(d.sizes), sum(d.sizes.values()), d.total_bytes,
                               d.usable_bytes))
            for tp, size in d.sizes.items():
                sizes[tp] = sizes.get(tp, 0) + size
        return dirs, sizes

    async def sizes(self, topics: Iterable[TopicInfo]) -> dict[TopicPartition, int]:
        """Each partition's size on its leader (DescribeLogDirs)."""
        by_leader: dict[int, dict[str, list[int]]] = {}
        for info in topics:
            for p in info.partitions.values():
                if p.leader >= 0:
                    by_leader.setdefault(p.leader, {}).setdefault(info.name, []).append(
                        p.partition)
        out: dict[TopicPartition, int] = {}
        for leader, wanted in by_leader.items():
            out.update((await self.log_dirs(leader, wanted))[1])
        return out

    # --- groups -----------------------------------------------------------------------------

    async def list_groups(self) -> list[GroupRow]:
        """ListGroups on every broker; each answers for the groups it coordinates."""
        await self._ready()
        rows: list[GroupRow] = []
        for node_id in sorted(self.client.metadata.brokers):
            code, found = group_requests.parse_list_groups(await self.client.request(
                node_id, ApiKey.ListGroups, group_requests.list_groups_request))
            if code:
                raise error_for(code, f"ListGroups on node {node_id}: {describe_code(code)}")
            rows.extend(GroupRow(g.group_id, g.protocol_type, coordinator=node_id)
                        for g in found)
        return sorted(rows, key=lambda r: r.group_id)

    async def describe_rows(self, rows: list[GroupRow]) -> None:
        """Fill state, protocol and members in, one DescribeGroups per coordinator."""
        by_node: dict[int, list[GroupRow]] = {}
        for row in rows:
            by_node.setdefault(row.coordinator, []).append(row)
        for node_id, node_rows in by_node.items():
            wanted = {row.group_id: row for row in node_rows}
            response = await self.client.request(node_id, ApiKey.DescribeGroups, functools.partial(
                group_requests.describe_groups_request, group_ids=list(wanted)))
            for code, description in group_requests.parse_describe_groups(response):
                found = wanted.get(description.group_id)
                if found is None:
                    continue
                found.error = error_name(code) if code else None
                found.state, found.protocol = description.state, description.protocol
                found.members = len(description.members)

    async def describe_group(self, group_id: str) -> GroupDescription:
        return (await self.admin.describe_groups([group_id]))[group_id]

    async def group_lag(self, group_id: str, description: GroupDescription) -> list[LagRow]:
        """Committed offset, end offset and lag of every partition the group committed or is
        assigned."""
        committed = await self.admin.list_consumer_group_offsets(group_id)
        owners = {tp: m.client_id or m.member_id for m in description.members
                  for tp in m.assignment}
        partitions = set(committed) | set(owners)
        topics = sorted({tp.topic for tp in partitions})
        ends: dict[TopicPartition, tuple[int, int]] = {}
        if topics:
            metadata = await self.metadata(topics)
            ends = await self.offsets(
                TopicInfo(t.name, t.error, t.internal, [
                    p for p in t.partitions.values() if TopicPartition(t.name, p.partition)
                    in partitions]) for t in metadata.topics.values() if not t.error)
        rows = []
        for tp in sorted(partitions):
            code, end = ends.get(tp, (3, -1))
            found = committed.get(tp)
            rows.append(LagRow(tp.topic, tp.partition, None if found is None else found.offset,
                               None if code else end, owners.get(tp, "")))
        return rows


def topic_rows(metadata: MetadataResponse, query: str) -> list[TopicRow]:
    """Every topic whose name contains ``query``, sorted by name (internal topics included)."""
    needle = query.strip().lower()
    return [TopicRow(info.name, info.num_partitions, info.internal,
                     error=error_name(info.error) if info.error else None)
            for name, info in sorted(metadata.topics.items()) if needle in name.lower()]


async def fill_topic_rows(view: KafkaView, metadata: MetadataResponse,
                          rows: list[TopicRow]) -> None:
    """Messages (end - start, summed), size and the listed configs of the rows shown."""
    infos = [metadata.topics[row.name] for row in rows if not row.error]
    offsets = await view.start_end(infos)
    sizes = await view.sizes(infos)
    configs = await view.configs([info.name for info in infos], list(LIST_CONFIGS))
    for row in rows:
        if row.error:
            continue
        info = metadata.topics[row.name]
        messages = size = 0
        for partition in info.partitions:
            tp = TopicPartition(row.name, partition)
            found = offsets.get(tp)
            if found is not None and not found.error:
                messages += max(0, found.end - found.start)
            size += sizes.get(tp, 0)
        row.messages, row.size = messages, size
        error, entries = configs.get(row.name, (None, {}))
        row.error = error
        row.configs = {k: entries[k].value if k in entries else None for k in LIST_CONFIGS}


def partition_rows(info: TopicInfo, offsets: Mapping[TopicPartition, Offsets],
                   sizes: Mapping[TopicPartition, int]) -> list[PartitionRow]:
    rows = []
    for number, p in sorted(info.partitions.items()):
        tp = TopicPartition(info.name, number)
        found = offsets.get(tp)
        error = p.error or (found.error if found else 0)
        rows.append(PartitionRow(
            number, p.leader, p.replicas, p.isr, found.start if found else None,
            found.end if found else None, sizes.get(tp), error_name(error) if error else None))
    return rows


def config_rows(entries: Mapping[str, ConfigEntry]) -> list[dict[str, Any]]:
    return [{"name": e.name, "value": e.value, "source": source_name(e.source),
             "read_only": e.read_only, "sensitive": e.sensitive}
            for e in sorted(entries.values())]


def overrides_text(entries: Mapping[str, ConfigEntry]) -> str:
    """The topic's own overrides as ``key=value`` lines (what AlterConfigs will replace)."""
    return "\n".join(f"{e.name}={e.value}" for e in sorted(entries.values())
                     if e.source == admin_requests.ConfigSource.DYNAMIC_TOPIC_CONFIG
                     and not e.sensitive)
