"""librdkafka (confluent-kafka) with ``group.protocol=consumer`` (KIP-848) against a real
``trio-broker serve`` process: members in their own processes (so one can be killed), a broker
that is killed with SIGKILL and restarted, and every claim checked from the members' own
rebalance callbacks.

The ledger: each member reports its assign / revoke / lost callbacks stamped with the host's
monotonic clock; replayed in time order (a member killed with SIGKILL owns nothing from the
moment it died), no partition may ever be owned by two members.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import confluent_kafka
import pytest

from tests.broker_process import BrokerProcess
from tests.coordinator.group_workers import wait_for
from tests.coordinator.test_real_clients import create_topic
from trio_broker.client.blocking import BrokerConnection, parse_address
from trio_broker.protocol.api_keys import ApiKey, request_class

pytestmark = pytest.mark.slow

PARTITIONS = 12
ALL = frozenset(range(PARTITIONS))
RECORDS = 100_000
#: consumer-protocol timeouts shortened for the test (Kafka's bounds are 45 s by default)
BROKER_OVERRIDES = (
    "group.consumer.session.timeout.ms=6000", "group.consumer.min.session.timeout.ms=6000",
    "group.consumer.heartbeat.interval.ms=1000", "group.consumer.min.heartbeat.interval.ms=1000")
ROOT = Path(__file__).resolve().parents[2]


class Events:
    """Every worker's events, thread-safe, in arrival order (each stamped by its sender)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[tuple[float, str, str, list]] = []
        self.values: set[str] = set()
        self.consumed = 0
        #: (time, worker, partition -> offset) of every successful commit
        self.commits: list[tuple[float, str, dict[int, int]]] = []

    def add(self, worker: str, event: dict) -> None:
        with self.lock:
            if event["ev"] == "committed":
                self.commits.append((event["t"], worker, {
                    int(p): o for p, o in event["offsets"].items()}))
            elif event["ev"] == "records":
                self.values.update(event["values"])
                self.consumed += len(event["values"])
            else:
                self.items.append((event["t"], worker, event["ev"], event.get("parts", [])))

    def of(self, worker: str, *kinds: str) -> list:
        with self.lock:
            return [e for e in self.items if e[1] == worker and e[2] in kinds]

    def ownership(self) -> dict[str, frozenset[int]]:
        """Who owns what now, by the callbacks."""
        return replay(self.snapshot())[0]

    def snapshot(self) -> list[tuple[float, str, str, list]]:
        with self.lock:
            return sorted(self.items)


def replay(events: list[tuple[float, str, str, list]]
           ) -> tuple[dict[str, frozenset[int]], list[str]]:
    """Replay the ledger: (owners now, every moment a partition had two owners)."""
    owned: dict[str, set[int]] = {}
    violations = []
    for t, worker, kind, parts in events:
        mine = owned.setdefault(worker, set())
        if kind == "assign":
            for p in parts:
                others = [w for w, ps in owned.items() if w != worker and p in ps]
                if others:
                    violations.append(f"t={t:.3f}: {worker} assigned {p} still owned by {others}")
            mine.update(parts)
        elif kind in ("revoke", "lost"):
            mine.difference_update(parts)
        elif kind in ("killed", "closed"):
            mine.clear()
    return {w: frozenset(ps) for w, ps in owned.items() if ps}, violations


class Worker:
    def __init__(self, name: str, bootstrap: str, group: str, topic: str, events: Events,
                 protocol: str = "consumer", instance: str | None = None) -> None:
        self.name = name
        self.events = events
        args = [sys.executable, "-m", "tests.coordinator.kip848_worker", bootstrap, group,
                topic, name, protocol] + ([instance] if instance else [])
        self.proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.add(self.name, json.loads(line))

    def stop(self) -> None:
        """SIGTERM: the consumer closes (commit, leave the group) and exits."""
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(30) == 0
        self.reader.join(10)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self.events.add(self.name, {"t": time.monotonic(), "ev": "killed"})


def cover(events: Events, names: set[str]) -> bool:
    """Exactly the named members own partitions, every partition once, by their callbacks."""
    owned = events.ownership()
    parts = [p for w in names for p in owned.get(w, ())]
    return set(owned) == names and len(parts) == len(set(parts)) and set(parts) == ALL


def produce(bootstrap: str, topic: str, count: int, rate_per_s: float, first: int = 0,
            unthrottled: threading.Event | None = None) -> None:
    """Values ``first`` .. ``first + count - 1``, round robin, at most ``rate_per_s`` until
    ``unthrottled`` is set, then as fast as they go."""
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    start = time.monotonic()
    for i in range(first, first + count):
        if i % 1000 == 0:
            ahead_s = max((i - first) / rate_per_s - (time.monotonic() - start), 0)
            if unthrottled is None:
                time.sleep(ahead_s)
            else:
                unthrottled.wait(ahead_s)
        while True:
            try:
                p.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0


