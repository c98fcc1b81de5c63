"""A rolling upgrade of a consumer group from the classic to the consumer protocol and back,
with librdkafka (confluent-kafka) members in their own processes against a real broker
process, while records are produced (``group.consumer.migration.policy``, Kafka 4.x's online
migration).

Checked from the members' own callbacks and commits: at every moment each partition has at
most one owner; each step ends with an exact cover by the members then running; every record
is consumed; the committed offsets of each partition only move forward (no record counted as
processed twice by the group's commits) and end at the log end; the group's type follows the
members (consumer once a consumer-protocol member is in, classic once the last one left).
"""

from __future__ import annotations

import threading
import uuid

import pytest

from tests.broker_process import BrokerProcess
from tests.coordinator.group_workers import wait_for
from tests.coordinator.test_kip848_real_clients import (
    BROKER_OVERRIDES,
    Events,
    Worker,
    cover,
    lag,
    produce,
    replay,
)
from tests.coordinator.test_real_clients import create_topic
from trio_broker.client.blocking import BrokerConnection, parse_address
from trio_broker.protocol.api_keys import ApiKey

pytestmark = pytest.mark.slow

PARTITIONS = 12
RECORDS = 20_000


def group_type(bootstrap: str, group: str) -> str:
    with BrokerConnection(*parse_address(bootstrap)) as conn:
        listed = conn.call(ApiKey.ListGroups, 5, states_filter=[], types_filter=[])
    return next(g.group_type for g in listed.groups if g.group_id == group)


def commits_only_move_forward(events: Events) -> list[str]:
    """Every moment a partition's committed offset went back (a record committed twice)."""
    last: dict[int, tuple[int, str]] = {}
    backwards = []
    for t, worker, offsets in sorted(events.commits):
        for partition, offset in offsets.items():
            previous = last.get(partition)
            if previous is not None and offset < previous[0]:
                backwards.append(f"t={t:.3f}: {worker} committed {partition}@{offset} after "
                                 f"{previous[1]} committed {previous[0]}")
            last[partition] = (offset, worker)
    return backwards


def test_rolling_upgrade_to_the_consumer_protocol_and_back(tmp_path):
    broker = BrokerProcess(tmp_path / "data", *BROKER_OVERRIDES).start()
    bootstrap = broker.bootstrap_servers
    topic, group = "rolling", f"rolling-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, PARTITIONS)
    events = Events()
    workers: dict[str, Worker] = {}

    def start(name: str, protocol: str) -> None:
        workers[name] = Worker(name, bootstrap, group, topic, events, protocol)

    def replace(old: str, new: str, protocol: str) -> None:
        """One step of a rolling restart: the new process first, then the old one closes."""
        start(new, protocol)
        wait_for(lambda: new in events.ownership(), 60, f"{new} taking a share")
        workers.pop(old).stop()
        wait_for(lambda: cover(events, set(workers)), 60, f"{sorted(workers)}' exact cover")

    # records flow at this rate through every step of the rolling restart, then at full speed
    restarted = threading.Event()
    producer = threading.Thread(target=produce, args=(bootstrap, topic, RECORDS, 2000),
                                kwargs={"unthrottled": restarted}, daemon=True)
    try:
        start("c1", "classic")
        start("c2", "classic")
        wait_for(lambda: cover(events, {"c1", "c2"}), 60, "the classic members' cover")
        assert group_type(bootstrap, group) == "classic"
        producer.start()
        replace("c1", "n1", "consumer")  # upgrade: the classic group becomes a consumer group
        assert group_type(bootstrap, group) == "consumer"
        replace("c2", "n2", "consumer")
        replace("n1", "c3", "classic")  # and back: classic members join the consumer group
        assert group_type(bootstrap, group) == "consumer"
        replace("n2", "c4", "classic")  # the last consumer-protocol member leaves: downgrade
        assert group_type(bootstrap, group) == "classic"
        restarted.set()
        producer.join(120)
        assert not producer.is_alive()
        wait_for(lambda: len(events.values) == RECORDS, 120, "every record consumed",
                 interval_s=0.2)
        wait_for(lambda: lag(bootstrap, group, topic) == 0, 60, "commits reaching the log end",
                 interval_s=0.2)
    finally:
        for w in workers.values():
            w.stop()
        broker.kill()
    _owners, violations = replay(events.snapshot())
    assert violations == []
    assert commits_only_move_forward(events) == []
    assert events.values == {str(i) for i in range(RECORDS)}
    print(f"{RECORDS} records, {events.consumed - RECORDS} read again after a revocation "
          f"before their commit; {len(events.commits)} commits")
