"""Garbage in, Confluent's errors out: random JSON bodies sent to the REST proxy's writes (v3
and v2, consumer instances included) never get a 5xx, and every refusal is a
``{"error_code", "message"}`` body."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

LEAF = (st.none() | st.booleans() | st.integers(-3, 5) | st.integers(-2**40, 2**40)
        | st.text(max_size=12) | st.sampled_from([
            "TOPIC", "GROUP", "JSON", "BINARY", "STRING", "SET", "DELETE", "APPEND", "AVRO",
            "ALLOW", "READ", "LITERAL", "User:alice", "*", "fuzz", "cleanup.policy", "delete",
            "AAEC", "2021-02-05T19:14:42Z"]))
#: any JSON at all
JSON = st.recursive(LEAF, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
#: a field's value: mostly plausible, sometimes anything
VALUE = LEAF | JSON
NAME = st.text("abcdefghij-._", min_size=1, max_size=10)
DATA = st.fixed_dictionaries({}, optional={"type": VALUE, "data": VALUE, "schema_id": VALUE})
SHAPES = {
    "topics": st.fixed_dictionaries({"topic_name": NAME | VALUE}, optional={
        "partitions_count": VALUE, "replication_factor": VALUE, "validate_only": VALUE,
        "configs": st.lists(st.fixed_dictionaries({"name": VALUE, "value": VALUE}),
                            max_size=3) | VALUE}),
    "config": st.fixed_dictionaries({"value": VALUE}),
    "alter": st.fixed_dictionaries({"data": st.lists(st.fixed_dictionaries(
        {"name": st.sampled_from(["retention.ms", "cleanup.policy", "nope"]) | VALUE},
        optional={"value": VALUE, "operation": VALUE}), max_size=3) | VALUE},
        optional={"validate_only": VALUE}),
    "records": st.fixed_dictionaries({}, optional={
        "partition_id": VALUE, "key": DATA | VALUE, "value": DATA | VALUE,
        "timestamp": VALUE, "headers": st.lists(st.fixed_dictionaries(
            {}, optional={"name": VALUE, "value": VALUE}), max_size=2) | VALUE}),
    "acls": st.fixed_dictionaries({k: VALUE for k in (
        "resource_type", "resource_name", "pattern_type", "principal", "host", "operation",
        "permission")}),
    "v2": st.fixed_dictionaries({"records": st.lists(st.fixed_dictionaries({}, optional={
        "key": VALUE, "value": VALUE, "partition": VALUE}), max_size=3) | VALUE}),
    "instance": st.fixed_dictionaries({}, optional={
        "name": NAME | VALUE, "format": st.sampled_from(["json", "binary"]) | VALUE,
        "auto.offset.reset": st.sampled_from(["earliest", "latest"]) | VALUE,
        "auto.commit.enable": VALUE, "fetch.min.bytes": VALUE,
        "consumer.request.timeout.ms": VALUE}),
    "subscription": st.fixed_dictionaries({}, optional={
        "topics": st.lists(st.sampled_from(["fuzz"]) | VALUE, max_size=2) | VALUE,
        "topic_pattern": VALUE}),
    "partitions": st.fixed_dictionaries({"partitions": st.lists(st.fixed_dictionaries(
        {}, optional={"topic": st.just("fuzz") | VALUE, "partition": VALUE}), max_size=2)
        | VALUE}),
    "offsets": st.fixed_dictionaries({"offsets": st.lists(st.fixed_dictionaries(
        {}, optional={"topic": st.just("fuzz") | VALUE, "partition": VALUE,
                      "offset": VALUE}), max_size=2) | VALUE}),
}
INSTANCE = "/consumers/fuzz-group/instances/fuzz-instance"
V2 = "application/vnd.kafka.v2+json"
TARGETS = [
    ("POST", "{c}/topics", "application/json", "topics"),
    ("PUT", "{c}/topics/fuzz/configs/retention.ms", "application/json", "config"),
    ("POST", "{c}/topics/fuzz/configs:alter", "application/json", "alter"),
    ("POST", "{c}/topics/fuzz/records", "application/json", "records"),
    ("POST", "{c}/acls", "application/json", "acls"),
    ("POST", "/topics/fuzz", "application/vnd.kafka.json.v2+json", "v2"),
    ("POST", "/topics/fuzz", "application/vnd.kafka.binary.v2+json", "v2"),
    ("POST", "/consumers/fuzz-group", V2, "instance"),
    ("POST", INSTANCE + "/subscription", V2, "subscription"),
    ("POST", INSTANCE + "/assignments", V2, "partitions"),
    ("POST", INSTANCE + "/positions", V2, "offsets"),
    ("POST", INSTANCE + "/positions/end", V2, "partitions"),
    ("POST", INSTANCE + "/offsets", V2, "offsets"),
    ("GET", INSTANCE + "/offsets", V2, "partitions"),
]


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, str]]:
    data: Path = tmp_path_factory.mktemp("rest-fuzz")
    broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(data),
                               "rest_proxy_listener": "http://127.0.0.1:0"}).start()
    try:
        with httpx.Client(base_url=broker.rest_proxy_url, timeout=30) as rest:
            cluster = f"/v3/clusters/{rest.get('/v3/clusters').json()['data'][0]['cluster_id']}"
            assert rest.post(f"{cluster}/topics", json={"topic_name": "fuzz",
                                                        "partitions_count": 2}).status_code == 201
            assert rest.post("/consumers/fuzz-group", content=b'{"name": "fuzz-instance"}',
                             headers={"content-type": V2}).status_code == 200
            yield rest, cluster
    finally:
        broker.stop()


@pytest.mark.parametrize("target", TARGETS, ids=[f"{t[0]} {t[1]} {t[3]}" for t in TARGETS])
@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_bodies(fuzzed: tuple[httpx.Client, str], data: st.DataObject,
                       target: tuple[str, str, str, str]) -> None:
    rest, cluster = fuzzed
    method, path, media, shape = target
    body = data.draw(SHAPES[shape] | JSON if data.draw(st.integers(0, 3)) == 0
                     else SHAPES[shape])
    answer = rest.request(method, path.format(c=cluster), content=json.dumps(body),
                          headers={"content-type": media})
    assert answer.status_code < 500, (answer.status_code, answer.text)
    if answer.status_code >= 400:
        error = answer.json()
        assert set(error) == {"error_code", "message"}, error
        assert isinstance(error["error_code"], int)
        assert error["message"]
