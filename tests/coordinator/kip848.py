"""A KIP-848 member driven through the registered handlers: the client side of the consumer
protocol written out plainly (what librdkafka and Java do), so tests can see every epoch and
every assignment the coordinator hands out, and check that no partition is ever owned twice."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from trio_broker.broker.server.state import TopicChange
from trio_broker.protocol.api_keys import ApiKey, request_class

CGH = request_class(ApiKey.ConsumerGroupHeartbeat)

#: (topic id, partition)
TP = tuple[uuid.UUID, int]


def owned_list(owned: Iterable[TP]) -> list[Any]:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for topic_id, p in owned:
        by_topic.setdefault(topic_id, []).append(p)
    return [CGH.TopicPartitions(topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(by_topic.items(), key=lambda kv: str(kv[0]))]


async def heartbeat(client: Any, group: str, member_id: str, epoch: int, *,
                    version: int = 1, **fields: Any) -> Any:
    """One ConsumerGroupHeartbeat; ``owned`` (an iterable of TPs) becomes topic_partitions."""
    if "owned" in fields:
        owned = fields.pop("owned")
        fields["topic_partitions"] = None if owned is None else owned_list(owned)
    return await client.call(ApiKey.ConsumerGroupHeartbeat, version, group_id=group,
                             member_id=member_id, member_epoch=epoch, **fields)


def assignment_of(body: Any) -> set[TP] | None:
    if body.assignment is None:
        return None
    return {(t.topic_id, p) for t in body.assignment.topic_partitions for p in t.partitions}


class Member:
    """A consumer-protocol member as a client runs it: it owns what it was last assigned,
    revokes at once what the coordinator takes away, and always reports what it owns."""

    def __init__(self, running: Any, group: str, topics: list[str] | None = None, *,
                 regex: str | None = None, instance_id: str | None = None,
                 assignor: str | None = None, rebalance_ms: int = 30_000,
                 member_id: str | None = None) -> None:
        self.client = running.client(f"client-{member_id or 'm'}")
        self.group = group
        self.topics = topics
        self.regex = regex
        self.instance_id = instance_id
        self.assignor = assignor
        self.rebalance_ms = rebalance_ms
        self.member_id = member_id or str(uuid.uuid4())
        self.epoch = 0
        self.owned: set[TP] = set()
        #: a slow member: keeps owning (and reporting) what it had until told again with
        #: ``hold`` off; it still takes what it is given
        self.hold = False
        self.last: Any = None

    async def join(self) -> Any:
        self.epoch = 0
        self.owned = set()
        return await self._send(full=True)

    async def beat(self) -> Any:
        """A heartbeat reporting the owned partitions."""
        return await self._send(full=False)

    async def leave(self, epoch: int = -1) -> Any:
        body = await heartbeat(self.client, self.group, self.member_id, epoch,
                               instance_id=self.instance_id)
        self.last = body
        if body.error_code == 0:
            self.owned = set()
        return body

    async def _send(self, *, full: bool) -> Any:
        fields: dict[str, Any] = {"owned": sorted(self.owned, key=lambda x: (str(x[0]), x[1]))}
        if full or self.epoch == 0:
            fields.update(rebalance_timeout_ms=self.rebalance_ms,
                          subscribed_topic_names=self.topics, subscribed_topic_regex=self.regex,
                          server_assignor=self.assignor)
            if self.topics is None and self.regex is None:
                fields["subscribed_topic_names"] = []
        if self.instance_id is not None:
            fields["instance_id"] = self.instance_id
        body = await heartbeat(self.client, self.group, self.member_id, self.epoch, **fields)
        self.last = body
        if body.error_code == 0:
            self.epoch = body.member_epoch
            assigned = assignment_of(body)
            if assigned is not None:
                # revoke what is gone (unless slow), take what is new
                self.owned = self.owned | assigned if self.hold else assigned
        return body


async def create_topic(running: Any, name: str, partitions: int) -> uuid.UUID:
    """Create a topic as CreateTopics does, telling the broker's parts about it."""
    state = running.state
    state.logs.create_topic(name, partitions, {})
    state.topics_changed(TopicChange(name, 0, partitions))
    topic_id = state.logs.topic_id(name)
    assert topic_id is not None
    return topic_id


def topic_id(running: Any, name: str) -> uuid.UUID:
    tid = running.state.logs.topic_id(name)
    assert tid is not None
    return tid
