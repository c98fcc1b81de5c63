"""v3 ACL routes: ``GET``, ``POST`` and ``DELETE /v3/clusters/{cluster_id}/acls``.

Kafka's DescribeAcls, CreateAcls and DeleteAcls with Confluent's names for the fields
(``resource_type``, ``resource_name``, ``pattern_type``, ``principal``, ``host``, ``operation``,
``permission``) and Kafka's enum names for their values (``TOPIC``, ``PREFIXED``, ``READ``,
``ALLOW``). A search's omitted fields match anything; a delete must name the resource type, so
a bare ``DELETE`` never removes every ACL. A broker without an authorizer answers
``SECURITY_DISABLED``: Confluent's 40002.
"""

from __future__ import annotations

import enum
from typing import Any, TypeVar
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...client.core.errors import describe_code, error_for
from ...protocol.api_keys import ApiKey, request_class
from ...protocol.messages import make_request
from ..security.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from . import shapes
from .cluster_routes import CLUSTER
from .errors import bad_request
from .proxy import RestProxy, proxy_of, read_json
from .shapes import Json, Urls

E = TypeVar("E", bound=enum.IntEnum)
FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation",
          "permission")


def _proxy(request: Request) -> RestProxy:
    return proxy_of(request)


def _enum(kind: type[E], field: str, value: Any, default: E | None = None) -> E:
    if value is None:
        if default is None:
            raise bad_request(f"{field} is required")
        return default
    try:
        return kind[str(value).upper()]
    except KeyError:
        raise bad_request(f"{field}: unknown value {value!r}; one of "
                          + ", ".join(m.name for m in kind)) from None


def acl_shape(urls: Urls, acl: AclBinding) -> Json:
    fields = {"resource_type": acl.resource_type.name, "resource_name": acl.name,
              "pattern_type": acl.pattern_type.name, "principal": acl.principal,
              "host": acl.host, "operation": acl.operation.name,
              "permission": acl.permission.name}
    return {"kind": "KafkaAcl",
            "metadata": {"self": f"{urls.cluster}/acls?{urlencode(fields)}"},
            "cluster_id": urls.cluster_id, **fields}


def _filter(params: Any, *, delete: bool) -> AclFilter:
    any_type = None if delete else ResourceType.ANY
    return AclFilter(
        _enum(ResourceType, "resource_type", params.get("resource_type"), any_type),
        params.get("resource_name"),
        _enum(PatternType, "pattern_type", params.get("pattern_type"), PatternType.ANY),
        params.get("principal"), params.get("host"),
        _enum(Operation, "operation", params.get("operation"), Operation.ANY),
        _enum(Permission, "permission", params.get("permission"), Permission.ANY))


def _filter_fields(f: AclFilter) -> dict[str, Any]:
    return {"resource_type_filter": int(f.resource_type), "resource_name_filter": f.name,
            "pattern_type_filter": int(f.pattern_type), "principal_filter": f.principal,
            "host_filter": f.host, "operation": int(f.operation),
            "permission_type": int(f.permission)}


def _raise(code: int, message: str | None) -> None:
    if code:
        raise error_for(code, f"ACLs: {describe_code(code)}: {message or describe_code(code)}")


async def search_acls(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    wanted = _filter(request.query_params, delete=False)
    await proxy.ready()
    answer = await proxy.admin.client.request_any(ApiKey.DescribeAcls, lambda v: make_request(
        ApiKey.DescribeAcls, v, **_filter_fields(wanted)))
    _raise(answer.error_code, answer.error_message)
    data = [acl_shape(urls, AclBinding(
        ResourceType(r.resource_type), r.resource_name, PatternType(r.pattern_type),
        a.principal, a.host, Operation(a.operation), Permission(a.permission_type)))
        for r in answer.resources for a in r.acls]
    query = f"?{request.url.query}" if request.url.query else ""
    return JSONResponse(shapes.listing("KafkaAclList", f"{urls.cluster}/acls{query}", data))


def _creation(body: Any) -> Any:
    """One ACL of a create request, as CreateAcls' ``AclCreation``."""
    if not isinstance(body, dict):
        raise bad_request("Request body must be a JSON object")
    for field in ("resource_name", "principal", "host"):
        if not isinstance(body.get(field), str):
            raise bad_request(f"{field} is required")
    return request_class(ApiKey.CreateAcls).AclCreation(
        resource_type=int(_enum(ResourceType, "resource_type", body.get("resource_type"))),
        resource_name=body["resource_name"],
        resource_pattern_type=int(_enum(PatternType, "pattern_type", body.get("pattern_type"))),
        principal=body["principal"], host=body["host"],
        operation=int(_enum(Operation, "operation", body.get("operation"))),
        permission_type=int(_enum(Permission, "permission", body.get("permission"))))


async def _create(request: Request, creations: list[Any]) -> Response:
    """One CreateAcls request for every ACL; the first refusal is the answer."""
    proxy = _proxy(request)
    await proxy.ready()
    answer = await proxy.admin.client.request_any(ApiKey.CreateAcls, lambda v: make_request(
        ApiKey.CreateAcls, v, creations=creations))
    for result in answer.results:
        _raise(result.error_code, result.error_message)
    return Response(status_code=201)


async def create_acl(request: Request) -> Response:
    _proxy(request).urls(request)
    return await _create(request, [_creation(await read_json(request))])


async def create_acls_batch(request: Request) -> Response:
    """``POST .../acls:batch`` with ``{"data": [acl, ...]}``: Confluent's batch create."""
    _proxy(request).urls(request)
    body = await read_json(request)
    if not isinstance(body, dict) or not isinstance(body.get("data"), list) or not body["data"]:
        raise bad_request("Request body must be {\"data\": [acl, ...]}")
    return await _create(request, [_creation(item) for item in body["data"]])


async def delete_acls(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    wanted = _filter(request.query_params, delete=True)
    cls = request_class(ApiKey.DeleteAcls).DeleteAclsFilter
    await proxy.ready()
    answer = await proxy.admin.client.request_any(ApiKey.DeleteAcls, lambda v: make_request(
        ApiKey.DeleteAcls, v, filters=[cls(**_filter_fields(wanted))]))
    data = []
    for result in answer.filter_results:
        _raise(result.error_code, result.error_message)
        data += [acl_shape(urls, AclBinding(
            ResourceType(m.resource_type), m.resource_name, PatternType(m.pattern_type),
            m.principal, m.host, Operation(m.operation), Permission(m.permission_type)))
            for m in result.matching_acls]
    return JSONResponse({"data": data})


def routes() -> list[Route]:
    return [Route(CLUSTER + "/acls", search_acls, methods=["GET"]),
            Route(CLUSTER + "/acls", create_acl, methods=["POST"]),
            Route(CLUSTER + "/acls:batch", create_acls_batch, methods=["POST"]),
            Route(CLUSTER + "/acls", delete_acls, methods=["DELETE"])]
