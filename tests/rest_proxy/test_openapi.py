"""The proxy's OpenAPI document: served, valid, and naming exactly the operations served."""

from __future__ import annotations

import re

import httpx

from trio_broker.broker.rest_proxy.app import routes


def _served() -> set[tuple[str, str]]:
    return {(method.lower(), re.sub(r":\w+}", "}", route.path))
            for route in routes() for method in route.methods or () if method != "HEAD"}


def test_document_names_every_served_operation_and_no_other(rest: httpx.Client) -> None:
    response = rest.get("/v3/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.")
    documented = {(method, path) for path, item in document["paths"].items() for method in item}
    assert documented == _served()


def test_path_parameters_are_declared_with_their_types(rest: httpx.Client) -> None:
    document = rest.get("/v3/openapi.json").json()
    for path, item in document["paths"].items():
        for operation in item.values():
            declared = {p["name"]: p["schema"]["type"] for p in operation["parameters"]
                        if p["in"] == "path"}
            assert set(declared) == set(re.findall(r"{(\w+)}", path)), path
            for name in ("broker_id", "partition_id"):
                if name in declared:
                    assert declared[name] == "integer", path


def test_response_schemas_have_the_fields_of_confluents_reference() -> None:
    """Each resource's documented fields are the ones Confluent's v3 reference shows (the field
    sets the resource tests compare the live answers with)."""
    from tests.rest_proxy.test_acls import ACL_FIELDS
    from tests.rest_proxy.test_groups import (
        CONSUMER_FIELDS,
        GROUP_FIELDS,
        LAG_FIELDS,
        SUMMARY_FIELDS,
    )
    from tests.rest_proxy.test_resources import (
        BROKER_FIELDS,
        CLUSTER_FIELDS,
        PARTITION_FIELDS,
        REPLICA_FIELDS,
        TOPIC_CONFIG_FIELDS,
        TOPIC_FIELDS,
    )
    from trio_broker.broker.rest_proxy.openapi import document

    schemas = document()["components"]["schemas"]
    expected = {"Cluster": CLUSTER_FIELDS, "Broker": BROKER_FIELDS, "Topic": TOPIC_FIELDS,
                "Partition": PARTITION_FIELDS, "Replica": REPLICA_FIELDS,
                "Config": TOPIC_CONFIG_FIELDS - {"topic_name"}, "Acl": ACL_FIELDS,
                "ConsumerGroup": GROUP_FIELDS, "Consumer": CONSUMER_FIELDS,
                "ConsumerLag": LAG_FIELDS, "ConsumerGroupLagSummary": SUMMARY_FIELDS}
    for name, fields in expected.items():
        assert set(schemas[name]["properties"]) == fields, name
