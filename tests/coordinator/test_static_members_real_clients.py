"""Static membership (KIP-345) with real clients: a member restarted with the same
``group.instance.id`` within its session timeout gets the same partitions back, the group's
generation does not change, and the other member never gives up a partition.

Both librdkafka and aiokafka skip LeaveGroup when a static member closes, so the coordinator
keeps the member until the restarted process rejoins under a new member id and replaces it.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable

import confluent_kafka
import pytest

from tests.coordinator.group_workers import wait_for
from tests.coordinator.test_real_clients import create_topic
from trio_broker.client.blocking import BrokerConnection, parse_address
from trio_broker.protocol.api_keys import ApiKey

PARTITIONS = 4
SESSION_MS = 30_000

pytestmark = pytest.mark.slow


class StaticMember(threading.Thread):
    """One consumer with a group.instance.id, polling in its own thread until ``stop()``."""

    def __init__(self, kind: str, instance: str, bootstrap: str, group: str,
                 topic: str) -> None:
        super().__init__(name=f"{kind}-{instance}", daemon=True)
        self.kind, self.instance = kind, instance
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.assignment: frozenset[int] = frozenset()
        self.revocations = 0
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            if self.kind == "confluent":
                self._confluent()
            else:
                asyncio.run(self._aiokafka())
        except BaseException as exc:  # reported through stop()
            self.error = exc

    def _confluent(self) -> None:
        c = confluent_kafka.Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group,
            "group.instance.id": self.instance, "client.id": self.name,
            "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 1000,
            "auto.offset.reset": "earliest"})

        def revoked(_consumer: object, partitions: list) -> None:
            if partitions:
                self.revocations += 1

        c.subscribe([self.topic], on_revoke=revoked)
        try:
            while not self.stopping.is_set():
                c.poll(0.1)
                self.assignment = frozenset(p.partition for p in c.assignment())
        finally:
            c.close()  # a static member does not leave the group on close

    async def _aiokafka(self) -> None:
        import aiokafka

        member = self

        class Listener(aiokafka.ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: object) -> None:
                if revoked:
                    member.revocations += 1

            def on_partitions_assigned(self, assigned: object) -> None:
                pass

        c = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group,
            group_instance_id=self.instance, client_id=self.name,
            session_timeout_ms=SESSION_MS, heartbeat_interval_ms=1000,
            auto_offset_reset="earliest")
        c.subscribe([self.topic], listener=Listener())
        await c.start()
        try:
            while not self.stopping.is_set():
                await c.getmany(timeout_ms=100)
                self.assignment = frozenset(p.partition for p in c.assignment())
        finally:
            await c.stop()

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise AssertionError(f"{self.name} failed") from self.error


def _members(bootstrap: str, group: str) -> dict[str, str]:
    """group.instance.id -> member id, as DescribeGroups v4+ reports them."""
    with BrokerConnection(*parse_address(bootstrap)) as conn:
        [g] = conn.call(ApiKey.DescribeGroups, 4, groups=[group],
                        include_authorized_operations=False).groups
    return {m.group_instance_id: m.member_id for m in g.members}


@pytest.mark.parametrize("kind", ["confluent", "aiokafka"])
def test_restarted_static_member_gets_its_partitions_back(kafka_broker, unique_topic, kind):
    bootstrap = kafka_broker.bootstrap_servers
    topic = unique_topic("static")
    group = f"static-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, PARTITIONS)
    generation: Callable[[], int] = lambda: kafka_broker.call(  # noqa: E731
        lambda: kafka_broker.broker.state.groups.groups[group].generation_id)
    a = StaticMember(kind, "host-a", bootstrap, group, topic)
    b = StaticMember(kind, "host-b", bootstrap, group, topic)
    a.start()
    b.start()
    restarted = None
    try:
        wait_for(lambda: a.assignment and b.assignment
                 and a.assignment | b.assignment == frozenset(range(PARTITIONS))
                 and not a.assignment & b.assignment, 60, "two members sharing the partitions")
        before = (generation(), a.assignment, b.assignment, _members(bootstrap, group))
        b_revocations = b.revocations

        started = time.monotonic()
        a.stop()  # no LeaveGroup: the coordinator still holds host-a
        assert set(_members(bootstrap, group)) == {"host-a", "host-b"}
        restarted = StaticMember(kind, "host-a", bootstrap, group, topic)
        restarted.start()
        wait_for(lambda: restarted.assignment, 30, "the restarted member's assignment")
        assert time.monotonic() - started < SESSION_MS / 1000

        after = _members(bootstrap, group)
        assert restarted.assignment == before[1]
        assert generation() == before[0]  # no rebalance
        assert after["host-a"] != before[3]["host-a"]  # a new member id replaced the old
        assert after["host-b"] == before[3]["host-b"]
        time.sleep(2)  # b keeps consuming its partitions, undisturbed
        assert (b.assignment, b.revocations) == (before[2], b_revocations)
        assert generation() == before[0]
    finally:
        for m in (a, b, restarted):
            if m is not None and m.is_alive():
                m.stop()
