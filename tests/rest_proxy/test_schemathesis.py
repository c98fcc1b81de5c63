"""Property-based testing of the REST proxy against its own OpenAPI document (schemathesis):
every documented operation, called with generated paths, queries and bodies (valid and
invalid), answers without a server error, with a status, content type, ``Allow`` header and
body the document allows, and refuses bodies the document says are invalid. Runs against a
broker of its own (it deletes and alters what it finds).

One check is left out: ``positive_data_acceptance`` (a body the schema allows must succeed).
Whether a request can succeed depends on the cluster, not on its shape: a config name Kafka
does not know, ACLs without an authorizer, a topic name Kafka refuses, a schema format without
the Schema Registry are refused with Confluent's errors, as they must be."""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from trio_broker.broker.rest_proxy.openapi import document
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

SCHEMA = schemathesis.openapi.from_dict(document())


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(the proxy's base URL, its cluster id) of a broker with a topic and a group."""
    broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path_factory.mktemp("st")),
                               "rest_proxy_listener": "http://127.0.0.1:0"}).start()
    try:
        broker.create_topic("orders", 2)
        url = broker.rest_proxy_url
        cluster_id = httpx.get(f"{url}/v3/clusters").json()["data"][0]["cluster_id"]
        yield url, cluster_id
    finally:
        broker.stop()


@SCHEMA.parametrize()
@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_no_server_error_and_the_document_holds(case: schemathesis.Case,
                                                proxy: tuple[str, str]) -> None:
    url, cluster_id = proxy
    # half the cases name the real cluster (and topic), so calls reach past the 404
    parameters = case.path_parameters or {}
    # chosen from the case itself (not its random id), so a derandomized run is the same run
    if "cluster_id" in parameters and zlib.crc32(repr(
            (case.method, case.path, parameters, case.query, case.body)).encode()) % 2:
        parameters["cluster_id"] = cluster_id
        if "topic_name" in parameters:
            parameters["topic_name"] = "orders"
    case.call_and_validate(base_url=url, timeout=30,
                           excluded_checks=[positive_data_acceptance])


def test_what_the_property_run_found(proxy: tuple[str, str]) -> None:
    """Inputs the property run once answered with a bare 500: an integer beyond Kafka's field
    width, and an unpaired UTF-16 surrogate (JSON may escape one; no Kafka string holds it)."""
    url, cluster_id = proxy
    topics = f"{url}/v3/clusters/{cluster_id}/topics"
    for body, message in (
            ('{"topic_name": "t", "partitions_count": 15758332980283123712}',
             "partitions_count 15758332980283123712 is out of range (at most 2147483647)"),
            ('{"topic_name": "t", "replication_factor": 40000}',
             "replication_factor 40000 is out of range (at most 32767)"),
            ('{"topic_name": "\\udafb"}',
             "Unexpected request body: a string holds an unpaired UTF-16 surrogate")):
        answer = httpx.post(topics, content=body, headers={"Content-Type": "application/json"})
        assert (answer.status_code, answer.json()["message"]) == (400, message)
    # a topic of its own: the property run deletes the ones it finds
    assert httpx.post(topics, json={"topic_name": "surrogates"}).status_code == 201
    produced = httpx.post(f"{topics}/surrogates/records",
                          content='{"value": {"data": "\\udafb"}}',
                          headers={"Content-Type": "application/json"})
    assert produced.json()["message"] == "a string holds an unpaired UTF-16 surrogate"
