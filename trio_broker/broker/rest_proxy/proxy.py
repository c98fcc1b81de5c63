"""What the REST proxy's routes share: its Kafka client, the cluster it serves, and the reads
and writes more than one route makes.

Why through the Kafka protocol: like the web console, the proxy is one more client of its own
broker (``broker.http.reads.KafkaView`` is the console's read path, reused), so a topic created
over HTTP passes CreateTopics' checks, a config change IncrementalAlterConfigs', and a later
authorizer sees the proxy's principal like any client's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request

from ...client.core.admin import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ConfigEntry,
    ConfigOperation,
    incremental_alter_configs_request,
    parse_incremental_alter_configs,
)
from ...client.core.errors import describe_code, error_for
from ...client.core.metadata import TopicInfo
from ...client.trio.admin import Admin
from ...protocol.api_keys import ApiKey, request_class
from ...protocol.messages import make_request
from ..http.reads import KafkaView
from .errors import RestError, bad_request, not_found
from .instances import Instances
from .schema_records import RecordSchemas
from .shapes import Urls

_DESCRIBE: Any = request_class(ApiKey.DescribeConfigs)

#: one config as DescribeConfigs (with synonyms) describes it
Described = tuple[ConfigEntry, list[tuple[str, str | None, int]]]
#: a request body larger than this is refused before it is read whole (Confluent's produce
#: bodies are bounded the same way: the HTTP server refuses what it will not buffer)
MAX_BODY_BYTES = 8 << 20


def proxy_of(request: Request) -> RestProxy:
    """The proxy answering ``request``: the shared one, or the logged-in user's (``auth``)."""
    proxy: RestProxy = request.scope["state"]["rest_proxy"]
    return proxy


class RestProxy:
    """The proxy's Kafka client and the cluster it answers for."""

    def __init__(self, admin: Admin, node_id: int, cluster_id: str, instances: Instances,
                 client_config: dict[str, Any], user: str | None = None,
                 schemas: RecordSchemas | None = None) -> None:
        self.admin = admin
        #: the broker's Schema Registry as serializers (None when it is not served)
        self.schemas = schemas
        #: the v2 consumer instances (every user's)
        self.instances = instances
        #: how this proxy's Kafka clients connect (a v2 instance's consumer too)
        self.client_config = client_config
        #: the user logged in with basic authentication, None without
        self.user = user
        self.view = KafkaView(admin, node_id)
        self.cluster_id = cluster_id

    async def ready(self) -> None:
        """Metadata known, so that a request can go to a broker."""
        if not self.admin.client.metadata.brokers:
            await self.admin.client.refresh_metadata()

    def urls(self, request: Request) -> Urls:
        """The cluster named in the path, or Confluent's 404."""
        wanted = request.path_params.get("cluster_id")
        if wanted is not None and wanted != self.cluster_id:
            raise not_found(f"Cluster {wanted} cannot be found.")
        return Urls(str(request.base_url), self.cluster_id)

    async def topic(self, name: str) -> TopicInfo:
        info = (await self.view.metadata([name])).topics.get(name)
        if info is None:
            raise error_for(3, f"topic {name!r}: {describe_code(3)}: {_kafka_text(3)}")
        if info.error:
            raise error_for(info.error, f"topic {name!r}: {describe_code(info.error)}: "
                            + _kafka_text(info.error))
        return info

    async def describe_configs(self, resource_type: int, name: str,
                               keys: Sequence[str] | None = None) -> list[Described]:
        """DescribeConfigs with synonyms, to the broker itself for a broker's configs."""
        def body(version: int) -> Any:
            return make_request(
                ApiKey.DescribeConfigs, version, include_synonyms=True,
                include_documentation=False, resources=[_DESCRIBE.DescribeConfigsResource(
                    resource_type=resource_type, resource_name=name,
                    configuration_keys=None if keys is None else list(keys))])

        await self.ready()
        client = self.admin.client
        if resource_type == BROKER_RESOURCE and name:  # one broker's: asked of it
            if int(name) not in client.metadata.brokers:
                raise not_found()
            response = await client.request(int(name), ApiKey.DescribeConfigs, body)
        else:
            response = await client.request_any(ApiKey.DescribeConfigs, body)
        out: list[Described] = []
        for result in response.results:
            if result.error_code:
                raise error_for(result.error_code, f"{name!r}: {describe_code(result.error_code)}"
                                f": {result.error_message or _kafka_text(result.error_code)}")
            for c in result.configs:
                source = c.config_source if c.config_source is not None else 0
                entry = ConfigEntry(c.name, c.value, c.read_only, source, c.is_sensitive)
                synonyms = [(s.name, s.value, s.source) for s in (c.synonyms or ())]
                out.append((entry, synonyms))
        return sorted(out, key=lambda d: d[0].name)

    async def alter_configs(self, resource_type: int, name: str,
                            changes: Sequence[tuple[str, int, str | None]], *,
                            validate_only: bool = False) -> None:
        """IncrementalAlterConfigs: only the named configs change."""
        client = self.admin.client
        await self.ready()

        def body(version: int) -> Any:
            return incremental_alter_configs_request(version, resource_type, name, changes,
                                                     validate_only=validate_only)

        if resource_type == BROKER_RESOURCE and name:
            response = await client.request(int(name), ApiKey.IncrementalAlterConfigs, body)
        else:
            response = await client.request_any(ApiKey.IncrementalAlterConfigs, body)
        for resource_name, code, message in parse_incremental_alter_configs(response):
            if code:
                raise error_for(code, f"{resource_name!r}: {describe_code(code)}: "
                                f"{message or _kafka_text(code)}")


#: Kafka's message for the errors the proxy reports without one from the broker
_KAFKA_TEXT = {3: "This server does not host this topic-partition."}


def _kafka_text(code: int) -> str:
    return _KAFKA_TEXT.get(code, describe_code(code))


OPERATIONS = {op.name: op for op in ConfigOperation}
RESOURCE_TYPES = {"topic": TOPIC_RESOURCE, "broker": BROKER_RESOURCE}


async def read_json(request: Request, *, media_checked: bool = False) -> Any:
    """The request's JSON body, or Confluent's 400 (415 for a media type other than
    ``application/json``, unless the caller checked it: ``media_checked``)."""
    media = request.headers.get("content-type", "application/json").split(";")[0].strip()
    if not media_checked and media.lower() not in ("application/json", ""):
        raise RestError(415, 415, "HTTP 415 Unsupported Media Type")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise RestError(413, 413, f"Request body of {declared} bytes exceeds {MAX_BODY_BYTES}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise RestError(413, 413, f"Request body exceeds {MAX_BODY_BYTES} bytes")
    if not body:  # no body; whitespace alone is a body that holds no JSON (Jackson's 400)
        return None
    try:
        value = json.loads(body)
        # JSON may escape a lone UTF-16 surrogate ("\\udafb"), which no Kafka string can hold
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise bad_request("Unexpected request body: a string holds an unpaired UTF-16 "
                          "surrogate") from None
    except (ValueError, RecursionError) as exc:
        raise bad_request(f"Unexpected request body: {exc}") from None
    return value
