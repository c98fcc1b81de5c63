"""Classic static membership (KIP-345) in the Trio consumer: a member restarted within its
session timeout gets its partitions back without a rebalance of the others, a closing static
member sends no LeaveGroup, and a second consumer with the same instance id fences the first."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trio_broker.client import TopicPartition, open_consumer
from trio_broker.client.trio import errors

SETTINGS = {"auto_offset_reset": "earliest", "session_timeout_ms": 6000,
            "heartbeat_interval_ms": 100, "partition_assignment_strategy": ["range"]}


class _Revocations:
    def __init__(self) -> None:
        self.revoked: list[set[TopicPartition]] = []

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        if revoked:
            self.revoked.append(revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        pass


async def _until_assigned(*consumers: Any, each: int) -> None:
    while not all(len(c.assignment()) == each for c in consumers):
        for c in consumers:
            await c.getmany(timeout_ms=20)


def _member(trio_broker: Any, group: str, instance_id: str) -> Any:
    members = trio_broker.state.groups.groups[group].members.values()
    return next(m for m in members if m.group_instance_id == instance_id)


async def test_a_restarted_static_member_gets_its_partitions_back(trio_broker: Any) -> None:
    trio_broker.state.logs.create_topic("static", 4, {})
    servers = trio_broker.bootstrap_servers
    watch = _Revocations()
    with trio.fail_after(30):
        async with open_consumer(bootstrap_servers=servers, group_id="kip345",
                                 group_instance_id="one", **SETTINGS) as one:
            one.subscribe(["static"], listener=watch)
            async with open_consumer("static", bootstrap_servers=servers, group_id="kip345",
                                     group_instance_id="two", **SETTINGS) as two:
                await _until_assigned(one, two, each=2)
                before = two.assignment()
                first_id = _member(trio_broker, "kip345", "two").member_id
                revocations = len(watch.revoked)
            # no LeaveGroup: the member is still in the group, its partitions wait for it
            assert _member(trio_broker, "kip345", "two").member_id == first_id
            async with open_consumer("static", bootstrap_servers=servers, group_id="kip345",
                                     group_instance_id="two", **SETTINGS) as again:
                while again.assignment() != before:
                    await again.getmany(timeout_ms=20)
                await one.getmany(timeout_ms=300)
                assert len(one.assignment()) == 2
                assert len(watch.revoked) == revocations  # one was never rebalanced


async def _poll_forever(consumer: Any) -> None:
    while True:
        await consumer.getmany(timeout_ms=50)


async def test_a_second_consumer_with_the_instance_id_fences_the_first(trio_broker: Any) -> None:
    trio_broker.state.logs.create_topic("fenced", 1, {})
    servers = trio_broker.bootstrap_servers
    with trio.fail_after(30):
        async with open_consumer("fenced", bootstrap_servers=servers, group_id="kip345-f",
                                 group_instance_id="same", **SETTINGS) as first:
            await _until_assigned(first, each=1)
            async with open_consumer("fenced", bootstrap_servers=servers,
                                     group_id="kip345-f", group_instance_id="same",
                                     **SETTINGS) as second:
                await _until_assigned(second, each=1)
                with pytest.raises(errors.FencedInstanceIdError):
                    await _poll_forever(first)
