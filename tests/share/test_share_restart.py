"""Share-partition state across a broker killed with SIGKILL mid-stream, three times, and
restarted on the same data each time: a record whose acceptance the broker confirmed is never
delivered again, every record not accepted is delivered again, and in the end every record is
accepted once."""

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


def _accept_until(c: ShareConsumer, accepted: set[int], target: int) -> None:
    """Accept what ``c`` gets until ``accepted`` (the acceptances the broker confirmed) holds
    ``target`` records; a record confirmed accepted must never come again."""
    deadline = time.monotonic() + 30
    while len(accepted) < target and time.monotonic() < deadline:
        batch = set()
        for m in c.poll(0.5):
            assert m.error() is None, m.error()
            assert m.offset() not in accepted, f"accepted record {m.offset()} delivered again"
            c.acknowledge(m, AcknowledgeType.ACCEPT)
            batch.add(m.offset())
        c.commit_sync()  # answered once the acceptances are on disk
        accepted |= batch


def test_accepted_records_survive_three_kill_9s(tmp_path: Path,
                                                unique_topic: Callable[[str], str]) -> None:
    topic, group = unique_topic("t"), unique_topic("sg")
    broker = BrokerProcess(tmp_path / "data", "group.share.record.lock.duration.ms=2000").start()
    consumers: list[ShareConsumer] = []
    accepted: set[int] = set()
    held: set[int] = set()
    try:
        bootstrap = broker.bootstrap_servers
        create_topic(bootstrap, topic)
        for kill in range(3):
            c = consumer(bootstrap, group)
            consumers.append(c)
            c.subscribe([topic])
            if kill == 0:
                wait_for(lambda c=c: (c.poll(0.2), members(bootstrap, group))[1] == 1, 30,
                         "a member")
                produce(bootstrap, topic, range(RECORDS))
            _accept_until(c, accepted, (kill + 1) * RECORDS // 4)
            # records acquired and not acknowledged are in the client's hands at the kill
            held = {m.offset() for m in c.poll(1.0) if m.error() is None} - accepted
            assert held
            assert (kill + 1) * RECORDS // 4 <= len(accepted) < RECORDS
            broker.kill()
            broker.start()
        last = consumer(bootstrap, group)
        consumers.append(last)
        last.subscribe([topic])
        before = set(accepted)
        _accept_until(last, accepted, RECORDS)
        redelivered = accepted - before
    finally:
        for c in consumers:
            c.close()
        broker.kill()
    assert accepted == set(range(RECORDS)), "every record accepted once"
    assert held <= redelivered, "the records held at the last kill came again"