def lag(bootstrap: str, group: str, topic: str) -> int:
    fetch = request_class(ApiKey.OffsetFetch)
    offsets = request_class(ApiKey.ListOffsets)
    with BrokerConnection(*parse_address(bootstrap)) as conn:
        fetched = conn.call(ApiKey.OffsetFetch, 3, group_id=group, topics=[
            fetch.OffsetFetchRequestTopic(name=topic, partition_indexes=list(ALL))])
        listed = conn.call(ApiKey.ListOffsets, 1, replica_id=-1, topics=[
            offsets.ListOffsetsTopic(name=topic, partitions=[
                offsets.ListOffsetsTopic.ListOffsetsPartition(partition_index=p, timestamp=-1)
                for p in ALL])])
    committed = {p.partition_index: p.committed_offset
                 for t in fetched.topics for p in t.partitions}
    end = {p.partition_index: p.offset for t in listed.topics for p in t.partitions}
    return sum(end[p] - max(committed.get(p, -1), 0) for p in ALL)


def describe(bootstrap: str, group: str):
    with BrokerConnection(*parse_address(bootstrap)) as conn:
        return conn.call(ApiKey.ConsumerGroupDescribe, 1, group_ids=[group],
                         include_authorized_operations=False).groups[0]


@pytest.fixture
def broker(tmp_path):
    process = BrokerProcess(tmp_path / "data", *BROKER_OVERRIDES).start()
    try:
        yield process
    finally:
        process.kill()


def test_churn_with_a_killed_member_never_owns_a_partition_twice(broker):
    bootstrap = broker.bootstrap_servers
    topic, group = "churn", f"kip848-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, PARTITIONS)
    events = Events()
    workers = {n: Worker(n, bootstrap, group, topic, events) for n in ("w1", "w2", "w3")}
    # records flow at 4000/s through every rebalance below; once the last one is done the
    # rest go as fast as they can
    churned = threading.Event()
    producer = threading.Thread(target=produce, args=(bootstrap, topic, RECORDS, 4000),
                                kwargs={"unthrottled": churned}, daemon=True)
    try:
        wait_for(lambda: cover(events, {"w1", "w2", "w3"}), 60, "three members' exact cover")
        producer.start()
        workers["w4"] = Worker("w4", bootstrap, group, topic, events)
        wait_for(lambda: cover(events, {"w1", "w2", "w3", "w4"}), 60,
                 "a fourth member taking a share")
        workers.pop("w2").stop()  # leaves: a leave heartbeat on close
        wait_for(lambda: cover(events, {"w1", "w3", "w4"}), 60, "three after a leave")
        killed_at = time.monotonic()
        workers.pop("w3").kill()  # no leave: fenced once its session (6 s) expires
        wait_for(lambda: cover(events, {"w1", "w4"}), 60, "two after a kill")
        taken_over_s = time.monotonic() - killed_at
        churned.set()
        assert taken_over_s >= 5, taken_over_s  # not before the session timeout
        producer.join(120)
        assert not producer.is_alive()
        wait_for(lambda: len(events.values) == RECORDS, 120, "every record consumed",
                 interval_s=0.2)
        wait_for(lambda: lag(bootstrap, group, topic) == 0, 60, "commits reaching the log end",
                 interval_s=0.2)
    finally:
        for w in workers.values():
            w.stop()
    _owners, violations = replay(events.snapshot())
    assert violations == []
    assert events.values == {str(i) for i in range(RECORDS)}
    print(f"{RECORDS} records, {events.consumed - RECORDS} redelivered; killed member's "
          f"partitions taken over after {taken_over_s:.1f} s")


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_stable_group_continues_after_broker_kill_9(broker, protocol):
    """Kafka's documented behaviour: the group is loaded again from ``__consumer_offsets``,
    the members heartbeat into the same epoch (generation) with the same partitions: no
    rebalance, no callback, and commits resume where they were."""
    bootstrap = broker.bootstrap_servers
    topic, group = f"stable-{protocol}", f"stable-{protocol}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, PARTITIONS)
    events = Events()
    workers = [Worker(n, bootstrap, group, topic, events, protocol) for n in ("a", "b")]
    try:
        wait_for(lambda: cover(events, {"a", "b"}), 60, "two members' exact cover")
        produce(bootstrap, topic, 6000, 20_000)
        wait_for(lambda: len(events.values) == 6000, 60, "the first records")
        wait_for(lambda: lag(bootstrap, group, topic) == 0, 30, "the first commits")
        wait_for(lambda: _group_state(bootstrap, group, protocol)[0] == "Stable", 30,
                 "the broker to call the group Stable")
        before = _group_state(bootstrap, group, protocol)
        callbacks = len(events.snapshot())

        broker.kill()  # SIGKILL
        broker.start()
        assert _group_state(bootstrap, group, protocol) == before, broker.log_text()
        produce(bootstrap, topic, 6000, 20_000, first=6000)
        wait_for(lambda: len(events.values) == 12_000, 90, "records after the restart")
        wait_for(lambda: lag(bootstrap, group, topic) == 0, 60, "commits after the restart",
                 interval_s=0.2)
        # Same members, same epochs or generation, same partitions; not one callback ran.
        assert _group_state(bootstrap, group, protocol) == before
        assert len(events.snapshot()) == callbacks
    finally:
        for w in workers:
            w.stop()
    assert replay(events.snapshot())[1] == []


