"""Real consumers (confluent-kafka, kafka-python, aiokafka) in one group against the broker.

The coordinator's view is checked over the wire (DescribeGroups, decoded assignments) and the
clients' own view through their ``assignment()``; the record book proves at-least-once delivery
with no record skipped while members join, leave and hang.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from tests.coordinator.group_workers import (
    SESSION_MS,
    AiokafkaWorker,
    ConfluentWorker,
    KafkaPythonWorker,
    RecordBook,
    wait_for,
)
from trio_broker.client.blocking import BrokerConnection, parse_address
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.consumer_protocol import decode_assignment, encode_subscription

PARTITIONS = 6
ALL = frozenset(range(PARTITIONS))
#: records produced during the membership changes (in three bursts)
RECORDS = 60_000

pytestmark = pytest.mark.slow


# --- helpers ---------------------------------------------------------------------------------

def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10)
    futures[topic].result(timeout=15)


def produce(bootstrap: str, topic: str, values: range, *, rate_per_s: float = 0,
            stop: threading.Event | None = None,
            unthrottled: threading.Event | None = None) -> None:
    """Produce ``values`` round robin over the partitions, at most ``rate_per_s`` if given
    until ``unthrottled`` is set; ``stop`` ends it early."""
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                  "acks": "all"})
    start = time.monotonic()
    for n, i in enumerate(values):
        if rate_per_s and n % 500 == 0 and not (unthrottled and unthrottled.is_set()):
            ahead_s = n / rate_per_s - (time.monotonic() - start)
            if stop is not None and stop.wait(max(ahead_s, 0)):
                break
        while True:
            try:
                p.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(30) == 0


def group_view(bootstrap: str, group: str) -> tuple[str, dict[str, tuple[str, frozenset[int]]]]:
    """(state, member id -> (client id, assigned partitions)) as the coordinator reports it."""
    with BrokerConnection(*parse_address(bootstrap)) as conn:
        g = conn.call(ApiKey.DescribeGroups, 0, groups=[group]).groups[0]
    members = {}
    for m in g.members:
        parts = decode_assignment(bytes(m.member_assignment)).partitions
        members[m.member_id] = (m.client_id, frozenset(p for ps in parts.values() for p in ps))
    return g.group_state, members


def committed_and_end(bootstrap: str, group: str, topic: str) -> tuple[dict[int, int],
                                                                        dict[int, int]]:
    fetch_cls = request_class(ApiKey.OffsetFetch)
    offsets_cls = request_class(ApiKey.ListOffsets)
    assert fetch_cls is not None
    assert offsets_cls is not None
    with BrokerConnection(*parse_address(bootstrap)) as conn:
        fetched = conn.call(ApiKey.OffsetFetch, 3, group_id=group, topics=[
            fetch_cls.OffsetFetchRequestTopic(name=topic, partition_indexes=list(ALL))])
        listed = conn.call(ApiKey.ListOffsets, 1, replica_id=-1, topics=[
            offsets_cls.ListOffsetsTopic(name=topic, partitions=[
                offsets_cls.ListOffsetsTopic.ListOffsetsPartition(partition_index=p,
                                                                   timestamp=-1)
                for p in ALL])])
    committed = {p.partition_index: p.committed_offset
                 for t in fetched.topics for p in t.partitions}
    end = {p.partition_index: p.offset for t in listed.topics for p in t.partitions}
    return committed, end


class GroupMonitor(threading.Thread):
    """Checks every Stable snapshot: each partition owned by exactly one member."""

    def __init__(self, bootstrap: str, group: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.group = group
        self.stopping = threading.Event()
        self.violations: list[str] = []
        self.stable_snapshots = 0
        self.latest: tuple[str, dict[str, tuple[str, frozenset[int]]]] = ("", {})

    def run(self) -> None:
        while not self.stopping.wait(0.05):
            state, members = group_view(self.bootstrap, self.group)
            self.latest = (state, members)
            if state != "Stable":
                continue
            self.stable_snapshots += 1
            owned = [p for _, parts in members.values() for p in parts]
            if len(owned) != len(set(owned)) or set(owned) != ALL:
                self.violations.append(f"{members}")

    def stable_with(self, client_ids: set[str]) -> bool:
        state, members = self.latest
        return state == "Stable" and {c for c, _ in members.values()} == client_ids

    def stop(self) -> None:
        self.stopping.set()
        self.join(10)


def clients_agree(workers: list) -> bool:
    """The workers' own assignments are disjoint and cover every partition."""
    owned = [p for w in workers for p in w.assignment]
    return len(owned) == len(set(owned)) and set(owned) == ALL


