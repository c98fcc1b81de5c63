"""Drive the group coordinator through the registered API handlers, as the network layer does.

Requests are encoded to wire bytes and decoded again, handlers get a hand-built
``HandlerContext`` over a ``standalone_state`` (real storage, no sockets), and responses are
encoded and decoded the way a client would see them, so these tests cover the codec path of
every field the coordinator sets.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_broker.broker.apis.registry import HANDLERS
from trio_broker.broker.config import BrokerConfig
from trio_broker.broker.coordinator import GroupCoordinator
from trio_broker.broker.server.context import Deferred, HandlerContext, RequestContext
from trio_broker.broker.server.state import BrokerState, standalone_state
from trio_broker.protocol import messages
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.consumer_protocol import encode_subscription

JOIN = request_class(ApiKey.JoinGroup)
SYNC = request_class(ApiKey.SyncGroup)
COMMIT = request_class(ApiKey.OffsetCommit)
FETCH = request_class(ApiKey.OffsetFetch)

_connections = itertools.count()

#: OffsetCommit and OffsetFetch v10 name topics by id
TOPIC_ID_VERSION = 10


class Pending:
    """The response to one request, possibly still held by the coordinator."""

    def __init__(self, header: messages.RequestHeader) -> None:
        self.header = header
        self.event = trio.Event()
        self.body: Any = None
        self.deferred = False
        self.answers = 0

    def set(self, body: Any) -> None:
        self.answers += 1
        assert self.answers == 1, f"{self.header} answered twice"
        frame = messages.encode_response(self.header, body)
        _, self.body = messages.decode_response(self.header.api_key, self.header.api_version,
                                                frame[4:])
        self.event.set()

    @property
    def done(self) -> bool:
        return self.event.is_set()

    async def wait(self) -> Any:
        await self.event.wait()
        return self.body


class Client:
    """One client connection: builds requests and passes them to the registered handlers."""

    def __init__(self, state: BrokerState, client_id: str = "consumer", *,
                 host: str = "127.0.0.1") -> None:
        self.state = state
        self.client_id = client_id
        self.host = host
        self._correlation = itertools.count(1)
        self.connection_id = f"test-{next(_connections)}"
        self._names_by_id: dict[uuid.UUID, str] = {}

    async def send(self, api_key: int, version: int, **fields: Any) -> Pending:
        body = messages.make_request(api_key, version, **fields)
        frame = messages.encode_request(api_key, version, next(self._correlation),
                                        self.client_id, body)[4:]
        header = messages.decode_request_header(frame)
        decoded = messages.decode_request_body(header, frame)
        pending = Pending(header)
        ctx = HandlerContext(RequestContext(header, self.connection_id, client_host=self.host),
                             self.state, pending.set)
        result = await HANDLERS[api_key](ctx, decoded)
        if isinstance(result, Deferred):
            pending.deferred = True
        else:
            pending.set(result)
        return pending

    async def call(self, api_key: int, version: int, **fields: Any) -> Any:
        return await (await self.send(api_key, version, **fields)).wait()

    # --- conveniences -----------------------------------------------------------------------

    async def join(self, group: str, member_id: str = "", *, version: int = 5,
                   session_ms: int = 10_000, rebalance_ms: int = 30_000,
                   protocol_type: str = "consumer", instance_id: str | None = None,
                   protocols: list[tuple[str, bytes]] | None = None) -> Pending:
        if protocols is None:
            protocols = [("range", encode_subscription(["t"]))]
        return await self.send(
            ApiKey.JoinGroup, version, group_id=group, session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms, member_id=member_id,
            group_instance_id=instance_id, protocol_type=protocol_type,
            protocols=[JOIN.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols])

    async def join_known(self, group: str, **kwargs: Any) -> tuple[str, Pending]:
        """JoinGroup v5 including the MEMBER_ID_REQUIRED round trip: (member id, pending)."""
        first = await (await self.join(group, **kwargs)).wait()
        assert first.error_code == 79, first
        return first.member_id, await self.join(group, first.member_id, **kwargs)

    async def sync(self, group: str, generation: int, member_id: str,
                   assignments: dict[str, bytes] | None = None, *, version: int = 3,
                   instance_id: str | None = None, protocol_type: str | None = "consumer",
                   protocol_name: str | None = "range") -> Pending:
        return await self.send(
            ApiKey.SyncGroup, version, group_id=group, generation_id=generation,
            member_id=member_id, group_instance_id=instance_id, protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=[SYNC.SyncGroupRequestAssignment(member_id=m, assignment=a)
                         for m, a in (assignments or {}).items()])

    async def heartbeat(self, group: str, generation: int, member_id: str, *,
                        version: int = 1, instance_id: str | None = None) -> int:
        body = await self.call(ApiKey.Heartbeat, version, group_id=group,
                               generation_id=generation, member_id=member_id,
                               group_instance_id=instance_id)
        return int(body.error_code)

    async def leave(self, group: str, member_id: str) -> int:
        body = await self.call(ApiKey.LeaveGroup, 1, group_id=group, member_id=member_id)
        return int(body.error_code)

    async def describe(self, *groups: str) -> Any:
        body = await self.call(ApiKey.DescribeGroups, 3, groups=list(groups),
                               include_authorized_operations=False)
        return body.groups

    async def send_commit(self, group: str, offsets: dict[tuple[str, int], int], *,
                          generation: int = -1, member_id: str = "",
                          metadata: str | None = "", version: int = 3,
                          instance_id: str | None = None, leader_epoch: int = -1,
                          commit_timestamp: int = -1, retention_ms: int = -1) -> Pending:
        topics: dict[str, list[Any]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(COMMIT.OffsetCommitRequestTopic
                                                .OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset,
                committed_leader_epoch=leader_epoch, commit_timestamp=commit_timestamp,
                committed_metadata=metadata))
        return await self.send(
            ApiKey.OffsetCommit, version, group_id=group,
            generation_id_or_member_epoch=generation, member_id=member_id,
            group_instance_id=instance_id, retention_time_ms=retention_ms,
            topics=[COMMIT.OffsetCommitRequestTopic(
                name=t, topic_id=self.topic_id(t) if version >= TOPIC_ID_VERSION else None,
                partitions=p) for t, p in topics.items()])

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's id; for a name no topic has, an id no topic has."""
        topic_id = self.state.logs.topic_id(topic) or uuid.uuid5(uuid.NAMESPACE_URL, topic)
        self._names_by_id[topic_id] = topic
        return topic_id

    def topic_name(self, body_topic: Any, version: int) -> str:
        """The name of an answer's topic: v10 answers carry its id only."""
        if version < TOPIC_ID_VERSION:
            return str(body_topic.name)
        return self._names_by_id[body_topic.topic_id]

    async def commit(self, group: str, offsets: dict[tuple[str, int], int],
                     **kwargs: Any) -> dict[tuple[str, int], int]:
        body = await (await self.send_commit(group, offsets, **kwargs)).wait()
        version = kwargs.get("version", 3)
        return {(self.topic_name(t, version), p.partition_index): int(p.error_code)
                for t in body.topics for p in t.partitions}

    async def fetch(self, group: str, partitions: list[tuple[str, int]] | None = None, *,
                    version: int = 3) -> tuple[int, dict[tuple[str, int], tuple[int, Any]]]:
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            topics = [FETCH.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                      for t, ps in by_topic.items()]
        body = await self.call(ApiKey.OffsetFetch, version, group_id=group, topics=topics)
        found = {(t.name, p.partition_index): (p.committed_offset, p.metadata)
                 for t in body.topics for p in t.partitions}
        return int(getattr(body, "error_code", 0) or 0), found


