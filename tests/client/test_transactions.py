"""The Trio client's transactional producer against the broker."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from tests.transactions.test_confluent_transactions import _consume_all
from trio_broker.client import TopicPartition, open_producer
from trio_broker.client.trio import errors


async def _fail_inside(producer: Any) -> None:
    async with producer.transaction():
        await producer.send("t", b"aborted", partition=0)
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