def _group_state(bootstrap: str, group: str, protocol: str):
    """Member ids with their epoch (or the generation) and partitions, as the broker says."""
    if protocol == "consumer":
        d = describe(bootstrap, group)
        return d.group_state, d.group_epoch, sorted(
            (m.member_id, m.member_epoch, sorted(p for tp in m.assignment.topic_partitions
                                                 for p in tp.partitions)) for m in d.members)
    with BrokerConnection(*parse_address(bootstrap)) as conn:
        g = conn.call(ApiKey.DescribeGroups, 5, groups=[group],
                      include_authorized_operations=False).groups[0]
    return g.group_state, sorted((m.member_id, bytes(m.member_assignment)) for m in g.members)


def test_regex_subscription_picks_up_a_topic_created_later(broker):
    bootstrap = broker.bootstrap_servers
    group = f"regex-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, "logs-a", 3)
    create_topic(bootstrap, "metrics", 2)
    c = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
        "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    assigned: set[tuple[str, int]] = set()
    c.subscribe(["^logs-.*"], on_assign=lambda _c, ps: assigned.update(
        (p.topic, p.partition) for p in ps))
    seen: set[tuple[str, bytes]] = set()

    def poll_until(predicate, what: str) -> None:
        deadline = time.monotonic() + 60
        while not predicate():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                seen.add((m.topic(), m.value()))

    try:
        p = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
        for i in range(30):
            p.produce("logs-a", b"a%d" % i, partition=i % 3)
            p.produce("metrics", b"m%d" % i, partition=i % 2)
        p.flush(30)
        poll_until(lambda: len(seen) == 30, "logs-a's records")
        assert assigned == {("logs-a", p) for p in range(3)}
        # A topic created after the group started and matching the expression joins in.
        create_topic(bootstrap, "logs-b", 2)
        for i in range(10):
            p.produce("logs-b", b"b%d" % i, partition=i % 2)
        p.flush(30)
        poll_until(lambda: len(seen) == 40, "logs-b's records")
        assert {t for t, _ in seen} == {"logs-a", "logs-b"}
        assert assigned == {("logs-a", p) for p in range(3)} | {("logs-b", 0), ("logs-b", 1)}
        d = describe(bootstrap, group)
        assert [m.subscribed_topic_regex for m in d.members] == ["(^logs-.*)"]
    finally:
        c.close()


def test_static_member_restarted_keeps_its_partitions(broker):
    """``group.instance.id`` with the consumer protocol: a member closing leaves with epoch
    -2, keeping its place; the same instance restarted within its session gets the same
    partitions back, and the group epoch does not move."""
    bootstrap = broker.bootstrap_servers
    topic, group = "static", f"static-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, PARTITIONS)
    events = Events()
    a = Worker("a", bootstrap, group, topic, events, "consumer", "host-a")
    b = Worker("b", bootstrap, group, topic, events, "consumer", "host-b")
    try:
        wait_for(lambda: cover(events, {"a", "b"}), 60, "two static members' cover")
        wait_for(lambda: describe(bootstrap, group).group_state == "Stable", 30, "Stable")
        before = describe(bootstrap, group)
        mine = events.ownership()["b"]
        b.stop()
        b_events = len(events.of("a", "assign", "revoke", "lost"))
        b = Worker("b2", bootstrap, group, topic, events, "consumer", "host-b")
        wait_for(lambda: events.ownership().get("b2") == mine, 60, "the same partitions back")
        after = describe(bootstrap, group)
        assert after.group_epoch == before.group_epoch
        assert sorted(m.instance_id for m in after.members) == ["host-a", "host-b"]
        assert len(events.of("a", "assign", "revoke", "lost")) == b_events  # a saw nothing
    finally:
        a.stop()
        b.stop()