class Running:
    """A coordinator started by ``start_coordinator``, with the broker state that holds it."""

    def __init__(self, state: BrokerState, coordinator: GroupCoordinator) -> None:
        self.state = state
        self.coordinator = coordinator
        self.scope = trio.CancelScope()
        self.stopped = trio.Event()

    def client(self, client_id: str = "consumer") -> Client:
        return Client(self.state, client_id)

    async def stop(self) -> None:
        """Stop as a broker does on shutdown: cancel ``run``, then ``close()``."""
        self.scope.cancel()
        await self.stopped.wait()
        self.coordinator.close()


StartCoordinator = Callable[..., Awaitable[Running]]


async def run_inline(fn: Callable[..., Any], *args: Any) -> Any:
    """Run file work in the event loop's thread (still real files, real fsyncs)."""
    await trio.lowlevel.checkpoint()
    return fn(*args)

#: Topics the coordinator tests commit offsets for: OffsetCommit refuses partitions that do not
#: exist, as Kafka does.
TOPICS = {"t": 6, "u": 1, "x": 1}


@pytest.fixture
async def start_coordinator(tmp_path: Path) -> AsyncIterator[StartCoordinator]:
    """``await start_coordinator(**config_overrides)`` -> a running coordinator on ``tmp_path``.

    Its broker state has real storage on ``tmp_path`` holding ``topics`` (default ``TOPICS``).
    """
    started: list[Running] = []

    async def start(*, coordinator_kwargs: dict[str, Any] | None = None,
                    topics: dict[str, int] = TOPICS, **overrides: Any) -> Running:
        settings: dict[str, Any] = {"log_dirs": str(tmp_path),
                                    "group_initial_rebalance_delay_ms": 0}
        settings.update(overrides)
        config = BrokerConfig(**settings)
        # Group metadata is fsynced inline: a worker thread would let the autojump clock leap
        # over session timeouts while the file is written.
        kwargs = {"io_runner": run_inline, **(coordinator_kwargs or {})}
        coordinator = GroupCoordinator(config, config.log_dir_list[0], **kwargs)
        state = standalone_state(config, groups=coordinator, nursery=nursery)
        for topic, partitions in topics.items():
            if topic not in state.logs.topics():
                state.logs.create_topic(topic, partitions, {})
        running = Running(state, coordinator)

        async def run(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            try:
                with running.scope:
                    await coordinator.run(task_status=task_status)
            finally:
                state.logs.close()
                running.stopped.set()

        await nursery.start(run)
        started.append(running)
        return running

    async with trio.open_nursery() as nursery:
        yield start
        for running in started:
            if not running.stopped.is_set():
                await running.stop()
