"""Confluent's v2 API over plain HTTP: produce, and consumer instances that are real group
members reading what confluent-kafka produced."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

V2 = "application/vnd.kafka.v2+json"
JSON_V2 = "application/vnd.kafka.json.v2+json"
BINARY_V2 = "application/vnd.kafka.binary.v2+json"
#: what one records request returns at most: the 2,000 records (66 KB) take several
MAX_BYTES = 20_000


def _post(rest: httpx.Client, path: str, body: Any, media: str = V2) -> httpx.Response:
    return rest.post(path, content=json.dumps(body), headers={"content-type": media})


def test_v2_produce(rest: httpx.Client, kafka_broker: ThreadedBroker,
                    unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("v2-produce")
    kafka_broker.create_topic(topic, 2)
    answer = _post(rest, f"/topics/{topic}", {"records": [
        {"key": "k", "value": {"n": 1}}, {"value": [1, "é"], "partition": 1},
        {"value": None, "partition": 0}, {"value": 1, "partition": 5}]}, JSON_V2)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == V2
    body = answer.json()
    assert (body["key_schema_id"], body["value_schema_id"]) == (None, None)
    offsets = body["offsets"]
    assert offsets[1] == {"partition": 1, "offset": 0, "error_code": None, "error": None}
    assert offsets[3] == {"partition": None, "offset": None, "error_code": 1,
                          "error": "This server does not host this topic-partition."}
    binary = _post(rest, f"/topics/{topic}/partitions/1", {"records": [
        {"key": base64.b64encode(b"\x00k").decode(), "value": base64.b64encode(b"\xff").decode()}
    ]}, BINARY_V2)
    assert binary.json()["offsets"] == [{"partition": 1, "offset": 1, "error_code": None,
                                         "error": None}]

    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                         "group.id": f"{topic}-check", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
        seen: dict[tuple[int, int], tuple[bytes | None, bytes | None]] = {}
        for _ in range(50):
            for m in consumer.consume(10, timeout=0.5):
                seen[(m.partition(), m.offset())] = (m.key(), m.value())
            if len(seen) == 4:
                break
    finally:
        consumer.close()
    k0 = offsets[0]
    assert seen[(k0["partition"], k0["offset"])] == (b'"k"', b'{"n":1}')
    assert seen[(1, 0)] == (None, '[1,"é"]'.encode())
    assert seen[(1, 1)] == (b"\x00k", b"\xff")
    assert seen[(offsets[2]["partition"], offsets[2]["offset"])] == (None, None)

    def error(response: httpx.Response) -> tuple[int, int]:
        return response.status_code, response.json()["error_code"]

    records = {"records": [{"value": 1}]}
    assert error(_post(rest, f"/topics/{unique_topic('absent')}", records, JSON_V2)) == (
        404, 40401)
    assert error(_post(rest, f"/topics/{topic}/partitions/9", records, JSON_V2)) == (
        404, 40402)
    assert error(_post(rest, f"/topics/{topic}", records,
                       "application/vnd.kafka.avro.v2+json")) == (422, 42202)
    assert error(_post(rest, f"/topics/{topic}", records,
                       "application/vnd.kafka.xml.v2+json")) == (415, 415)
    assert error(_post(rest, f"/topics/{topic}", {"records": []}, JSON_V2)) == (422, 42201)
    partitions = rest.get(f"/topics/{topic}/partitions")
    assert [p["partition"] for p in partitions.json()] == [0, 1]
    one = rest.get(f"/topics/{topic}/partitions/1").json()
    assert (one["partition"], one["leader"], one["replicas"]) == (
        1, 0, [{"broker": 0, "leader": True, "in_sync": True}])
    offsets = rest.get(f"/topics/{topic}/partitions/1/offsets")
    assert offsets.json() == {"beginning_offset": 0, "end_offset": 2}
    assert error(rest.get(f"/topics/{topic}/partitions/7/offsets")) == (404, 40402)
    assert error(rest.get(f"/topics/{unique_topic('none')}/partitions")) == (404, 40401)
    brokers = rest.get("/brokers")
    assert (brokers.status_code, brokers.json()) == (200, {"brokers": [0]})
    assert brokers.headers["content-type"] == "application/vnd.kafka.v2+json"
    listed = rest.get("/topics")
    assert topic in listed.json()
    described = rest.get(f"/topics/{topic}").json()
    assert described["name"] == topic
    assert described["configs"]["cleanup.policy"] == "delete"
    assert [p["partition"] for p in described["partitions"]] == [0, 1]
    assert described["partitions"][0]["replicas"] == [{"broker": 0, "leader": True,
                                                       "in_sync": True}]


def _read_all(rest: httpx.Client, bases: list[str], wanted: int,
              ) -> dict[str, list[dict[str, Any]]]:
    """Records each instance returns, until ``wanted`` in all (bounded in rounds)."""
    got: dict[str, list[dict[str, Any]]] = {base: [] for base in bases}
    for _ in range(200):
        for base in bases:
            answer = rest.get(f"{base}/records", params={"timeout": 200, "max_bytes": MAX_BYTES},
                              headers={"accept": BINARY_V2})
            assert answer.status_code == 200, answer.text
            assert answer.headers["content-type"] == BINARY_V2
            records = answer.json()
            size = sum(len(base64.b64decode(r["key"])) + len(base64.b64decode(r["value"]))
                       for r in records)
            assert size <= MAX_BYTES or len(records) == 1  # the bound, at least one record
            got[base] += records
        if sum(len(v) for v in got.values()) >= wanted:
            break
    return got


def test_v2_consumer_instances_in_a_group(rest: httpx.Client, cluster: str,
                                          kafka_broker: ThreadedBroker,
                                          unique_topic: Callable[[str], str]) -> None:
    topic, group = unique_topic("v2-consume"), unique_topic("v2-group")
    kafka_broker.create_topic(topic, 4)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    produced = {}
    for i in range(2000):
        key, value = f"key-{i}".encode(), bytes([i % 256]) * (i % 50)
        producer.produce(topic, value, key, partition=i % 4)
        produced[(i % 4, i // 4)] = (key, value)
    assert producer.flush(10) == 0

    bases = []
    for name in ("one", "two"):
        created = _post(rest, f"/consumers/{group}", {
            "name": name, "format": "binary", "auto.offset.reset": "earliest",
            "auto.commit.enable": "false"})
        assert created.status_code == 200, created.text
        assert created.json()["instance_id"] == name
        base = created.json()["base_uri"].removeprefix(str(rest.base_url).rstrip("/"))
        assert base == f"/consumers/{group}/instances/{name}"
        assert _post(rest, f"{base}/subscription", {"topics": [topic]}).status_code == 204
        assert rest.get(f"{base}/subscription").json() == {"topics": [topic]}
        bases.append(base)
    try:
        got = _read_all(rest, bases, len(produced))
        # the group split the partitions: each instance read only its own, all read once
        owned = [{r["partition"] for r in records} for records in got.values()]
        assert owned[0].isdisjoint(owned[1])
        seen = {(r["partition"], r["offset"]): (base64.b64decode(r["key"]),
                                                base64.b64decode(r["value"]))
                for records in got.values() for r in records}
        assert sum(len(v) for v in got.values()) == len(seen) == len(produced)
        assert seen == produced
        for base in bases:
            assigned = rest.get(f"{base}/assignments").json()["partitions"]
            assert {p["partition"] for p in assigned} >= {r["partition"] for r in got[base]}
            assert rest.post(f"{base}/offsets", headers={"content-type": V2}).status_code == 200
        lags = rest.get(f"{cluster}/consumer-groups/{group}/lags").json()["data"]
        assert sorted((r["partition_id"], r["current_offset"], r["lag"]) for r in lags) == [
            (p, 500, 0) for p in range(4)]
        first = bases[0]
        mine = next(iter(sorted({r["partition"] for r in got[first]})))
        # an explicit commit names the last record processed; GET offsets shows the next one
        assert _post(rest, f"{first}/offsets", {"offsets": [
            {"topic": topic, "partition": mine, "offset": 41}]}).status_code == 200
        committed = rest.request("GET", f"{first}/offsets", content=json.dumps(
            {"partitions": [{"topic": topic, "partition": mine}]}),
            headers={"content-type": V2}).json()
        assert committed == {"offsets": [{"topic": topic, "partition": mine, "offset": 42,
                                          "metadata": ""}]}
        # seek back and read again
        assert _post(rest, f"{first}/positions", {"offsets": [
            {"topic": topic, "partition": mine, "offset": 498}]}).status_code == 204
        again = rest.get(f"{first}/records", params={"timeout": 2000},
                         headers={"accept": BINARY_V2}).json()
        assert [(r["partition"], r["offset"]) for r in again] == [(mine, 498), (mine, 499)]
        assert rest.get(f"{first}/records", headers={"accept": JSON_V2}).status_code == 406
        assert _post(rest, f"/consumers/{group}", {"name": "one"}).status_code == 409
    finally:
        for base in bases:
            assert rest.delete(base).status_code == 204
    missing = rest.get(f"{bases[0]}/records")
    assert (missing.status_code, missing.json()["error_code"]) == (404, 40403)
    # the members left when deleted: the group is empty at once
    assert rest.get(f"{cluster}/consumer-groups/{group}").json()["state"] == "EMPTY"


def test_idle_instances_expire(tmp_path: Path) -> None:
    broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                               "rest_proxy_listener": "http://127.0.0.1:0",
                               "consumer_instance_timeout_ms": 300}).start()
    try:
        with httpx.Client(base_url=broker.rest_proxy_url, timeout=30) as rest:
            assert _post(rest, "/consumers/g", {"name": "idle"}).status_code == 200
            path = "/consumers/g/instances/idle/subscription"
            deadline = time.monotonic() + 10
            while rest.get(path).status_code == 200:
                assert time.monotonic() < deadline, "the idle instance never expired"
                time.sleep(0.4)  # longer than the timeout: the instance stays idle
            assert rest.get(path).json()["error_code"] == 40403
    finally:
        broker.stop()


@pytest.mark.parametrize("spec", [{"format": "xml"}, {"auto.offset.reset": "sometimes"},
                                  {"fetch.min.bytes": "lots"}])
def test_bad_instance_configs(rest: httpx.Client, spec: dict[str, str]) -> None:
    answer = _post(rest, "/consumers/bad-config", spec)
    assert (answer.status_code, answer.json()["error_code"]) == (422, 42204)


def test_calls_the_instance_state_refuses(rest: httpx.Client, kafka_broker: ThreadedBroker,
                                          unique_topic: Callable[[str], str]) -> None:
    topic = kafka_broker.create_topic(unique_topic("v2-state"), 2)
    group = unique_topic("v2-state-group")
    base = f"/consumers/{group}/instances/manual"
    assert _post(rest, f"/consumers/{group}", {"name": "manual"}).status_code == 200
    try:
        assert _post(rest, f"{base}/assignments", {"partitions": [
            {"topic": topic, "partition": 0}]}).status_code == 204
        assert rest.get(f"{base}/assignments").json() == {
            "partitions": [{"topic": topic, "partition": 0}]}

        def error(response: httpx.Response) -> tuple[int, int]:
            return response.status_code, response.json()["error_code"]

        assert error(_post(rest, f"{base}/subscription", {"topics": [topic]})) == (409, 40903)
        assert error(_post(rest, f"{base}/positions", {"offsets": [
            {"topic": topic, "partition": 1, "offset": 0}]})) == (409, 40903)
        assert error(_post(rest, f"{base}/positions", {"offsets": [
            {"topic": topic, "partition": 0, "offset": -3}]})) == (422, 42201)
        assert error(_post(rest, f"{base}/positions/beginning", {"partitions": [
            {"topic": topic}]})) == (422, 42201)
    finally:
        assert rest.delete(base).status_code == 204


def test_v2_topic_pattern_subscription(rest: httpx.Client, kafka_broker: ThreadedBroker,
                                       unique_topic: Callable[[str], str]) -> None:
    """``topic_pattern`` subscribes to every topic whose whole name matches (RE2, as every
    expression a client sends); a topic that does not match stays out, a hostile expression is
    answered at once and the broker keeps serving."""
    prefix = unique_topic("v2pat")
    matching, other = f"{prefix}-orders", f"{prefix}x-orders"
    trap = f"{prefix}-" + "a" * 28  # what a backtracking engine takes 2**28 steps to refuse
    for topic in (matching, other, trap):
        kafka_broker.create_topic(topic, 1)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce(matching, b"wanted", b"k")
    producer.produce(other, b"unwanted", b"k")
    assert producer.flush(10) == 0
    group = unique_topic("v2-pattern-group")
    created = _post(rest, f"/consumers/{group}", {"name": "p", "format": "binary",
                                                  "auto.offset.reset": "earliest"})
    base = created.json()["base_uri"].removeprefix(str(rest.base_url).rstrip("/"))
    try:
        refused = _post(rest, f"{base}/subscription", {"topic_pattern": "(a"})
        assert (refused.status_code, refused.json()["error_code"]) == (422, 42201)
        both = _post(rest, f"{base}/subscription", {"topics": [matching], "topic_pattern": ".*"})
        assert both.status_code == 422
        # exponential in Python's re against the trap topic's name; linear in RE2
        started = time.monotonic()
        assert _post(rest, f"{base}/subscription",
                     {"topic_pattern": f"{prefix}-(a|a)+!"}).status_code == 204
        for _ in range(3):  # polls: the consumer matches the pattern against fresh metadata
            polled = rest.get(f"{base}/records", params={"timeout": 300},
                              headers={"accept": BINARY_V2})
            assert (polled.status_code, polled.json()) == (200, [])
        assert rest.get(f"{base}/subscription").json() == {"topics": []}
        assert time.monotonic() - started < 10
        assert _post(rest, f"{base}/subscription",
                     {"topic_pattern": f"{prefix}-or.*"}).status_code == 204
        got = _read_all(rest, [base], 1)[base]
        assert [(r["topic"], base64.b64decode(r["value"])) for r in got] == [
            (matching, b"wanted")]
        assert rest.get(f"{base}/subscription").json() == {"topics": [matching]}
    finally:
        assert rest.delete(base).status_code == 204
