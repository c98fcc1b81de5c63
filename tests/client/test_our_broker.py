"""The client against trio-broker itself: every codec, a group of three, admin, acks=0."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from tests.wire import RawClient
from trio_broker.client import TopicPartition, open_consumer, open_producer
from trio_broker.client.core.groups import join_group_request
from trio_broker.client.trio import errors
from trio_broker.client.trio.admin import NewTopic, open_admin
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.consumer_protocol import encode_subscription

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
FAST_GROUP = {"heartbeat_interval_ms": 100, "session_timeout_ms": 6000,
              "max_poll_interval_ms": 10000, "auto_offset_reset": "earliest"}


async def consume(consumer: Any, count: int) -> list[Any]:
    got: list[Any] = []
    while len(got) < count:
        batch = await consumer.getmany(timeout_ms=10000)
        assert batch, f"no records after {len(got)} of {count}"
        for records in batch.values():
            got.extend(records)
    return got


@pytest.mark.parametrize("codec", CODECS)
async def test_produce_and_consume_with_every_codec(trio_broker: Any, codec: str) -> None:
    topic = f"codec-{codec}"
    values = [f"{codec}-{i}-".encode() * (i % 9) for i in range(2000)]
    with trio.fail_after(30):
        async with open_admin(trio_broker.bootstrap_servers) as admin:
            await admin.create_topics([NewTopic(topic, 3, 1)])
        async with open_producer(trio_broker.bootstrap_servers, compression_type=codec,
                                 batch_size=4096) as producer:
            futures = [await producer.send_soon(topic, v, key=str(i % 50).encode(),
                                                headers=[("i", str(i).encode())])
                       for i, v in enumerate(values)]
        results = [f.result() for f in futures]
        async with open_consumer(bootstrap_servers=trio_broker.bootstrap_servers,
                                 auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition(topic, p) for p in range(3)])
            got = await consume(consumer, len(values))
    by_position = {(r.partition, r.offset): r for r in got}
    assert len(by_position) == len(values)
    for i, (value, result) in enumerate(zip(values, results, strict=True)):
        record = by_position[(result.partition, result.offset)]
        assert record.value == value
        assert record.key == str(i % 50).encode()
        assert record.headers == (("i", str(i).encode()),)
    per_partition: dict[int, list[int]] = {}
    for result in results:
        per_partition.setdefault(result.partition, []).append(result.offset)
    for offsets in per_partition.values():  # acknowledged in order, each offset once
        assert offsets == list(range(len(offsets)))


async def test_a_group_of_three_shares_six_partitions(trio_broker: Any) -> None:
    topic = "six"
    count = 1200
    with trio.fail_after(60):
        async with open_admin(trio_broker.bootstrap_servers) as admin:
            await admin.create_topics([NewTopic(topic, 6, 1)])
        async with (
            open_consumer(topic, bootstrap_servers=trio_broker.bootstrap_servers,
                          group_id="trio", **FAST_GROUP) as c1,
            open_consumer(topic, bootstrap_servers=trio_broker.bootstrap_servers,
                          group_id="trio", **FAST_GROUP) as c2,
            open_consumer(topic, bootstrap_servers=trio_broker.bootstrap_servers,
                          group_id="trio", **FAST_GROUP) as c3,
        ):
            consumers = [c1, c2, c3]
            while not (all(len(c.assignment()) == 2 for c in consumers)
                       and len(set().union(*(c.assignment() for c in consumers))) == 6):
                for consumer in consumers:
                    await consumer.getmany(timeout_ms=20)
            async with open_producer(trio_broker.bootstrap_servers) as producer:
                for i in range(count):
                    await producer.send_soon(topic, str(i).encode(), key=str(i).encode())
            got: list[list[Any]] = [[], [], []]

            async def drain(index: int) -> None:
                while sum(map(len, got)) < count:
                    for records in (await consumers[index].getmany(timeout_ms=50)).values():
                        got[index].extend(records)

            async with trio.open_nursery() as nursery:
                for index in range(3):
                    nursery.start_soon(drain, index)
            for index, consumer in enumerate(consumers):
                assert got[index], "every member consumed something"
                assert {TopicPartition(r.topic, r.partition) for r in got[index]} <= (
                    consumer.assignment())
                await consumer.commit()
        async with open_admin(trio_broker.bootstrap_servers) as admin:
            committed = await admin.list_consumer_group_offsets("trio")
            described = (await admin.describe_groups(["trio"]))["trio"]
    values = sorted(int(r.value) for records in got for r in records)
    assert values == list(range(count))
    assert len(committed) == 6
    assert sum(offset for offset, _ in committed.values()) == count
    assert described.state in ("Empty", "Dead")


async def test_admin_calls(trio_broker: Any) -> None:
    with trio.fail_after(30):
        async with open_admin(trio_broker.bootstrap_servers) as admin:
            await admin.create_topics([NewTopic("a1", 2, 1, {"retention.ms": "3600000"}),
                                       NewTopic("a2")])
            with pytest.raises(errors.TopicAlreadyExistsError):
                await admin.create_topics([NewTopic("a1", 2, 1)])
            assert {"a1", "a2"} <= await admin.list_topics()
            described = await admin.describe_topics(["a1"])
            assert [p.partition for p in described["a1"].partitions] == [0, 1]
            await admin.create_partitions({"a1": 4})
            described = await admin.describe_topics(["a1"])
            assert len(described["a1"].partitions) == 4
            configs = (await admin.describe_topic_configs("a1"))["a1"]
            assert configs["retention.ms"].value == "3600000"
            await admin.alter_topic_configs("a1", {"retention.ms": "7200000"})
            configs = (await admin.describe_topic_configs("a1"))["a1"]
            assert configs["retention.ms"].value == "7200000"
            cluster = await admin.describe_cluster()
            assert len(cluster.brokers) == 1

            tp = TopicPartition("a1", 0)
            async with open_producer(trio_broker.bootstrap_servers) as producer:
                for i in range(5):
                    await producer.send("a1", b"v", partition=0, timestamp_ms=1_000_000 + i)
            offsets = await admin.list_offsets({tp: "earliest"})
            assert offsets[tp].offset == 0
            assert (await admin.list_offsets({tp: "latest"}))[tp].offset == 5
            assert (await admin.list_offsets({tp: 1_000_003}))[tp].offset == 3
            assert (await admin.list_offsets({tp: 9_000_000}))[tp].offset == -1

            async with open_consumer(bootstrap_servers=trio_broker.bootstrap_servers,
                                     group_id="simple") as consumer:
                consumer.assign([tp])
                await consumer.commit({tp: 2})
            assert await admin.list_consumer_group_offsets("simple") == {tp: (2, "")}
            assert "simple" in {g.group_id for g in await admin.list_groups()}
            await admin.delete_groups(["simple"])
            assert "simple" not in {g.group_id for g in await admin.list_groups()}

            await admin.delete_topics(["a2"])
            assert "a2" not in await admin.list_topics()
            with pytest.raises(errors.UnknownTopicOrPartitionError):
                await admin.delete_topics(["a2"])


async def test_acks_zero_expects_no_response(trio_broker: Any) -> None:
    with trio.fail_after(30):
        async with open_producer(trio_broker.bootstrap_servers, acks=0) as producer:
            first = await producer.send("zero", b"x", partition=0)
            assert first.offset == -1
            for i in range(50):
                await producer.send_soon("zero", str(i).encode(), partition=0)
            conn = producer.client.ready_connection(
                producer.client.metadata.leader_for(TopicPartition("zero", 0)))
            assert conn is not None
            assert len(conn.in_flight) == 0
        async with open_consumer(bootstrap_servers=trio_broker.bootstrap_servers,
                                 auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition("zero", 0)])
            got = await consume(consumer, 51)
    assert [r.value for r in got] == [b"x"] + [str(i).encode() for i in range(50)]


@pytest.mark.broker_config(auto_create_topics_enable=False)
async def test_send_waits_for_an_unknown_topic_up_to_max_block(trio_broker: Any) -> None:
    with trio.fail_after(30):
        async with open_producer(trio_broker.bootstrap_servers, max_block_ms=300) as producer:
            started = trio.current_time()
            with pytest.raises(errors.KafkaTimeoutError, match=r"'missing' to appear in metadata"):
                await producer.send("missing", b"v")
            assert trio.current_time() - started >= 0.3
        async with (open_producer(trio_broker.bootstrap_servers, max_block_ms=20000,
                                  metadata_max_age_ms=60000) as producer,
                    open_admin(trio_broker.bootstrap_servers) as admin,
                    trio.open_nursery() as nursery):
            results: list[Any] = []

            async def send() -> None:
                results.append(await producer.send("late", b"v"))

            nursery.start_soon(send)
            await trio.sleep(0.2)  # the send is now waiting on metadata for "late"
            assert not results
            await admin.create_topics([NewTopic("late", 1, 1)])
        assert results[0].offset == 0


async def test_leaving_member_hands_its_partitions_over_at_once(trio_broker: Any) -> None:
    # a session timeout far longer than the test: only LeaveGroup can move the partitions
    settings = {**FAST_GROUP, "session_timeout_ms": 60000}
    with trio.fail_after(20):
        async with open_admin(trio_broker.bootstrap_servers) as admin:
            await admin.create_topics([NewTopic("handover", 4, 1)])
        async with open_consumer("handover", bootstrap_servers=trio_broker.bootstrap_servers,
                                 group_id="h", **settings) as stays:
            async with open_consumer("handover", bootstrap_servers=trio_broker.bootstrap_servers,
                                     group_id="h", **settings) as leaves:
                while not (len(stays.assignment()) == 2 and len(leaves.assignment()) == 2):
                    await stays.getmany(timeout_ms=20)
                    await leaves.getmany(timeout_ms=20)
            while len(stays.assignment()) != 4:
                await stays.getmany(timeout_ms=20)


class _Interrupt(KeyboardInterrupt):
    """What Trio raises in the main task on Ctrl-C."""


@pytest.mark.parametrize("how", ["cancelled", "ctrl-c"])
async def test_a_member_whose_block_is_left_abnormally_still_leaves(trio_broker: Any,
                                                                    how: str) -> None:
    # a session timeout far longer than the test: only the leave can move the partitions, and
    # the leaver's position must have been committed on its way out
    settings = {**FAST_GROUP, "session_timeout_ms": 60000}
    servers = trio_broker.bootstrap_servers
    topic = f"abandon-{how}"
    with trio.fail_after(30):
        async with open_admin(servers) as admin:
            await admin.create_topics([NewTopic(topic, 4, 1)])
        async with open_consumer(topic, bootstrap_servers=servers, group_id=f"g-{how}",
                                 **settings) as stays:
            with trio.CancelScope() as scope:
                try:
                    async with open_consumer(topic, bootstrap_servers=servers,
                                             group_id=f"g-{how}", **settings) as leaves:
                        while not (len(stays.assignment()) == 2
                                   and len(leaves.assignment()) == 2):
                            await stays.getmany(timeout_ms=20)
                            await leaves.getmany(timeout_ms=20)
                        mine = leaves.assignment()
                        for tp in mine:  # as if a record at offset 0 had been processed
                            leaves.seek(tp, 1)
                        if how == "cancelled":
                            scope.cancel()
                            await trio.sleep_forever()
                        raise _Interrupt
                except* _Interrupt:  # out of the consumer's nursery, in a group
                    pass
            assert scope.cancelled_caught == (how == "cancelled")
            while len(stays.assignment()) != 4:
                await stays.getmany(timeout_ms=20)
            for tp in mine:
                assert await stays.committed(tp) == 1


@pytest.mark.parametrize("policy", ["earliest", "latest"])
async def test_offset_out_of_range_resets_by_policy(trio_broker: Any, policy: str) -> None:
    tp = TopicPartition("oor", 0)
    with trio.fail_after(20):
        async with open_producer(trio_broker.bootstrap_servers) as producer:
            for i in range(3):
                await producer.send("oor", str(i).encode(), partition=0)
        async with open_consumer(bootstrap_servers=trio_broker.bootstrap_servers,
                                 auto_offset_reset=policy) as consumer:
            consumer.assign([tp])
            consumer.seek(tp, 1000)
            if policy == "earliest":
                got = await consume(consumer, 3)
                assert [(r.offset, r.value) for r in got] == [(0, b"0"), (1, b"1"), (2, b"2")]
                return
            while await consumer.position(tp) == 1000:  # no records come back: only the reset
                assert not await consumer.getmany(timeout_ms=20)
            assert await consumer.position(tp) == 3
            async with open_producer(trio_broker.bootstrap_servers) as producer:
                await producer.send("oor", b"after", partition=0)
            assert [(r.offset, r.value) for r in await consume(consumer, 1)] == [(3, b"after")]


async def test_offset_out_of_range_without_a_policy_raises(trio_broker: Any) -> None:
    tp = TopicPartition("oor-none", 0)
    with trio.fail_after(20):
        async with open_producer(trio_broker.bootstrap_servers) as producer:
            await producer.send("oor-none", b"v", partition=0)
        async with open_consumer(bootstrap_servers=trio_broker.bootstrap_servers,
                                 auto_offset_reset="none") as consumer:
            consumer.assign([tp])
            with pytest.raises(errors.NoOffsetForPartitionError):
                await consumer.getmany(timeout_ms=5000)
            consumer.seek(tp, 50)
            with pytest.raises(errors.OffsetOutOfRangeError):
                await consumer.getmany(timeout_ms=5000)
            consumer.seek(tp, 0)
            assert [r.value for r in await consume(consumer, 1)] == [b"v"]


async def test_producer_uses_partitions_added_later(trio_broker: Any) -> None:
    with trio.fail_after(20):
        async with (open_admin(trio_broker.bootstrap_servers) as admin,
                    open_producer(trio_broker.bootstrap_servers) as producer):
            await admin.create_topics([NewTopic("grow", 1, 1)])
            await producer.send("grow", b"a")
            with pytest.raises(errors.UnknownTopicOrPartitionError):
                await producer.send("grow", b"b", partition=2)
            await admin.create_partitions({"grow": 3})
            await producer.client.refresh_metadata()
            assert (await producer.send("grow", b"b", partition=2)).partition == 2


async def test_closing_during_a_rebalance_leaves_no_member_behind(trio_broker: Any) -> None:
    """A consumer closed while its group task is mid-rebalance (here: in the listener's
    ``on_partitions_revoked``) leaves, and its group task joins no more: a JoinGroup sent after
    the leave, with the member id the leave forgot, would make a new (pending) member, which
    the group then waits for, up to ``session.timeout.ms``, before it can empty or rebalance."""
    group_id, topic = "closing", "closing-t"
    groups = trio_broker.state.groups.membership.groups
    revoking, release = trio.Event(), trio.Event()

    class SlowRevoke:
        async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
            if revoked:
                revoking.set()
                await release.wait()

        async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
            pass

    with trio.fail_after(30):
        async with open_admin(trio_broker.bootstrap_servers) as admin:
            await admin.create_topics([NewTopic(topic, 2, 1)])
        other = await RawClient.connect(trio_broker.host, trio_broker.port)
        async with (
            trio.open_nursery() as nursery,
            open_consumer(bootstrap_servers=trio_broker.bootstrap_servers,
                          group_id=group_id, **FAST_GROUP) as consumer,
        ):
            consumer.subscribe([topic], listener=SlowRevoke())
            while not consumer.assignment():
                await consumer.getmany(timeout_ms=20)
            (consumer_id,) = groups[group_id].members
            # another member's join starts a rebalance, which the consumer's heartbeat
            # hears of: its group task revokes (eagerly) and waits in the listener
            await other.send(ApiKey.JoinGroup, 3, body=join_group_request(
                3, group_id, "", session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
                protocols=[("range", encode_subscription([topic]))]))
            await revoking.wait()

            async def release_once_leaving() -> None:
                while consumer._member.member_id:  # leave() forgets the id, then sends
                    await trio.lowlevel.checkpoint()
                release.set()

            nursery.start_soon(release_once_leaving)
        await trio.testing.wait_all_tasks_blocked()
        group = groups[group_id]
        assert consumer_id not in group.members
        assert not group.pending_members, "a join sent after the leave made a new member"
        assert group.state.value == "CompletingRebalance"  # the other member's generation
        await other.aclose()