# --- group membership with three client libraries ---------------------------------------------

def test_three_client_libraries_share_a_group(kafka_broker, unique_topic):
    bootstrap = kafka_broker.bootstrap_servers
    topic = unique_topic("orders")
    group = f"mixed-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    book = RecordBook()
    monitor = GroupMonitor(bootstrap, group)
    rd = ConfluentWorker("confluent-1", bootstrap, group, topic, book)
    kp = KafkaPythonWorker("kafka-python-1", bootstrap, group, topic, book)
    aio = AiokafkaWorker("aiokafka-1", bootstrap, group, topic, book)
    rd2 = ConfluentWorker("confluent-2", bootstrap, group, topic, book)
    # Records flow at this rate the whole time the membership changes, then as fast as they go.
    stop_producing, changed = threading.Event(), threading.Event()
    producer = threading.Thread(target=produce, args=(bootstrap, topic, range(RECORDS)),
                                kwargs={"rate_per_s": 4000, "stop": stop_producing,
                                        "unthrottled": changed}, daemon=True)
    workers = [rd, kp, aio]
    for w in workers:
        w.start()
    monitor.start()
    producer.start()
    try:
        # Three members, one per library: every partition assigned exactly once.
        wait_for(lambda: monitor.stable_with({w.name for w in workers})
                 and clients_agree(workers), 60, "three stable members")

        # A fourth joins: rebalance, still no partition owned twice.
        rd2.start()
        workers.append(rd2)
        wait_for(lambda: monitor.stable_with({w.name for w in workers})
                 and clients_agree(workers), 60, "four stable members")

        # A member leaves (LeaveGroup on close).
        kp.stop()
        workers.remove(kp)
        wait_for(lambda: monitor.stable_with({w.name for w in workers})
                 and clients_agree(workers), 60, "three members after a leave")

        # A member stops heartbeating: evicted once its session times out, then rebalance.
        frozen_s = SESSION_MS / 1000 + 5
        aio.freeze(frozen_s)
        evicted_after = wait_for(
            lambda: all(c != aio.name for c, _ in monitor.latest[1].values()), 20,
            "the hung member to be evicted")
        assert SESSION_MS / 1000 - 1 <= evicted_after <= SESSION_MS / 1000 + 5
        wait_for(lambda: monitor.stable_with({rd.name, rd2.name})
                 and clients_agree([rd, rd2]), 20, "the survivors to take over")
        changed.set()

        # Every record consumed at least once, committed offsets reach the log end.
        producer.join(60)
        assert not producer.is_alive()
        wait_for(lambda: book.count() == RECORDS, 120, "every record to be consumed",
                 interval_s=0.2)
        wait_for(lambda: _lag(bootstrap, group, topic) == 0, 30, "commits to reach log end",
                 interval_s=0.2)
    finally:
        stop_producing.set()
        monitor.stop()
        for w in workers:
            w.stop()
    assert monitor.violations == []
    assert monitor.stable_snapshots > 0
    assert book.values == {b"%d" % i for i in range(RECORDS)}
    # Records consumed more than once (redelivered after a rebalance) are expected, and shown.
    per_worker = {w.name: sum(1 for e in book.entries if e[0] == w.name)
                  for w in (rd, kp, aio, rd2)}
    print(f"{RECORDS} records, {len(book.entries) - RECORDS} redelivered, "
          f"{sum(w.commit_failures for w in (rd, kp, aio, rd2))} rejected commits, "
          f"hung member evicted after {evicted_after:.1f} s, consumed per member {per_worker}")


