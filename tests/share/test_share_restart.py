"""Share-partition state across a broker killed with SIGKILL mid-stream and restarted on the
same data: a record whose acceptance the broker confirmed is never delivered again, every record
not accepted is delivered again, and in the end every record is accepted."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import AcknowledgeType, ShareConsumer

from tests.broker_process import BrokerProcess
from tests.share.test_share_consumer import create_topic, members, produce, wait_for

RECORDS = 400


def consumer(bootstrap: str, group: str) -> ShareConsumer:
    # few records per poll, so the kill comes with records accepted, held and not yet fetched
    return ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                          "share.acknowledgement.mode": "explicit", "max.poll.records": 50})


def test_accepted_records_survive_a_kill_9(tmp_path: Path,
                                            unique_topic: Callable[[str], str]) -> None:
    topic, group = unique_topic("t"), unique_topic("sg")
    broker = BrokerProcess(tmp_path / "data", "group.share.record.lock.duration.ms=2000").start()
    try:
        bootstrap = broker.bootstrap_servers
        create_topic(bootstrap, topic)
        first = consumer(bootstrap, group)
        first.subscribe([topic])
        wait_for(lambda: (first.poll(0.2), members(bootstrap, group))[1] == 1, 30, "a member")
        produce(bootstrap, topic, range(RECORDS))
        accepted: set[int] = set()
        held: set[int] = set()
        deadline = time.monotonic() + 30
        while len(accepted) < RECORDS // 2 and time.monotonic() < deadline:
            for m in first.poll(0.5):
                assert m.error() is None, m.error()
                first.acknowledge(m, AcknowledgeType.ACCEPT)
                held.add(m.offset())
            first.commit_sync()  # answered once the acceptances are on disk
            accepted |= held
            held = set()
        # records acquired and not acknowledged are in the client's hands at the kill
        for m in first.poll(1.0):
            held.add(m.offset())
        assert RECORDS // 2 <= len(accepted) < RECORDS
        assert held
        broker.kill()
        broker.start()
        second = consumer(bootstrap, group)
        second.subscribe([topic])
        redelivered: list[int] = []
        deadline = time.monotonic() + 60
        while len(accepted) + len(set(redelivered)) < RECORDS and time.monotonic() < deadline:
            for m in second.poll(0.5):
                if m.error() is not None:
                    continue
                redelivered.append(m.offset())
                second.acknowledge(m, AcknowledgeType.ACCEPT)
            second.commit_sync()
        second.close()
        first.close()
    finally:
        broker.kill()
    assert not accepted & set(redelivered), "an accepted record was delivered again"
    assert accepted | set(redelivered) == set(range(RECORDS)), "every record accepted"
    assert held <= set(redelivered)
