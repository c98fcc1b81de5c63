"""The proxy's OpenAPI 3 document, served at ``/v3/openapi.json``: the operations this proxy
serves, under Confluent's paths and parameter names, with their bodies, query parameters,
success statuses and answers (``openapi_schemas.py``) and Confluent's error body.

Why a table of its own rather than one read off the routes: the document is a promise to
clients, and a test compares it with the routes, so a route added without being documented (or
documented without being served) fails the suite.
"""

from __future__ import annotations

import re
from typing import Any

from .openapi_schemas import BODIES, COMPONENTS, QUERIES, response

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
    ('POST', '/v3/clusters/{cluster_id}/acls:batch'),
    ('POST', '/v3/clusters/{cluster_id}/topics/{topic_name}/records'),
    ('POST', '/v3/clusters/{cluster_id}/topics/{topic_name}/records:batch'),
    ('GET', '/brokers'),
    ('GET', '/topics'),
    ('GET', '/topics/{topic_name}'),
    ('POST', '/topics/{topic_name}'),
    ('POST', '/topics/{topic_name}/partitions/{partition_id}'),
    ('GET', '/topics/{topic_name}/partitions'),
    ('GET', '/topics/{topic_name}/partitions/{partition_id}'),
    ('GET', '/topics/{topic_name}/partitions/{partition_id}/offsets'),
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
    parameters += [{"name": name, "in": "query", "required": schema.get("x-required", False),
                    "schema": {k: v for k, v in schema.items() if k != "x-required"}}
                   for name, schema in QUERIES.get((method, path), {}).items()]
    status, media_types, body = response(method, path)
    success: dict[str, Any] = {"description": "Success"}
    if body is not None:
        success["content"] = {media: {"schema": body} for media in media_types}
    responses: dict[str, Any] = {str(status): success, "default": {
        "description": "Error", "content": {"application/json": {"schema": {
            "$ref": "#/components/schemas/Error"}}}}}
    operation: dict[str, Any] = {"tags": [_tag(path)], "parameters": parameters,
                                 "responses": responses}
    request = BODIES.get((method, path))
    if request is not None:
        media_types, schema = request
        operation["requestBody"] = {"required": False, "content": {
            media: {"schema": schema} for media in media_types}}
    return operation


def document() -> dict[str, Any]:
    """The OpenAPI 3.0 document of the operations in ``OPERATIONS``."""
    paths: dict[str, dict[str, Any]] = {}
    for method, path in OPERATIONS:
        paths.setdefault(path, {})[method.lower()] = _operation(method, path)
    return {"openapi": "3.0.3",
            "info": {"title": "REST Admin API", "version": "3.0.0"},
            "paths": paths,
            "components": {"schemas": COMPONENTS}}
