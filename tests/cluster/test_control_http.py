"""The issue's scenarios from a second process: ``trio-broker serve --brokers 3`` driven through
its HTTP control endpoint, with kafka-python as the client."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAuthorizationFailedError


class ClusterProcess:
    """``trio-broker serve --brokers 3`` in a subprocess, and its control endpoint."""

    def __init__(self, data: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "trio_broker", "serve", "--brokers", "3", "--racks", "a,b,c",
             "--override", "listeners=PLAINTEXT://127.0.0.1:0",
             "--override", f"log.dirs={data}",
             "--override", "group.initial.rebalance.delay.ms=0",
             "--override", "control.listener=http://127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.brokers: dict[int, int] = {}
        self.control = ""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 30
        lines = []
        while not self.control and time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if m := re.search(r"broker (\d+) listening on 127.0.0.1:(\d+)", line):
                self.brokers[int(m[1])] = int(m[2])
            if m := re.search(r"cluster control on (http://\S+)/", line):
                self.control = m[1]
        assert self.control, "".join(lines)
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for _ in self.proc.stdout:
            pass

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.brokers.values())

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.control + path, data=data, method=method,
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


@pytest.fixture
def cluster_process(tmp_path: Path) -> Iterator[ClusterProcess]:
    process = ClusterProcess(tmp_path / "data")
    try:
        yield process
    finally:
        if process.proc.poll() is None:
            assert process.stop() == 0


def _create(cluster: ClusterProcess, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    admin.create_topics([NewTopic(topic, partitions, 3)])
    admin.close()


def _read_all(cluster: ClusterProcess, topic: str, expected: int) -> dict[int, list[bytes]]:
    consumer = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap_servers,
                             group_id=f"{topic}-check", auto_offset_reset="earliest",
                             consumer_timeout_ms=3000)
    out: dict[int, list[bytes]] = defaultdict(list)
    deadline = time.monotonic() + 30
    while sum(map(len, out.values())) < expected and time.monotonic() < deadline:
        for message in consumer:
            out[message.partition].append(message.value)
    consumer.close()
    return out


def test_injected_errors_through_http_reach_kafka_python(cluster_process: ClusterProcess) -> None:
    cluster = cluster_process
    assert sorted(cluster.brokers) == [0, 1, 2]
    brokers = cluster.call("GET", "/v1/brokers")["brokers"]
    assert [(b["node_id"], b["port"], b["rack"], b["alive"]) for b in brokers] == [
        (k, cluster.brokers[k], "abc"[k], True) for k in range(3)]
    _create(cluster, "injected", 1)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all",
                             enable_idempotence=True, retries=5, retry_backoff_ms=10)
    producer.send("injected", b"warm-up").get(10)
    cluster.call("POST", "/v1/faults", {"api": "Produce",
                                        "errors": ["NOT_LEADER_OR_FOLLOWER"] * 3,
                                        "node_id": None})
    before = sum(r["api"] == "Produce" for r in cluster.call("GET", "/v1/requests")["requests"])
    producer.send("injected", b"once").get(20)
    requests = cluster.call("GET", "/v1/requests")["requests"]
    assert sum(r["api"] == "Produce" for r in requests) - before == 4
    assert {"node_id", "api", "version", "client_id", "time"} <= set(requests[-1])
    cluster.call("POST", "/v1/faults", {"api": "Produce", "errors": [29]})
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send("injected", b"refused").get(10)
    producer.close()
    assert _read_all(cluster, "injected", 2) == {0: [b"warm-up", b"once"]}
    cluster.call("DELETE", "/v1/faults")
    with pytest.raises(urllib.error.HTTPError, match="400"):
        cluster.call("POST", "/v1/faults", {"api": "Produce", "errors": ["NO_SUCH_ERROR"]})


def test_leader_moves_and_restarts_through_http_with_kafka_python(
        cluster_process: ClusterProcess) -> None:
    cluster = cluster_process
    partitions, records = 3, 600
    _create(cluster, "moving", partitions)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all",
                             enable_idempotence=True, retries=100, retry_backoff_ms=20,
                             linger_ms=5, reconnect_backoff_ms=20)
    stop = threading.Event()
    events: list[str] = []

    def chaos() -> None:
        restarts, step = 0, 0
        while not stop.is_set() and step < 60:
            step += 1
            if step % 10 == 3 and restarts < 3:
                cluster.call("POST", "/v1/brokers/1/stop")
                events.append("stop")
            elif step % 10 == 7 and restarts < 3:
                cluster.call("POST", "/v1/brokers/1/start")
                events.append("start")
                restarts += 1
            live = [0, 2] if events and events[-1] == "stop" else [0, 1, 2]
            moved = cluster.call("POST", f"/v1/partitions/moving/{step % partitions}/leader",
                                 {"node_id": live[step % len(live)]})
            assert moved["leader"] == live[step % len(live)]
            time.sleep(0.2)
        if events and events[-1] == "stop":
            cluster.call("POST", "/v1/brokers/1/start")
            events.append("start")

    consumed: dict[int, list[bytes]] = defaultdict(list)
    reading = threading.Event()

    def consume() -> None:
        consumer = KafkaConsumer("moving", bootstrap_servers=cluster.bootstrap_servers,
                                 group_id="moving-readers", auto_offset_reset="earliest",
                                 retry_backoff_ms=20, reconnect_backoff_ms=20)
        deadline = time.monotonic() + 90
        try:
            while not reading.is_set() and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=200).values():
                    for message in records:
                        consumed[message.partition].append(message.value)
        finally:
            consumer.close()

    reader = threading.Thread(target=consume)
    reader.start()
    mover = threading.Thread(target=chaos)
    mover.start()
    try:
        futures: list[tuple[int, Any]] = []
        for i in range(records):
            p = i % partitions
            futures.append((p, producer.send("moving", b"%d-%05d" % (p, i), partition=p)))
            time.sleep(0.01)
        for _, future in futures:
            future.get(60)  # every record acknowledged
        producer.flush(30)
    finally:
        stop.set()
        mover.join(60)
        producer.close()
    assert events.count("stop") == 3
    assert events.count("start") == 3
    expected = {p: [b"%d-%05d" % (p, i) for i in range(p, records, partitions)]
                for p in range(partitions)}
    deadline = time.monotonic() + 40
    while sum(map(len, consumed.values())) < records and time.monotonic() < deadline:
        time.sleep(0.1)
    reading.set()
    reader.join(30)
    # the group consumer read every record while leaders moved (a rebalance may replay some)
    assert {p: list(dict.fromkeys(v)) for p, v in consumed.items()} == expected
    # and the topic holds each acknowledged record exactly once, in order
    assert dict(_read_all(cluster, "moving", records)) == expected
