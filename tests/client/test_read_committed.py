"""The Trio consumer's ``isolation.level=read_committed`` against transactions librdkafka wrote."""

from __future__ import annotations

from typing import Any

import confluent_kafka
import pytest
import trio

from trio_broker.client import TopicPartition, open_consumer
from trio_broker.client.trio import errors


def _transactional(bootstrap: str, txn_id: str) -> confluent_kafka.Producer:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                         "transactional.id": txn_id, "linger.ms": 0})
    producer.init_transactions(10)
    return producer


def _interleave(bootstrap: str, topic: str) -> confluent_kafka.Producer:
    """Two producers' transactions interleaved in one partition: a commits, b aborts, then b
    commits, then a aborts; then a third transaction left open. Returns its producer."""
    a, b = _transactional(bootstrap, "rc-a"), _transactional(bootstrap, "rc-b")
    a.begin_transaction()
    b.begin_transaction()
    for i in range(3):
        a.produce(topic, b"a-committed-%d" % i, partition=0)
        b.produce(topic, b"b-aborted-%d" % i, partition=0)
        a.flush(10)
        b.flush(10)
    a.commit_transaction(10)
    b.abort_transaction(10)
    b.begin_transaction()
    a.begin_transaction()
    b.produce(topic, b"b-committed", partition=0)
    a.produce(topic, b"a-aborted", partition=0)
    a.flush(10)
    b.flush(10)
    b.commit_transaction(10)
    a.abort_transaction(10)
    plain = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, b"plain", partition=0)
    plain.flush(10)
    open_txn = _transactional(bootstrap, "rc-open")
    open_txn.begin_transaction()
    open_txn.produce(topic, b"open", partition=0)
    open_txn.flush(10)
    return open_txn


async def _read(bootstrap: str, topic: str, isolation: str, expected: int,
                ) -> tuple[list[bytes], int]:
    tp = TopicPartition(topic, 0)
    got: list[bytes] = []
    async with open_consumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                             auto_offset_reset="earliest", fetch_max_wait_ms=50) as consumer:
        consumer.assign([tp])
        with trio.move_on_after(10):
            while len(got) < expected:
                batch = await consumer.getmany(timeout_ms=200)
                got += [r.value for r in batch.get(tp, [])]
        # nothing more may come: the next records are aborted or past the stable offset
        extra = await consumer.getmany(timeout_ms=300)
        got += [r.value for r in extra.get(tp, [])]
        end = (await consumer.end_offsets([tp]))[tp]
    return got, end


async def test_read_committed_drops_aborted_and_stops_at_the_stable_offset(
        trio_broker: Any) -> None:
    trio_broker.state.logs.create_topic("rc", 1, {})
    bootstrap = trio_broker.bootstrap_servers
    open_txn = await trio.to_thread.run_sync(_interleave, bootstrap, "rc")
    try:
        committed, stable_end = await _read(bootstrap, "rc", "read_committed", 5)
        everything, high_watermark = await _read(bootstrap, "rc", "read_uncommitted", 10)
    finally:
        await trio.to_thread.run_sync(open_txn.abort_transaction, 10)
    assert committed == [b"a-committed-0", b"a-committed-1", b"a-committed-2",
                         b"b-committed", b"plain"]
    assert sorted(everything) == sorted([
        *(b"a-committed-%d" % i for i in range(3)), *(b"b-aborted-%d" % i for i in range(3)),
        b"b-committed", b"a-aborted", b"plain", b"open"])
    # the open transaction's first record is the last stable offset: "latest" under
    # read_committed stops there, under read_uncommitted it is the high watermark
    assert stable_end < high_watermark
    assert stable_end == high_watermark - 1


async def test_an_unknown_isolation_level_is_refused() -> None:
    with pytest.raises(errors.ConfigError, match=r"isolation\.level"):
        async with open_consumer(bootstrap_servers="127.0.0.1:1",
                                 isolation_level="serializable"):
            pass
