"""Real consumers of every client generation through the group path: join, consume, commit,
broker restart, resume from the committed offsets.

kafka-python pinned to an old ``api_version`` speaks the group and offset APIs at the versions
that release knew (JoinGroup v0-v2, OffsetCommit v2-v3, ...); unpinned, confluent-kafka and
aiokafka pick the newest versions both sides know. A broker restart sits between the two phases,
so the second consumer can only resume from what the first committed durably.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import confluent_kafka
import pytest

from tests.coordinator.test_real_clients import committed_and_end, produce
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

PARTITIONS = 6  # test_real_clients' helpers read six partitions
RECORDS = 1200
#: records the first consumer processes and commits before it leaves
FIRST_BATCH = 300
SESSION_MS = 10_000

#: kafka-python releases the tests pin (api_version) besides the unpinned client
KAFKA_PYTHON_PINS = [(0, 10, 2), (0, 11), (1, 1), (2, 0), (2, 6)]
CLIENTS = ["confluent", "aiokafka", "kafka-python",
           *(f"kafka-python-{'.'.join(map(str, pin))}" for pin in KAFKA_PYTHON_PINS)]

pytestmark = pytest.mark.slow

#: consume(bootstrap, group, topic, stop_after) -> [(partition, offset), ...] in order consumed;
#: commits the position after the last record of each partition, then closes
Consume = Callable[[str, str, str, int], list[tuple[int, int]]]


def _confluent(bootstrap: str, group: str, topic: str, stop_after: int) -> list[tuple[int, int]]:
    c = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS})
    c.subscribe([topic])
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + 60
    try:
        while len(seen) < stop_after and time.monotonic() < deadline:
            for m in c.consume(num_messages=50, timeout=0.2):
                if m.error() is None and len(seen) < stop_after:
                    seen.append((m.partition(), m.offset()))
        c.commit(offsets=_positions(seen, lambda p, o: confluent_kafka.TopicPartition(
            topic, p, o)), asynchronous=False)
    finally:
        c.close()
    return seen


def _kafka_python(pin: tuple[int, ...] | None) -> Consume:
    def consume(bootstrap: str, group: str, topic: str, stop_after: int) -> list[tuple[int, int]]:
        import kafka
        from kafka.structs import OffsetAndMetadata, TopicPartition

        extra = {} if pin is None else {"api_version": pin}
        c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                enable_auto_commit=False, auto_offset_reset="earliest",
                                session_timeout_ms=SESSION_MS, **extra)
        c.subscribe([topic])
        seen: list[tuple[int, int]] = []
        deadline = time.monotonic() + 60
        try:
            while len(seen) < stop_after and time.monotonic() < deadline:
                for records in c.poll(timeout_ms=200, max_records=50).values():
                    seen.extend((r.partition, r.offset) for r in records)
            seen = seen[:stop_after]
            c.commit(dict(_positions(seen, lambda p, o: (
                TopicPartition(topic, p), OffsetAndMetadata(o, "", -1)))))
        finally:
            c.close()
        return seen

    return consume


def _aiokafka(bootstrap: str, group: str, topic: str, stop_after: int) -> list[tuple[int, int]]:
    import aiokafka
    from aiokafka.structs import OffsetAndMetadata, TopicPartition

    async def run() -> list[tuple[int, int]]:
        c = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                      enable_auto_commit=False, auto_offset_reset="earliest",
                                      session_timeout_ms=SESSION_MS)
        await c.start()
        seen: list[tuple[int, int]] = []
        try:
            deadline = time.monotonic() + 60
            while len(seen) < stop_after and time.monotonic() < deadline:
                for records in (await c.getmany(timeout_ms=200, max_records=50)).values():
                    seen.extend((r.partition, r.offset) for r in records)
            seen = seen[:stop_after]
            await c.commit(dict(_positions(seen, lambda p, o: (
                TopicPartition(topic, p), OffsetAndMetadata(o, "")))))
        finally:
            await c.stop()
        return seen

    return asyncio.run(run())


def _positions(seen: list[tuple[int, int]], make: Callable) -> list:
    """One commit entry per partition consumed: the offset after its last record."""
    last: dict[int, int] = {}
    for p, o in seen:
        last[p] = max(last.get(p, -1), o)
    return [make(p, o + 1) for p, o in sorted(last.items())]


CONSUMERS: dict[str, Consume] = {
    "confluent": _confluent, "aiokafka": _aiokafka, "kafka-python": _kafka_python(None),
    **{f"kafka-python-{'.'.join(map(str, pin))}": _kafka_python(pin)
       for pin in KAFKA_PYTHON_PINS}}


def _broker(data: Path) -> ThreadedBroker:
    return ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(data)}).start()


@pytest.mark.parametrize("client", CLIENTS)
def test_commit_restart_and_resume(tmp_path, client):
    consume = CONSUMERS[client]
    topic, group = "generations", f"g-{uuid.uuid4().hex[:8]}"
    broker = _broker(tmp_path / "data")
    try:
        broker.create_topic(topic, PARTITIONS)
        produce(broker.bootstrap_servers, topic, range(RECORDS))
        first = consume(broker.bootstrap_servers, group, topic, FIRST_BATCH)
        assert len(first) == FIRST_BATCH
        committed, _ = committed_and_end(broker.bootstrap_servers, group, topic)
        expected = {p: o + 1 for p, o in first}
        for p, o in first:
            expected[p] = max(expected[p], o + 1)
        assert {p: o for p, o in committed.items() if o >= 0} == expected
    finally:
        broker.stop()

    broker = _broker(tmp_path / "data")  # committed offsets must have survived
    try:
        rest = consume(broker.bootstrap_servers, group, topic, RECORDS - FIRST_BATCH)
        firsts: dict[int, int] = {}
        for p, o in rest:
            firsts.setdefault(p, o)
        assert firsts == {p: expected.get(p, 0) for p in firsts}
        assert sorted(first + rest) == sorted(
            (p, o) for p in range(PARTITIONS) for o in range(RECORDS // PARTITIONS))
        committed, end = committed_and_end(broker.bootstrap_servers, group, topic)
        assert committed == end
    finally:
        broker.stop()