def _lag(bootstrap: str, group: str, topic: str) -> int:
    committed, end = committed_and_end(bootstrap, group, topic)
    return sum(end[p] - max(committed.get(p, -1), 0) for p in ALL)


# --- committed offsets across broker restarts (a real `trio-broker serve` process) -----------

class ServeProcess:
    """``trio-broker serve`` on port 0; the bound port is read from what it prints."""

    def __init__(self, log_dir: Path, stderr_path: Path) -> None:
        self.stderr_path = stderr_path
        with open(stderr_path, "ab") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "trio_broker", "serve",
                 "--override", f"log.dirs={log_dir}",
                 "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                 "--override", "group.initial.rebalance.delay.ms=0"],
                stdout=subprocess.PIPE, stderr=stderr, text=True,
                env=dict(os.environ, PYTHONUNBUFFERED="1"))
        found = threading.Event()
        self.bootstrap = ""

        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                m = re.search(r"listening on PLAINTEXT://127\.0\.0\.1:(\d+)", line)
                if m and not found.is_set():
                    self.bootstrap = f"127.0.0.1:{m.group(1)}"
                    found.set()

        threading.Thread(target=pump, daemon=True).start()
        if not found.wait(30):
            self.proc.kill()
            raise AssertionError(f"broker did not start: {self.log()}")

    def log(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(30) == 0, self.log()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def _first_offsets_confluent(bootstrap: str, group: str, topic: str,
                             commit: dict[int, int]) -> dict[int, int]:
    """Consume until every partition delivered a record; commit ``commit``; first offsets."""
    c = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS})
    c.subscribe([topic])
    first: dict[int, int] = {}
    deadline = time.monotonic() + 60
    try:
        while len(first) < PARTITIONS and time.monotonic() < deadline:
            for m in c.consume(num_messages=500, timeout=0.2):
                if m.error() is None:
                    first.setdefault(m.partition(), m.offset())
        c.commit(offsets=[confluent_kafka.TopicPartition(topic, p, o)
                          for p, o in commit.items()], asynchronous=False)
    finally:
        c.close()
    return first


def _first_offsets_kafka_python(bootstrap: str, group: str, topic: str,
                                commit: dict[int, int]) -> dict[int, int]:
    import kafka
    from kafka.structs import OffsetAndMetadata, TopicPartition

    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                            enable_auto_commit=False, auto_offset_reset="earliest",
                            session_timeout_ms=SESSION_MS)
    c.subscribe([topic])
    first: dict[int, int] = {}
    deadline = time.monotonic() + 60
    try:
        while len(first) < PARTITIONS and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200).values():
                for r in records:
                    first.setdefault(r.partition, r.offset)
        c.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                  for p, o in commit.items()})
    finally:
        c.close()
    return first


def _first_offsets_aiokafka(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    import asyncio

    import aiokafka

    async def run() -> dict[int, int]:
        c = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                      enable_auto_commit=False,
                                      auto_offset_reset="earliest",
                                      session_timeout_ms=SESSION_MS)
        await c.start()
        first: dict[int, int] = {}
        try:
            deadline = time.monotonic() + 60
            while len(first) < PARTITIONS and time.monotonic() < deadline:
                for records in (await c.getmany(timeout_ms=200)).values():
                    for r in records:
                        first.setdefault(r.partition, r.offset)
        finally:
            await c.stop()
        return first

    return asyncio.run(run())


def test_consumers_resume_from_committed_offsets_after_restart_and_kill(tmp_path):
    topic, group = "resume", "resume-group"
    data, log = tmp_path / "data", tmp_path / "serve.log"
    broker = ServeProcess(data, log)
    try:
        create_topic(broker.bootstrap, topic)
        produce(broker.bootstrap, topic, range(6000))  # 1000 per partition
        first_commit = {p: 100 + 10 * p for p in ALL}
        first = _first_offsets_confluent(broker.bootstrap, group, topic, first_commit)
        assert first == dict.fromkeys(ALL, 0)  # nothing committed yet: from the start

        broker.stop()  # clean restart
        broker = ServeProcess(data, log)
        second_commit = {p: 500 + 10 * p for p in ALL}
        first = _first_offsets_kafka_python(broker.bootstrap, group, topic, second_commit)
        assert first == first_commit

        broker.kill()  # kill -9 right after the acknowledged commit
        broker = ServeProcess(data, log)
        assert committed_and_end(broker.bootstrap, group, topic)[0] == second_commit
        first = _first_offsets_aiokafka(broker.bootstrap, group, topic)
        assert first == second_commit
    finally:
        if broker.proc.poll() is None:
            broker.stop()


