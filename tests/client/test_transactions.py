"""The Trio client's transactional producer against the broker."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from tests.clients.recorder import recording
from tests.transactions.test_confluent_transactions import _consume_all
from trio_broker.client import TopicPartition, open_producer
from trio_broker.client.core.versions import transaction_version_2
from trio_broker.client.trio import errors
from trio_broker.protocol.api_keys import ApiKey


async def _fail_inside(producer: Any, topic: str = "t") -> None:
    async with producer.transaction():
        await producer.send(topic, b"aborted", partition=0)
        raise KeyError("the application failed")


async def test_commit_abort_and_offsets(trio_broker: Any) -> None:
    trio_broker.state.logs.create_topic("t", 2, {})
    bootstrap = trio_broker.bootstrap_servers
    async with open_producer(bootstrap, transactional_id="trio-tx") as producer:
        with pytest.raises(errors.IllegalStateError):
            await producer.send("t", b"outside", partition=0)
        async with producer.transaction():
            await producer.send_soon("t", b"c1", partition=0)
            await producer.send_soon("t", b"c2", partition=1)
        with pytest.raises(KeyError):
            await _fail_inside(producer)
        async with producer.transaction():
            await producer.send_soon("t", b"c3", partition=1)
            await producer.send_offsets_to_transaction({TopicPartition("t", 0): 5}, "g-trio")
    seen = await trio.to_thread.run_sync(_consume_all, bootstrap, "t", 2, "read_committed", 3)
    assert sorted(seen) == [b"c1", b"c2", b"c3"]
    everything = await trio.to_thread.run_sync(_consume_all, bootstrap, "t", 2,
                                               "read_uncommitted", 4)
    assert sorted(everything) == [b"aborted", b"c1", b"c2", b"c3"]
    error, found = trio_broker.state.groups.fetch_offsets("g-trio", [("t", 0)])
    assert error == 0
    [(_, committed)] = found
    assert committed is not None
    assert committed.offset == 5


async def test_a_second_producer_fences_the_first(trio_broker: Any) -> None:
    trio_broker.state.logs.create_topic("f", 1, {})
    bootstrap = trio_broker.bootstrap_servers
    async with open_producer(bootstrap, transactional_id="fence") as first, \
            open_producer(bootstrap, transactional_id="fence") as second:
        await first.begin_transaction()
        await first.send("f", b"zombie", partition=0)
        async with second.transaction():  # fences the first, aborting its transaction
            await second.send("f", b"successor", partition=0)
        with pytest.raises(errors.ProducerFencedError):
            await first.commit_transaction()
        with pytest.raises(errors.ProducerFencedError):
            await first.begin_transaction()
    seen = await trio.to_thread.run_sync(_consume_all, bootstrap, "f", 1, "read_committed", 1)
    assert seen == [b"successor"]


async def test_speaks_transaction_version_2_where_the_broker_finalizes_it(
        trio_broker: Any) -> None:
    trio_broker.state.logs.create_topic("v2", 2, {})
    bootstrap = trio_broker.bootstrap_servers
    with recording() as seen:
        async with open_producer(bootstrap, transactional_id="tv2-client") as producer:
            for i in range(3):
                async with producer.transaction():
                    await producer.send("v2", b"c%d" % i, partition=i % 2)
            with pytest.raises(KeyError):
                await _fail_inside(producer, "v2")
            async with producer.transaction():
                await producer.send_soon("v2", b"c3", partition=1)
                await producer.send_offsets_to_transaction({TopicPartition("v2", 0): 3}, "g2")
    apis: dict[str, set[int]] = {}
    for (_, api, version), _count in seen.items():
        apis.setdefault(api, set()).add(version)
    # partitions and the group join through Produce v12 and TxnOffsetCommit v5 (KIP-890)
    assert "AddPartitionsToTxn" not in apis
    assert "AddOffsetsToTxn" not in apis
    assert (apis["Produce"], apis["EndTxn"], apis["TxnOffsetCommit"]) == ({12}, {5}, {5})
    meta = trio_broker.state.transactions.transactions["tv2-client"]
    assert meta.producer_epoch == 5  # one InitProducerId (epoch 0), then five ends
    seen_values = await trio.to_thread.run_sync(_consume_all, bootstrap, "v2", 2,
                                                "read_committed", 4)
    assert sorted(seen_values) == [b"c0", b"c1", b"c2", b"c3"]
    error, found = trio_broker.state.groups.fetch_offsets("g2", [("v2", 0)])
    assert error == 0
    assert found[0][1] is not None
    assert found[0][1].offset == 3


def test_transaction_version_1_where_the_broker_does_not_finalize_2() -> None:
    v2_ranges = {ApiKey.Produce: (0, 12), ApiKey.TxnOffsetCommit: (0, 5), ApiKey.EndTxn: (0, 5)}
    assert transaction_version_2(v2_ranges, {"transaction.version": 2})
    assert not transaction_version_2(v2_ranges, {})  # a Kafka 3.x broker: no such feature
    assert not transaction_version_2(v2_ranges, {"transaction.version": 1})
    assert not transaction_version_2({**v2_ranges, ApiKey.EndTxn: (0, 4)},
                                     {"transaction.version": 2})
