"""Renew acknowledgements (KIP-1222, ShareFetch / ShareAcknowledge v2 with ``IsRenewAck``): the
Trio ShareConsumer renews the records it holds on the broker in the test's loop, on Trio's
autojump clock, so the acquisition locks run out without waiting for them."""

from __future__ import annotations

from typing import Any

import trio

from trio_broker.broker.coordinator.share import RecordState
from trio_broker.client import AcknowledgeType, ShareConsumer, TopicPartition, open_producer
from trio_broker.protocol.errors import ErrorCode

LOCK_S = 30  # group.share.record.lock.duration.ms, Kafka's default


async def test_a_renewed_record_outlives_its_first_lock_with_its_delivery_count(
        trio_broker: Any, autojump_clock: Any) -> None:
    topic, group = "share-renew", "sg-renew"
    trio_broker.state.logs.create_topic(topic, 1, {})
    trio_broker.state.shares.group_configs.alter(group, [("share.auto.offset.reset",
                                                          "earliest")])
    async with open_producer(trio_broker.bootstrap_servers) as producer:
        for i in range(3):
            await producer.send_soon(topic, b"%d" % i)
    tp = TopicPartition(topic, 0)
    with trio.fail_after(10 * LOCK_S):
        async with ShareConsumer(trio_broker.bootstrap_servers, group_id=group, topics=[topic],
                                 share_acknowledgement_mode="explicit") as holder:
            held = [await holder.__anext__() for _ in range(3)]
            assert [(r.offset, r.delivery_count) for r in held] == [(0, 1), (1, 1), (2, 1)]
            acquired_at = trio.current_time()
            await trio.sleep(LOCK_S * 2 / 3)
            for record in held:
                await holder.acknowledge(record, AcknowledgeType.RENEW)
            assert await holder.commit() == {tp: 0}
            renewed_at = trio.current_time()
            [sp] = [sp for (g, _, _), sp in trio_broker.state.shares.partitions.items()
                    if g == group]
            assert {o: (r.state, r.delivery_count) for o, r in sp.in_flight.items()} == {
                o: (RecordState.ACQUIRED, 1) for o in range(3)}
            # past the first lock's end: another member gets nothing, the holder still holds
            await trio.sleep(acquired_at + LOCK_S + 1 - trio.current_time())
            async with ShareConsumer(trio_broker.bootstrap_servers, group_id=group,
                                     topics=[topic],
                                     share_acknowledgement_mode="explicit") as other:
                with trio.move_on_after(renewed_at + LOCK_S - 2 - trio.current_time()):
                    await other.__anext__()
                    raise AssertionError("a renewed record was delivered again")
            assert {o: r.state for o, r in sp.in_flight.items()} == {
                o: RecordState.ACQUIRED for o in range(3)}
            # the renewed lock still holds: the holder's final acknowledgements are taken
            for record in held:
                await holder.acknowledge(record, AcknowledgeType.ACCEPT)
            assert await holder.commit() == {tp: 0}
            assert (sp.start_offset, sp.in_flight) == (3, {})


async def test_an_unrenewed_record_comes_back_after_its_lock(
        trio_broker: Any, autojump_clock: Any) -> None:
    """The control: without the renewal the same wait hands the record to another member, its
    delivery count raised."""
    topic, group = "share-norenew", "sg-norenew"
    trio_broker.state.logs.create_topic(topic, 1, {})
    trio_broker.state.shares.group_configs.alter(group, [("share.auto.offset.reset",
                                                          "earliest")])
    async with open_producer(trio_broker.bootstrap_servers) as producer:
        await producer.send_soon(topic, b"0")
    with trio.fail_after(10 * LOCK_S):
        async with ShareConsumer(trio_broker.bootstrap_servers, group_id=group, topics=[topic],
                                 share_acknowledgement_mode="explicit") as holder:
            first = await holder.__anext__()
            assert first.delivery_count == 1
            await trio.sleep(LOCK_S + 1)
            async with ShareConsumer(trio_broker.bootstrap_servers, group_id=group,
                                     topics=[topic]) as other:
                again = await other.__anext__()
            assert (again.offset, again.delivery_count) == (0, 2)
            await holder.acknowledge(first, AcknowledgeType.ACCEPT)
            assert await holder.commit() == {
                TopicPartition(topic, 0): ErrorCode.INVALID_RECORD_STATE}
