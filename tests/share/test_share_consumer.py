"""librdkafka's share consumer (``confluent_kafka.ShareConsumer``, KIP-932) against the broker:
members that read one partition together, each record delivered to one of them; explicit
acknowledgements (released records come back with a higher delivery count, rejected and accepted
ones never, a record released too often is archived); a member killed with SIGKILL while it holds
records, whose records reach another member once their acquisition lock ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from trio_broker.client.blocking import BrokerConnection, parse_address
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.testing import ThreadedBroker

#: records of the three-member test (``SHARE_RECORDS`` to change it)
RECORDS = int(os.environ.get("SHARE_RECORDS", "30000"))
ROOT = Path(__file__).resolve().parents[2]


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10)[topic].result(15)


def produce(bootstrap: str, topic: str, values: range) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in values:
        p.produce(topic, value=b"%d" % i)
        p.poll(0)
    assert p.flush(30) == 0


def members(bootstrap: str, group: str) -> int:
    with BrokerConnection(*parse_address(bootstrap)) as conn:
        found = conn.call(ApiKey.ShareGroupDescribe, 1, group_ids=[group],
                          include_authorized_operations=False).groups[0]
    return len(found.members) if found.error_code == 0 else 0


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def share_consumer(bootstrap: str, group: str, **extra: str) -> ShareConsumer:
    return ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **extra})


def test_three_members_share_one_partition(kafka_broker: ThreadedBroker,
                                           unique_topic: Callable[[str], str]) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = unique_topic("t"), unique_topic("sg")
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, range(-5, 0))  # before the group: never delivered (latest)
    received: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    stop = threading.Event()
    consumers = [share_consumer(bootstrap, group) for _ in received]
    for c in consumers:
        c.subscribe([topic])

    def run(n: int) -> None:
        deadline = time.monotonic() + 90
        while not stop.is_set() and time.monotonic() < deadline:
            for m in consumers[n].poll(0.2):
                assert m.error() is None, m.error()
                received[n].append(m.value())

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in received]
    for t in threads:
        t.start()
    wait_for(lambda: members(bootstrap, group) == 3, 30, "three members")
    started = time.monotonic()
    produce(bootstrap, topic, range(RECORDS))
    wait_for(lambda: sum(len(v) for v in received.values()) >= RECORDS, 90, "every record")
    elapsed = time.monotonic() - started
    time.sleep(0.5)  # a duplicate would arrive now
    stop.set()
    for t in threads:
        t.join(10)
    for c in consumers:
        c.close()
    every = Counter(v for values in received.values() for v in values)
    assert every == Counter(b"%d" % i for i in range(RECORDS)), "each record exactly once"
    assert all(received.values()), {n: len(v) for n, v in received.items()}
    print(f"{RECORDS} records over 3 members in {elapsed:.2f} s:",
          {n: len(v) for n, v in received.items()})


def poll_messages(consumer: ShareConsumer, want: int, timeout_s: float = 20) -> list:
    got: list = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        got += [m for m in consumer.poll(0.5) if m.error() is None]
    return got


@pytest.mark.broker_config(group_share_delivery_count_limit=3)
def test_explicit_acknowledgement(kafka_broker: ThreadedBroker,
                                  unique_topic: Callable[[str], str]) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = unique_topic("t"), unique_topic("sg")
    create_topic(bootstrap, topic)
    c = share_consumer(bootstrap, group, **{"share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    wait_for(lambda: (c.poll(0.2), members(bootstrap, group))[1] == 1, 30, "the member")
    produce(bootstrap, topic, range(4))
    # 0 accept, 1 release (until archived), 2 reject, 3 release once then accept
    seen: list[tuple[int, int]] = []
    kinds = {0: [AcknowledgeType.ACCEPT], 2: [AcknowledgeType.REJECT],
             1: [AcknowledgeType.RELEASE] * 3,
             3: [AcknowledgeType.RELEASE, AcknowledgeType.ACCEPT]}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(seen) < 7:
        for m in c.poll(0.5):
            assert m.error() is None, m.error()
            seen.append((m.offset(), m.delivery_count()))
            c.acknowledge(m, kinds[m.offset()].pop(0))
    c.commit_sync()
    assert sorted(seen) == [(0, 1), (1, 1), (1, 2), (1, 3), (2, 1), (3, 1), (3, 2)]
    # nothing more: offset 1 was archived at the delivery count limit (3)
    assert poll_messages(c, 1, timeout_s=2) == []
    c.close()
    assert kafka_broker.broker is not None
    shares = kafka_broker.broker.state.shares
    [sp] = [sp for (g, _, _), sp in shares.partitions.items() if g == group]
    assert (sp.start_offset, sp.in_flight) == (4, {})


@pytest.mark.broker_config(group_share_record_lock_duration_ms=1000)
def test_records_of_a_killed_member_reach_another(kafka_broker: ThreadedBroker,
                                                  unique_topic: Callable[[str], str]) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = unique_topic("t"), unique_topic("sg")
    create_topic(bootstrap, topic)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    victim = subprocess.Popen([sys.executable, "-m", "tests.share.share_member", bootstrap,
                               group, topic], stdout=subprocess.PIPE, text=True, env=env,
                              cwd=ROOT)
    try:
        assert victim.stdout is not None
        assert json.loads(victim.stdout.readline())["ev"] == "joined"
        wait_for(lambda: members(bootstrap, group) == 1, 30, "the member")
        produce(bootstrap, topic, range(20))
        held = json.loads(victim.stdout.readline())
        assert held["ev"] == "held"
        victim.kill()
        victim.wait(10)
        survivor = share_consumer(bootstrap, group)
        survivor.subscribe([topic])
        got = poll_messages(survivor, len(held["offsets"]))
        survivor.close()
    finally:
        victim.kill()
        victim.wait(10)
    redelivered = {m.offset(): m.delivery_count() for m in got}
    assert set(held["offsets"]) <= set(redelivered)
    assert all(redelivered[o] == 2 for o in held["offsets"])
