"""The Trio ShareConsumer against the broker in the test's loop: implicit acknowledgement (every
record accepted once, the group done when the block is left), explicit acknowledgement (a
released record comes back with its delivery count raised, rejected and accepted ones never; no
new records before every record handed out is acknowledged), two members sharing a
partition, and one share session per partition leader in a test cluster."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.lowlevel

from trio_broker.client import (
    AcknowledgeType,
    NewTopic,
    ShareConsumer,
    TopicPartition,
    open_admin,
    open_producer,
)
from trio_broker.client.core.errors import ConfigError
from trio_broker.testing import TEST_DEFAULTS
from trio_broker.testing.cluster import open_cluster


async def _setup(broker: Any, topic: str, group: str, n: int) -> None:
    """A topic with ``n`` records, and a group that starts share-partitions at the earliest."""
    broker.state.logs.create_topic(topic, 1, {})
    broker.state.shares.group_configs.alter(group, [("share.auto.offset.reset", "earliest")],
                                            validate_only=False)
    async with open_producer(broker.bootstrap_servers) as producer:
        for i in range(n):
            await producer.send_soon(topic, b"%d" % i)


def _state(broker: Any, group: str) -> tuple[int, dict[int, Any]]:
    [sp] = [sp for (g, _, _), sp in broker.state.shares.partitions.items() if g == group]
    return sp.start_offset, dict(sp.in_flight)


async def test_implicit_acknowledgement(trio_broker: Any) -> None:
    await _setup(trio_broker, "share-implicit", "sg-implicit", 10)
    got = []
    with trio.fail_after(20):
        async with ShareConsumer(trio_broker.bootstrap_servers, group_id="sg-implicit",
                                 topics=["share-implicit"]) as consumer:
            async for record in consumer:
                got.append((record.offset, record.value, record.delivery_count))
                if len(got) == 10:
                    break
            with pytest.raises(ConfigError):
                await consumer.acknowledge(record)
    assert got == [(i, b"%d" % i, 1) for i in range(10)]
    # leaving accepted what was handed out: the group is done with every record
    assert _state(trio_broker, "sg-implicit") == (10, {})
    assert not trio_broker.state.shares.groups["sg-implicit"].members


async def test_explicit_acknowledgement(trio_broker: Any) -> None:
    await _setup(trio_broker, "share-explicit", "sg-explicit", 4)
    kinds = {0: [AcknowledgeType.ACCEPT], 2: [AcknowledgeType.REJECT],
             1: [AcknowledgeType.RELEASE, AcknowledgeType.ACCEPT],
             3: [AcknowledgeType.RELEASE, AcknowledgeType.RELEASE, AcknowledgeType.ACCEPT]}
    seen = []
    with trio.fail_after(20):
        async with ShareConsumer(trio_broker.bootstrap_servers, group_id="sg-explicit",
                                 topics=["share-explicit"],
                                 share_acknowledgement_mode="explicit") as consumer:
            first = await consumer.__anext__()
            assert (first.offset, first.delivery_count) == (0, 1)
            for _ in range(3):  # the rest of the first batch, handed out unacknowledged
                seen.append(await consumer.__anext__())
            with pytest.raises(ValueError, match="not acknowledged yet"):
                await consumer.__anext__()
            await consumer.acknowledge(first, kinds[0].pop(0))
            with pytest.raises(ValueError, match="already acknowledged"):
                await consumer.acknowledge(first, AcknowledgeType.ACCEPT)
            for record in seen:
                await consumer.acknowledge(record, kinds[record.offset].pop(0))
            seen = [(r.offset, r.delivery_count) for r in seen]
            async for record in consumer:
                seen.append((record.offset, record.delivery_count))
                await consumer.acknowledge(record, kinds[record.offset].pop(0))
                if not any(kinds.values()):
                    break
            # the last acknowledgement, sent now (the others went with the fetches)
            assert await consumer.commit() == {TopicPartition("share-explicit", 0): 0}
            assert await consumer.commit() == {}
    assert sorted(seen) == [(1, 1), (1, 2), (2, 1), (3, 1), (3, 2), (3, 3)]
    assert _state(trio_broker, "sg-explicit") == (4, {})


async def test_two_members_share_a_partition(trio_broker: Any) -> None:
    await _setup(trio_broker, "share-two", "sg-two", 2000)
    got: dict[str, list[int]] = {"a": [], "b": []}

    async def member(name: str, done: trio.Event) -> None:
        async with ShareConsumer(trio_broker.bootstrap_servers, group_id="sg-two",
                                 topics=["share-two"], max_poll_records=50) as consumer:
            async for record in consumer:
                got[name].append(record.offset)
                if sum(map(len, got.values())) >= 2000:
                    done.set()
                await trio.lowlevel.checkpoint()  # let the other member run

    with trio.fail_after(30):
        done = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(member, "a", done)
            nursery.start_soon(member, "b", done)
            await done.wait()
            nursery.cancel_scope.cancel()  # both leave, under their shielded close
    every = sorted(got["a"] + got["b"])
    assert every == list(range(2000)), "each record handed to exactly one member"
    assert got["a"]
    assert got["b"]
    # both left under cancellation, accepting what they had handed out first
    assert _state(trio_broker, "sg-two") == (2000, {})


async def test_one_share_session_per_leader(tmp_path: Any) -> None:
    """Three partitions led by three brokers of a test cluster: one ShareFetch and one share
    session per leader (each broker keeps its own sessions), every record accepted once."""
    with trio.fail_after(30):
        async with open_cluster(3, **{**TEST_DEFAULTS, "log_dirs": str(tmp_path)}) as cluster:
            async with open_admin(cluster.bootstrap_servers) as admin:
                await admin.create_topics([NewTopic("share-spread", 3, 1)])
            assert len({cluster.model.leader_of("share-spread", p)[0] for p in range(3)}) == 3
            cluster.state.shares.group_configs.alter(
                "sg-spread", [("share.auto.offset.reset", "earliest")], validate_only=False)
            async with open_producer(cluster.bootstrap_servers) as producer:
                for i in range(300):
                    await producer.send_soon("share-spread", b"%d" % i, partition=i % 3)
            got = set()
            async with ShareConsumer(cluster.bootstrap_servers, group_id="sg-spread",
                                     topics=["share-spread"]) as consumer:
                async for record in consumer:
                    got.add((record.partition, record.offset))
                    if len(got) == 300:
                        break
                assert sorted(consumer._sessions) == [0, 1, 2]
            assert got == {(p, o) for p in range(3) for o in range(100)}
            states = {p: (sp.start_offset, sp.in_flight) for (g, _, p), sp
                      in cluster.state.shares.partitions.items() if g == "sg-spread"}
            assert states == {p: (100, {}) for p in range(3)}
