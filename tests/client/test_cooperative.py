"""Cooperative incremental rebalancing (``cooperative-sticky``, KIP-429) with the classic
protocol: the assignor as a pure function, and Trio consumers on trio-broker whose listeners see
only the partitions that move, never one partition owned twice."""

from __future__ import annotations

from typing import Any

import trio

from tests.client.ledger import Ledger
from trio_broker.client import TopicPartition, open_consumer
from trio_broker.client.trio.admin import NewTopic, open_admin
from trio_broker.client.trio.consumer.assignors import CooperativeStickyAssignor

assign = CooperativeStickyAssignor.assign
SETTINGS = {"heartbeat_interval_ms": 100, "session_timeout_ms": 6000,
            "max_poll_interval_ms": 10000, "auto_offset_reset": "earliest",
            "partition_assignment_strategy": ["cooperative-sticky"]}


def test_a_moving_partition_is_left_out_for_one_generation() -> None:
    both = {"a": ["t"], "b": ["t"]}
    first = assign({"a": ["t"]}, {"t": 6})
    assert first == {"a": {"t": [0, 1, 2, 3, 4, 5]}}
    second = assign(both, {"t": 6}, {"a": first["a"]}, {"a": 1})
    assert second == {"a": {"t": [0, 1, 2]}, "b": {}}  # 3-5 wait for a to revoke them
    third = assign(both, {"t": 6}, second, {"a": 2, "b": 2})
    assert third == {"a": {"t": [0, 1, 2]}, "b": {"t": [3, 4, 5]}}


def test_stickiness_balance_and_conflicts() -> None:
    subs = {m: ["t", "u"] for m in "abc"}
    owned = {"a": {"t": [0, 1, 2, 3]}, "b": {"u": [0, 1]}, "c": {"t": [0]}}
    result = assign(subs, {"t": 4, "u": 2}, owned, {"a": 5, "b": 5, "c": 4})
    # c's stale claim on t-0 loses to a's later generation; a keeps 2 of its 4 (quota 2)
    assert result["a"] == {"t": [0, 1]}
    assert result["b"] == {"u": [0, 1]}
    assert result["c"] == {}  # t-2 and t-3 move from a to c only in the next generation
    assert assign(subs, {"t": 4, "u": 2}, result, {m: 6 for m in "abc"})["c"] == {"t": [2, 3]}


async def test_trio_members_rebalance_incrementally(trio_broker: Any) -> None:
    servers = trio_broker.bootstrap_servers
    topic = "cooperative"
    owners: dict[TopicPartition, str] = {}
    revoked: dict[str, list[TopicPartition]] = {"a": [], "b": []}
    with trio.fail_after(30):
        async with open_admin(servers) as admin:
            await admin.create_topics([NewTopic(topic, 6, 1)])
        async with open_consumer(bootstrap_servers=servers, group_id="coop",
                                 **SETTINGS) as a:
            a.subscribe([topic], listener=Ledger(owners, "a", revoked["a"]))
            while len(a.assignment()) != 6:
                await a.getmany(timeout_ms=20)
            async with open_consumer(bootstrap_servers=servers, group_id="coop",
                                     **SETTINGS) as b:
                b.subscribe([topic], listener=Ledger(owners, "b", revoked["b"]))
                while not (len(a.assignment()) == 3 and len(b.assignment()) == 3):
                    await a.getmany(timeout_ms=20)
                    await b.getmany(timeout_ms=20)
                # a gave up exactly what b got; the three it kept were never revoked
                assert sorted(revoked["a"]) == sorted(b.assignment())
            while len(a.assignment()) != 6:
                await a.getmany(timeout_ms=20)
            assert sorted(revoked["a"]) == sorted(revoked["b"])
