"""The Trio consumer with ``group_protocol="consumer"`` (KIP-848) against trio-broker: incremental
reconciliation seen from the members' own listeners, commits with the member epoch, a static
member that comes back to its partitions, and the leave heartbeat."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from tests.client.ledger import Ledger
from trio_broker.client import TopicPartition, open_consumer, open_producer
from trio_broker.client.trio.admin import NewTopic, open_admin

pytestmark = pytest.mark.broker_config(**{
    "group.consumer.heartbeat.interval.ms": 200,
    "group.consumer.min.heartbeat.interval.ms": 200,
    "group.consumer.session.timeout.ms": 6000,
    "group.consumer.min.session.timeout.ms": 6000,
})
SETTINGS = {"group_protocol": "consumer", "auto_offset_reset": "earliest",
            "auto_commit_interval_ms": 200}


async def _create(servers: str, topic: str, partitions: int) -> None:
    async with open_admin(servers) as admin:
        await admin.create_topics([NewTopic(topic, partitions, 1)])


async def test_members_join_and_leave_with_incremental_reconciliation(trio_broker: Any) -> None:
    servers = trio_broker.bootstrap_servers
    topic, count = "kip848-trio", 3000
    owners: dict[TopicPartition, str] = {}
    revoked: dict[str, list[TopicPartition]] = {"a": [], "b": []}
    seen: list[bytes] = []
    with trio.fail_after(60):
        await _create(servers, topic, 6)
        async with open_producer(bootstrap_servers=servers) as producer:
            await producer.send(topic, b"0", partition=0)
            for i in range(1, count):
                producer.send_nowait(topic, str(i).encode(), partition=i % 6)

        async def drain(consumer: Any, until: Any) -> None:
            while not until():
                for records in (await consumer.getmany(timeout_ms=50)).values():
                    seen.extend(r.value for r in records)

        async with open_consumer(bootstrap_servers=servers, group_id="g848",
                                 **SETTINGS) as a:
            a.subscribe([topic], listener=Ledger(owners, "a", revoked["a"]))
            await drain(a, lambda: len(a.assignment()) == 6 and len(seen) >= count // 2)
            async with open_consumer(bootstrap_servers=servers, group_id="g848",
                                     **SETTINGS) as b:
                b.subscribe([topic], listener=Ledger(owners, "b", revoked["b"]))
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(drain, a, lambda: len(b.assignment()) == 3
                                       and len(a.assignment()) == 3)
                    nursery.start_soon(drain, b, lambda: len(b.assignment()) == 3
                                       and len(a.assignment()) == 3)
                # incremental: a gave up exactly the three partitions b got, nothing else
                assert sorted(revoked["a"]) == sorted(b.assignment())
                assert a.assignment() | b.assignment() == {TopicPartition(topic, p)
                                                           for p in range(6)}
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(drain, a, lambda: len(set(seen)) == count)
                    nursery.start_soon(drain, b, lambda: len(set(seen)) == count)
            # b left with a leave heartbeat: a gets everything back long before a session timeout
            with trio.fail_after(3):
                await drain(a, lambda: len(a.assignment()) == 6)
            assert revoked["b"]
            assert sorted(revoked["b"]) == sorted(revoked["a"])
            await a.commit()
            for p in range(6):
                assert await a.committed(TopicPartition(topic, p)) == count // 6
    assert set(seen) == {str(i).encode() for i in range(count)}


async def test_a_static_member_restarted_gets_its_partitions_back(trio_broker: Any) -> None:
    servers = trio_broker.bootstrap_servers
    topic = "kip848-static"
    with trio.fail_after(30):
        await _create(servers, topic, 4)
        settings = {**SETTINGS, "group_remote_assignor": "range"}
        async with open_consumer(topic, bootstrap_servers=servers, group_id="s848",
                                 group_instance_id="one", **settings) as one:
            async with open_consumer(topic, bootstrap_servers=servers, group_id="s848",
                                     group_instance_id="two", **settings) as two:
                while not (len(one.assignment()) == 2 and len(two.assignment()) == 2):
                    await one.getmany(timeout_ms=20)
                    await two.getmany(timeout_ms=20)
                before = two.assignment()
            # two left with epoch -2: its partitions wait for it, one keeps only its own
            async with open_consumer(topic, bootstrap_servers=servers, group_id="s848",
                                     group_instance_id="two", **settings) as again:
                while again.assignment() != before:
                    await again.getmany(timeout_ms=20)
                assert len(one.assignment()) == 2
