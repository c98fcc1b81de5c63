"""The blocking producer: every codec, Kafka's config rules, bounded in-flight requests, and
exactly-once delivery through a proxy that keeps severing its connections."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from tests.idempotence.checks import check_exactly_once, value_of
from tests.idempotence.harness import ProxiedBroker
from trio_broker.client.blocking import (
    BlockingClient,
    BlockingProducer,
    ConfigError,
    ProducerSettings,
    RecordBlock,
    TopicPartition,
)
from trio_broker.client.core import errors
from trio_broker.protocol.batch import BATCH_HEADER_SIZE
from trio_broker.protocol.records import build_batch, decode_batches

LOGGER = logging.getLogger(__name__)


def block_of(records: list[tuple[bytes | None, bytes | None]], timestamp_ms: int = 1000,
             headers: tuple = ()) -> RecordBlock:
    """The records of a batch as ``protocol.records`` lays them out, without the header."""
    batch = build_batch([(k, v, headers) for k, v in records], base_timestamp_ms=timestamp_ms)
    return RecordBlock(batch[BATCH_HEADER_SIZE:], len(records), timestamp_ms, timestamp_ms)


def read_all(client: BlockingClient, tp: TopicPartition) -> list:
    out = []
    offset = 0
    while True:
        fetched = client.fetch(tp, offset, max_bytes=1 << 22)
        got = [(header, records) for header, records in decode_batches(fetched.records)]
        if not got:
            return out
        for header, records in got:
            out.append((header, records))
            offset = header.last_offset + 1


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_lands_in_order_with_its_offsets(kafka_broker, unique_topic, codec):
    topic = kafka_broker.create_topic(unique_topic(codec), 2)
    delivered: list[tuple[TopicPartition, int, int]] = []
    with BlockingClient(kafka_broker.bootstrap_servers) as client:
        producer = BlockingProducer(client, ProducerSettings.from_config(
            {"compression.type": codec}), on_delivery=lambda tp, offset, block: delivered.append(
                (tp, offset, block.num_records)))
        for i in range(40):
            tp = TopicPartition(topic, i % 2)
            producer.send(tp, block_of([(b"k%d" % i, b"v%d-%d" % (i, j)) for j in range(25)],
                                       headers=(("h", b"%d" % i),)))
        producer.flush()
        assert not producer.pending
        for p in range(2):
            tp = TopicPartition(topic, p)
            assert [d[1:] for d in delivered if d[0] == tp] == [(25 * n, 25) for n in range(20)]
            stored = read_all(client, tp)
            assert len(stored) == 20
            header = stored[0][0]
            assert header.compression == ["none", "gzip", "snappy", "lz4", "zstd"].index(codec)
            assert header.producer_id >= 0  # idempotent by default
            assert [h.base_sequence for h, _ in stored] == [25 * n for n in range(20)]
            values = [r.value for _, records in stored for r in records]
            assert values == [b"v%d-%d" % (i, j) for i in range(p, 40, 2) for j in range(25)]
            assert stored[0][1][0].headers == (("h", b"%d" % p),)


def test_config_follows_kafkas_rules():
    assert ProducerSettings.from_config({}).idempotent
    quiet = ProducerSettings.from_config({"acks": "1"})
    assert (quiet.acks, quiet.idempotent) == (1, False)
    with pytest.raises(ConfigError, match="Must set acks to all"):
        ProducerSettings.from_config({"acks": "0", "enable.idempotence": "true"})
    with pytest.raises(ConfigError, match=r"in\.flight\.requests\.per\.connection to at most 5"):
        ProducerSettings.from_config({"max.in.flight.requests.per.connection": "6",
                                      "enable.idempotence": True})
    assert not ProducerSettings.from_config(
        {"max.in.flight.requests.per.connection": "6"}).idempotent
    with pytest.raises(ConfigError, match=r"compression\.type: String must be one of"):
        ProducerSettings.from_config({"compression.type": "brotli"})
    with pytest.raises(ConfigError, match=r"unknown producer config 'lingers\.ms'"):
        ProducerSettings.from_config({"lingers.ms": "1"})
    with pytest.raises(ConfigError, match=r"delivery\.timeout\.ms should be equal to or larger"):
        ProducerSettings.from_config({"delivery.timeout.ms": "100", "linger.ms": "50",
                                      "request.timeout.ms": "100"})
    assert ProducerSettings.from_config({"request.timeout.ms": "200000"}).delivery_timeout_ms \
        == 200005


def test_in_flight_requests_are_bounded_and_acks_zero_is_not_answered(kafka_broker,
                                                                     unique_topic):
    topic = kafka_broker.create_topic(unique_topic("inflight"), 3)
    seen: list[int] = []
    with BlockingClient(kafka_broker.bootstrap_servers) as client:
        producer = BlockingProducer(client, ProducerSettings.from_config(
            {"max.in.flight.requests.per.connection": "2"}))
        for i in range(60):
            producer.send(TopicPartition(topic, i % 3), block_of([(None, b"x" * 100)] * 10))
            seen.append(max(map(len, producer._in_flight.values())))
        producer.flush()
        assert max(seen) == 2
        # more than buffer.memory queued: send waits for answers instead of queueing on
        bounded = BlockingProducer(client, ProducerSettings.from_config(
            {"buffer.memory": "20000", "max.in.flight.requests.per.connection": "1"}))
        queued = []
        for i in range(300):
            bounded.send(TopicPartition(topic, i % 3), block_of([(None, b"y" * 100)] * 10))
            queued.append(bounded._queued_bytes)
        bounded.flush()
        assert max(queued) <= 20000
        assert client.list_offsets({TopicPartition(topic, 1): -1}) == {
            TopicPartition(topic, 1): 200 + 1000}
        fire = BlockingProducer(client, ProducerSettings.from_config({"acks": "0"}),
                                on_delivery=lambda tp, offset, block: seen.append(offset))
        fire.send(TopicPartition(topic, 0), block_of([(None, b"late")]))
        fire.flush()
        assert seen[-1] == -1
        assert not fire.idempotent
        # the next request on the connection is answered after the unanswered one is appended
        latest = client.list_offsets({TopicPartition(topic, 0): -1})
        assert latest == {TopicPartition(topic, 0): 1201}


def test_batches_sent_together_share_a_request_per_leader(kafka_broker, unique_topic):
    topic = kafka_broker.create_topic(unique_topic("together"), 3)
    with BlockingClient(kafka_broker.bootstrap_servers) as client:
        producer = BlockingProducer(client, ProducerSettings.from_config(
            {"max.request.size": "3000"}))
        # two batches per partition; a request takes at most one batch per partition (Produce
        # allows no more) and 2 of 1,100 bytes each (3 do not fit max.request.size); each
        # request starts from the next partition, so the one left out goes first next time
        producer.send_all([(TopicPartition(topic, i % 3), block_of([(None, b"z" * 1000)]))
                           for i in range(6)])
        requests = [[b.tp.partition for b in r.batches]
                    for queue in producer._in_flight.values() for r in queue]
        assert len(requests) == 3  # one at a time would be 6 requests, without the turns 4
        assert all(len(set(partitions)) == 2 for partitions in requests)
        producer.flush()
        assert client.list_offsets({TopicPartition(topic, p): -1 for p in range(3)}) == {
            TopicPartition(topic, p): 2 for p in range(3)}


def test_errors_a_retry_cannot_clear_name_the_partition(kafka_broker, unique_topic):
    topic = kafka_broker.create_topic(unique_topic("big"), 1, {"max.message.bytes": "2000"})
    tp = TopicPartition(topic, 0)
    with BlockingClient(kafka_broker.bootstrap_servers) as client:
        producer = BlockingProducer(client)
        producer.send(tp, block_of([(None, b"x" * 5000)]))
        with pytest.raises(errors.MessageTooLargeError,
                           match=rf"MESSAGE_TOO_LARGE \(10\) producing to {topic}-0"):
            producer.flush()
        small = BlockingProducer(client, ProducerSettings.from_config(
            {"max.request.size": "1000"}))
        with pytest.raises(errors.MessageTooLargeError, match=r"larger than 1000, which is the "
                                                              r"value of the max\.request\.size"):
            small.send(tp, block_of([(None, b"x" * 2000)]))
        # a group with one batch too large queues none of them
        with pytest.raises(errors.MessageTooLargeError, match=r"max\.request\.size"):
            small.send_all([(tp, block_of([(None, b"ok")])), (tp, block_of([(None, b"x" * 2000)]))])
        small.flush()
        assert client.list_offsets({tp: -1}) == {tp: 0}


def test_severed_connections_still_deliver_each_batch_once_in_order(tmp_path: Path):
    harness = ProxiedBroker(tmp_path / "data", cut_after_bytes=(40 << 10, 200 << 10),
                            seed=11).start()
    try:
        topic = "severed-blocking"
        harness.create_topic(topic, 3)
        total, per_batch = 30_000, 50
        delivered: list[tuple[int, int, bytes]] = []
        values: dict[TopicPartition, list[bytes]] = {}
        sent: dict[TopicPartition, list[list[bytes]]] = {}

        def on_delivery(tp: TopicPartition, base_offset: int, block: RecordBlock) -> None:
            batch = sent[tp].pop(0)
            assert len(batch) == block.num_records
            delivered.extend((tp.partition, base_offset + i, v) for i, v in enumerate(batch))

        started = time.monotonic()
        with BlockingClient(harness.bootstrap_servers, timeout_s=10) as client:
            producer = BlockingProducer(client, ProducerSettings.from_config(
                {"retry.backoff.ms": "10", "retry.backoff.max.ms": "100",
                 "delivery.timeout.ms": "90000"}), on_delivery=on_delivery)
            for first in range(0, total, per_batch):
                tp = TopicPartition(topic, (first // per_batch) % 3)
                batch = [value_of(seq) for seq in range(first, first + per_batch)]
                sent.setdefault(tp, []).append(batch)
                values.setdefault(tp, []).extend(batch)
                producer.send(tp, block_of([(None, v) for v in batch]))
            producer.flush()
        elapsed = time.monotonic() - started
        outcome = check_exactly_once(harness, topic, 3, total, delivered)
        LOGGER.warning("blocking producer: %d records in %.1f s, %s", total, elapsed,
                       outcome.summary())
        assert outcome.cuts >= 5, "the proxy should have severed connections several times"
        assert outcome.batches_resent >= 1
        assert len(outcome.producer_ids) == 1
        assert harness.read_partition(topic, 0)[0].base_sequence == 0
    finally:
        harness.stop()
