"""The proxy's OpenAPI 3 document, served at ``/v3/openapi.json``: the operations this proxy
serves, under Confluent's paths and parameter names, with Confluent's error body.

Why a table of its own rather than one read off the routes: the document is a promise to
clients, and a test compares it with the routes, so a route added without being documented (or
documented without being served) fails the suite.
"""

from __future__ import annotations

import re
from typing import Any

#: (method, path): every operation served, as Confluent's spec names its paths
OPERATIONS: tuple[tuple[str, str], ...] = (
    ('GET', '/v3/clusters'),
    ('GET', '/v3/clusters/{cluster_id}'),
    ('GET', '/v3/clusters/{cluster_id}/brokers'),
    ('GET', '/v3/clusters/{cluster_id}/brokers/{broker_id}'),
    ('GET', '/v3/clusters/{cluster_id}/topics'),
    ('POST', '/v3/clusters/{cluster_id}/topics'),
    ('GET', '/v3/clusters/{cluster_id}/topics/{topic_name}'),
    ('DELETE', '/v3/clusters/{cluster_id}/topics/{topic_name}'),
    ('GET', '/v3/clusters/{cluster_id}/topics/{topic_name}/partitions'),
    ('GET', '/v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}'),
    ('GET', '/v3/clusters/{cluster_id}/topics/{topic_name}/configs'),
    ('POST', '/v3/clusters/{cluster_id}/topics/{topic_name}/configs:alter'),
    ('GET', '/v3/clusters/{cluster_id}/topics/{topic_name}/configs/{name}'),
    ('PUT', '/v3/clusters/{cluster_id}/topics/{topic_name}/configs/{name}'),
    ('DELETE', '/v3/clusters/{cluster_id}/topics/{topic_name}/configs/{name}'),
    ('GET', '/v3/clusters/{cluster_id}/brokers/{broker_id}/configs'),
    ('POST', '/v3/clusters/{cluster_id}/brokers/{broker_id}/configs:alter'),
    ('GET', '/v3/clusters/{cluster_id}/brokers/{broker_id}/configs/{name}'),
    ('PUT', '/v3/clusters/{cluster_id}/brokers/{broker_id}/configs/{name}'),
    ('DELETE', '/v3/clusters/{cluster_id}/brokers/{broker_id}/configs/{name}'),
    ('GET', '/v3/clusters/{cluster_id}/broker-configs'),
    ('POST', '/v3/clusters/{cluster_id}/broker-configs:alter'),
    ('GET', '/v3/clusters/{cluster_id}/broker-configs/{name}'),
    ('PUT', '/v3/clusters/{cluster_id}/broker-configs/{name}'),
    ('DELETE', '/v3/clusters/{cluster_id}/broker-configs/{name}'),
    ('GET', '/v3/clusters/{cluster_id}/topics/{topic_name}/partitions/-/reassignment'),
    ('GET', '/v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/reassignment'),
    ('GET', '/v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/replicas'),
    ('GET',
     '/v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/replicas/{broker_id}'),
    ('GET', '/v3/clusters/{cluster_id}/brokers/{broker_id}/partition-replicas'),
    ('GET', '/v3/clusters/{cluster_id}/consumer-groups'),
    ('GET', '/v3/clusters/{cluster_id}/consumer-groups/{group_id}'),
    ('GET', '/v3/clusters/{cluster_id}/consumer-groups/{group_id}/consumers'),
    ('GET', '/v3/clusters/{cluster_id}/consumer-groups/{group_id}/consumers/{consumer_id}'),
    ('GET',
     '/v3/clusters/{cluster_id}/consumer-groups/{group_id}/consumers/{consumer_id}/assignments'),
    ('GET', '/v3/clusters/{cluster_id}/consumer-groups/{group_id}/lags'),
    ('GET',
     '/v3/clusters/{cluster_id}/consumer-groups/{group_id}/lags/{topic_name}/partitions/{partition_id}'),
    ('GET', '/v3/clusters/{cluster_id}/consumer-groups/{group_id}/lag-summary'),
    ('GET', '/v3/clusters/{cluster_id}/acls'),
    ('POST', '/v3/clusters/{cluster_id}/acls'),
    ('DELETE', '/v3/clusters/{cluster_id}/acls'),
    ('POST', '/v3/clusters/{cluster_id}/topics/{topic_name}/records'),
    ('GET', '/brokers'),
    ('GET', '/topics'),
    ('GET', '/topics/{topic_name}'),
    ('POST', '/topics/{topic_name}'),
    ('POST', '/topics/{topic_name}/partitions/{partition_id}'),
    ('POST', '/consumers/{group}'),
    ('DELETE', '/consumers/{group}/instances/{name}'),
    ('POST', '/consumers/{group}/instances/{name}/subscription'),
    ('GET', '/consumers/{group}/instances/{name}/subscription'),
    ('DELETE', '/consumers/{group}/instances/{name}/subscription'),
    ('POST', '/consumers/{group}/instances/{name}/assignments'),
    ('GET', '/consumers/{group}/instances/{name}/assignments'),
    ('POST', '/consumers/{group}/instances/{name}/positions'),
    ('POST', '/consumers/{group}/instances/{name}/positions/beginning'),
    ('POST', '/consumers/{group}/instances/{name}/positions/end'),
    ('POST', '/consumers/{group}/instances/{name}/offsets'),
    ('GET', '/consumers/{group}/instances/{name}/offsets'),
    ('GET', '/consumers/{group}/instances/{name}/records'),
)

#: path parameters that are integers in Confluent's spec
INTEGER_PARAMETERS = frozenset({"broker_id", "partition_id"})

_ERROR = {
    "type": "object",
    "required": ["error_code", "message"],
    "properties": {"error_code": {"type": "integer"},
                   "message": {"type": "string", "nullable": True}},
}


def _tag(path: str) -> str:
    if path.startswith("/consumers"):
        return "Consumer (v2)"
    if path.startswith("/topics"):
        return "Topic (v2)"
    parts = [p for p in path.split("/") if p and not p.startswith("{")]
    return parts[-1].split(":")[0] if len(parts) > 2 else "Cluster (v3)"


def _operation(method: str, path: str) -> dict[str, Any]:
    names = re.findall(r"{(\w+)}", path)
    parameters = [{"name": name, "in": "path", "required": True,
                   "schema": {"type": "integer" if name in INTEGER_PARAMETERS else "string"}}
                  for name in names]
    # the success codes differ by operation (200, 201, 204, as Confluent's): one range for all
    responses: dict[str, Any] = {"2XX": {"description": "Success"}}
    responses["default"] = {"description": "Error",
                            "content": {"application/json": {"schema": {"$ref":
                                        "#/components/schemas/Error"}}}}
    operation: dict[str, Any] = {"tags": [_tag(path)], "parameters": parameters,
                                 "responses": responses}
    if method in ("POST", "PUT"):
        operation["requestBody"] = {"required": False, "content": {
            "application/json": {"schema": {"type": "object"}}}}
    return operation


def document() -> dict[str, Any]:
    """The OpenAPI 3.0 document of the operations in ``OPERATIONS``."""
    paths: dict[str, dict[str, Any]] = {}
    for method, path in OPERATIONS:
        paths.setdefault(path, {})[method.lower()] = _operation(method, path)
    return {"openapi": "3.0.3",
            "info": {"title": "REST Admin API", "version": "3.0.0"},
            "paths": paths,
            "components": {"schemas": {"Error": _ERROR}}}
