"""A raw connection logged in as one of the test users (SCRAM), and ACL request helpers."""

from __future__ import annotations

from typing import Any

import trio

from tests.authz.conftest import MECHANISM
from tests.security_files import password
from tests.wire import RawClient
from trio_broker.client.core.sasl import ScramClient
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.testing import ThreadedBroker


async def login(broker: ThreadedBroker, user: str) -> RawClient:
    assert broker.broker is not None
    client = RawClient(await trio.open_tcp_stream(broker.broker.host, broker.broker.port),
                       client_id=f"{user}-raw")
    hs = await client.request(ApiKey.SaslHandshake, 1, mechanism=MECHANISM)
    assert hs.error_code == 0, hs
    scram = ScramClient(MECHANISM, user, password(user))
    first = await client.request(ApiKey.SaslAuthenticate, 2, auth_bytes=scram.first_message())
    assert first.error_code == 0, first
    final = await client.request(ApiKey.SaslAuthenticate, 2,
                                 auth_bytes=scram.final_message(first.auth_bytes))
    assert final.error_code == 0, final
    return client


def creation(version: int, resource_type: int, name: str, principal: str, operation: int,
             permission: int = 3, pattern: int = 3, host: str = "*") -> Any:
    cls = request_class(ApiKey.CreateAcls).AclCreation
    fields = {"resource_type": resource_type, "resource_name": name, "principal": principal,
              "host": host, "operation": operation, "permission_type": permission}
    if version >= 1:
        fields["resource_pattern_type"] = pattern
    return cls(**fields)


def any_filter(version: int, **override: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {"resource_type_filter": 1, "resource_name_filter": None,
                              "principal_filter": None, "host_filter": None, "operation": 1,
                              "permission_type": 1}
    if version >= 1:
        fields["pattern_type_filter"] = 1
    return {**fields, **override}


async def describe_all(client: RawClient, version: int = 3) -> list[tuple[Any, ...]]:
    """Every ACL as (type, name, pattern, principal, host, operation, permission)."""
    answer = await client.request(ApiKey.DescribeAcls, version, **any_filter(version))
    assert answer.error_code == 0, answer
    return sorted((r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host,
                   a.operation, a.permission_type)
                  for r in answer.resources for a in r.acls)