def test_commit_for_missing_partition_is_refused(kafka_broker, unique_topic):
    topic = kafka_broker.create_topic(unique_topic("commit"), 2)
    cls = request_class(ApiKey.OffsetCommit)
    assert cls is not None
    part = cls.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    with BrokerConnection(*parse_address(kafka_broker.bootstrap_servers)) as conn:
        body = conn.call(ApiKey.OffsetCommit, 3, group_id=f"g-{uuid.uuid4().hex[:8]}",
                            generation_id_or_member_epoch=-1, member_id="",
                            retention_time_ms=-1, topics=[
            cls.OffsetCommitRequestTopic(name=topic, partitions=[
                part(partition_index=p, committed_offset=0, committed_metadata="")
                for p in (1, 2)]),
            cls.OffsetCommitRequestTopic(name="no-such-topic", partitions=[
                part(partition_index=0, committed_offset=0, committed_metadata="")])])
    answers = {(t.name, p.partition_index): p.error_code
               for t in body.topics for p in t.partitions}
    assert answers == {(topic, 1): 0, (topic, 2): 3, ("no-such-topic", 0): 3}


def _join(conn: BrokerConnection, group: str, protocol: str) -> Any:
    """JoinGroup v5 with the MEMBER_ID_REQUIRED round trip."""
    join = request_class(ApiKey.JoinGroup)
    assert join is not None
    fields = dict(group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
                  group_instance_id=None, protocol_type="consumer", protocols=[
                      join.JoinGroupRequestProtocol(name=protocol,
                                                    metadata=encode_subscription(["t"]))])
    first = conn.call(ApiKey.JoinGroup, 5, member_id="", **fields)
    assert first.error_code == 79, first  # MEMBER_ID_REQUIRED
    return conn.call(ApiKey.JoinGroup, 5, member_id=first.member_id, **fields)


def test_a_left_group_is_empty_after_a_kill_right_after_the_leave(tmp_path):
    """LeaveGroup is answered once the emptied group is durable: a broker killed right after
    the answer must not bring the departed member back (a new member with other protocols
    would get INCONSISTENT_GROUP_PROTOCOL until its session expired)."""
    data, log = tmp_path / "data", tmp_path / "serve.log"
    group = "left-then-killed"
    broker = ServeProcess(data, log)
    try:
        for _ in range(3):  # each round: join with "range", leave, kill -9 at once, restart
            with BrokerConnection(*parse_address(broker.bootstrap)) as conn:
                joined = _join(conn, group, "range")
                assert joined.error_code == 0, joined
                sync = request_class(ApiKey.SyncGroup)
                assert sync is not None
                synced = conn.call(ApiKey.SyncGroup, 3, group_id=group,
                                   generation_id=joined.generation_id,
                                   member_id=joined.member_id, group_instance_id=None,
                                   assignments=[sync.SyncGroupRequestAssignment(
                                       member_id=joined.member_id, assignment=b"")])
                assert synced.error_code == 0, synced
                left = conn.call(ApiKey.LeaveGroup, 1, group_id=group,
                                 member_id=joined.member_id)
                assert left.error_code == 0, left
                broker.kill()
            broker = ServeProcess(data, log)
            with BrokerConnection(*parse_address(broker.bootstrap)) as conn:
                [described] = conn.call(ApiKey.DescribeGroups, 3, groups=[group],
                                        include_authorized_operations=False).groups
                assert (described.group_state, described.members) == ("Empty", []), described
                other = _join(conn, group, "roundrobin")
                assert other.error_code == 0, other
                conn.call(ApiKey.LeaveGroup, 1, group_id=group, member_id=other.member_id)
    finally:
        if broker.proc.poll() is None:
            broker.stop()
