"""v3 produce over plain HTTP, read back exactly by confluent-kafka."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from confluent_kafka import Consumer, TopicPartition

from trio_broker.testing import ThreadedBroker

RECORDS = 10_000
PARTITIONS = 4
#: a fixed CreateTime: 2021-02-05T19:14:42.123Z
TIMESTAMP_MS = 1612552482123


def _record(i: int) -> dict[str, Any]:
    """Record ``i``: every fourth one of each kind of key and value, some with partitions."""
    record: dict[str, Any] = {}
    kind = i % 4
    if kind == 0:
        record["value"] = {"type": "JSON", "data": {"n": i, "tags": ["a", "é"]}}
    elif kind == 1:
        record["value"] = {"type": "BINARY",
                           "data": base64.b64encode(bytes([i % 256, 0, 255])).decode()}
    elif kind == 2:
        record["value"] = {"type": "STRING", "data": f"value {i}"}
    if i % 3 == 0:
        record["key"] = {"type": "STRING", "data": f"key-{i}"}
    elif i % 3 == 1:
        record["key"] = {"type": "BINARY", "data": base64.b64encode(f"k{i}".encode()).decode()}
    if i % 5 == 0:
        record["headers"] = [{"name": "n", "value": base64.b64encode(str(i).encode()).decode()},
                             {"name": "empty", "value": None}]
    if i % 7 == 0:
        record["partition_id"] = i % PARTITIONS
    if i % 11 == 0:
        record["timestamp"] = "2021-02-05T19:14:42.123Z"
    return record


def _expected(i: int) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
    record = _record(i)
    value = record.get("value")
    data: bytes | None = None
    if value is not None:
        if value["type"] == "JSON":
            data = json.dumps(value["data"], separators=(",", ":"),
                              ensure_ascii=False).encode()
        elif value["type"] == "BINARY":
            data = base64.b64decode(value["data"])
        else:
            data = value["data"].encode()
    key = record.get("key")
    key_bytes = None
    if key is not None:
        key_bytes = (key["data"].encode() if key["type"] == "STRING"
                     else base64.b64decode(key["data"]))
    headers = [(h["name"], None if h["value"] is None else base64.b64decode(h["value"]))
               for h in record.get("headers", ())]
    return key_bytes, data, headers


def _reports(text: str) -> list[dict[str, Any]]:
    """Concatenated JSON, each value followed by CRLF as Confluent writes them."""
    assert text.endswith("\r\n")
    return [json.loads(line) for line in text.split("\r\n")[:-1]]


def _read_back(bootstrap: str, topic: str, count: int) -> dict[tuple[int, int], Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-check",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        found: dict[tuple[int, int], Any] = {}
        for _ in range(200):
            for message in consumer.consume(1000, timeout=1):
                assert message.error() is None, message.error()
                found[(message.partition(), message.offset())] = message
            if len(found) >= count:
                break
        return found
    finally:
        consumer.close()


def _create(rest: httpx.Client, cluster: str, name: str) -> None:
    response = rest.post(f"{cluster}/topics", json={"topic_name": name,
                                                    "partitions_count": PARTITIONS})
    assert response.status_code == 201, response.text


def _check(reports: list[dict[str, Any]], broker: ThreadedBroker, topic: str) -> None:
    assert len(reports) == RECORDS
    assert all(r["error_code"] == 200 for r in reports), reports[:3]
    messages = _read_back(broker.bootstrap_servers, topic, RECORDS)
    assert len(messages) == RECORDS
    for i, report in enumerate(reports):
        assert report["topic_name"] == topic
        if i % 7 == 0:
            assert report["partition_id"] == i % PARTITIONS
        message = messages[(report["partition_id"], report["offset"])]
        key, value, headers = _expected(i)
        assert (message.key(), message.value(), message.headers() or []) == (
            key, value, headers), i
        if i % 11 == 0:
            assert message.timestamp()[1] == TIMESTAMP_MS
            assert report["timestamp"] == "2021-02-05T19:14:42.123Z"
        if value is not None:
            assert report["value"] == {"type": _record(i)["value"]["type"], "size": len(value)}


def test_ten_thousand_records_in_one_body(rest: httpx.Client, cluster: str,
                                          kafka_broker: ThreadedBroker,
                                          unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("rest-produce")
    _create(rest, cluster, topic)
    body = "".join(json.dumps(_record(i)) for i in range(RECORDS)).encode()
    response = rest.post(f"{cluster}/topics/{topic}/records", content=body,
                         headers={"content-type": "application/json"})
    assert response.status_code == 200
    _check(_reports(response.text), kafka_broker, topic)


def test_ten_thousand_records_streamed(rest: httpx.Client, cluster: str,
                                       kafka_broker: ThreadedBroker,
                                       unique_topic: Callable[[str], str]) -> None:
    """A chunked body: records cut across chunks at arbitrary bytes, answered in order."""
    topic = unique_topic("rest-stream")
    _create(rest, cluster, topic)
    text = "\n".join(json.dumps(_record(i), ensure_ascii=False)
                     for i in range(RECORDS)).encode()

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(text), 7777):
            yield text[start:start + 7777]

    response = rest.post(f"{cluster}/topics/{topic}/records", content=chunks(),
                         headers={"content-type": "application/json"})
    assert response.status_code == 200
    assert "content-length" not in response.headers  # a stream answered as one
    _check(_reports(response.text), kafka_broker, topic)


def test_record_errors(rest: httpx.Client, cluster: str,
                       unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("rest-errors")
    _create(rest, cluster, topic)
    url = f"{cluster}/topics/{topic}/records"
    # one record, not streamed: its error is the answer's status
    bad_partition = rest.post(url, json={"partition_id": 9, "value": {"data": 1}})
    assert bad_partition.status_code == 404
    assert bad_partition.json()["error_code"] == 404
    for record in ({"value": {"type": "BINARY", "data": "not base64!"}},
                   {"value": {"type": "AVRO", "data": {}}},
                   {"value": {"schema_id": 1, "data": {}}},
                   {"timestamp": "yesterday"}, [1, 2]):
        answer = rest.post(url, json=record)
        assert (answer.status_code, answer.json()["error_code"]) == (400, 400), record
    # in a batch, each record is answered on its own, in order
    body = (json.dumps({"value": {"data": 1}}) + json.dumps({"partition_id": 9})
            + json.dumps({"value": {"type": "STRING", "data": "x"}}) + '{"value": oops}')
    response = rest.post(url, content=body.encode(),
                         headers={"content-type": "application/json"})
    assert response.status_code == 200
    assert [r["error_code"] for r in _reports(response.text)] == [200, 404, 200, 400]
    assert rest.post(url, content=b"", headers={"content-type": "application/json"}
                     ).status_code == 400
    missing = rest.post(f"{cluster}/topics/{unique_topic('absent')}/records",
                        json={"value": {"data": 1}})
    assert (missing.status_code, missing.json()["error_code"]) == (404, 40403)


def test_records_batch(rest: httpx.Client, cluster: str, kafka_broker: ThreadedBroker,
                       unique_topic: Any) -> None:
    """``records:batch``: each entry answered under its id, in ``successes`` or ``failures``,
    with 207; a bad batch as a whole is 400."""
    topic = unique_topic("rest-batch")
    _create(rest, cluster, topic)
    url = f"{cluster}/topics/{topic}/records:batch"
    answer = rest.post(url, json={"entries": [
        {"id": "a", "partition_id": 0, "value": {"type": "STRING", "data": "one"}},
        {"id": "b", "partition_id": 99, "value": {"type": "STRING", "data": "two"}},
        {"id": "c", "key": {"type": "STRING", "data": "k"}, "value": {"data": {"n": 3}}}]})
    assert answer.status_code == 207
    body = answer.json()
    assert [s["id"] for s in body["successes"]] == ["a", "c"]
    assert body["successes"][0]["partition_id"] == 0
    assert body["successes"][0]["value"] == {"type": "STRING", "size": 3}
    assert body["failures"] == [{"id": "b", "error_code": 404,
                                 "message": "This server does not host this topic-partition."}]
    for bad in ({"entries": []}, {"entries": [{"id": "x"}, {"id": "x"}]},
                {"entries": [{"id": str(i)} for i in range(11)]}, {"entries": [{}]}):
        refused = rest.post(url, json=bad)
        assert (refused.status_code, refused.json()["error_code"]) == (400, 400), bad
    stored = _read_back(kafka_broker.bootstrap_servers, topic, 2)
    assert sorted(m.value() for m in stored.values()) == [b"one", b'{"n":3}']
