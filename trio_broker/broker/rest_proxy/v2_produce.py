"""Confluent's v2 produce and cluster reads: ``POST /topics/{topic}``,
``POST /topics/{topic}/partitions/{partition}``, ``GET /topics``, ``GET /topics/{topic}``,
``GET /brokers``, and the partitions: ``GET /topics/{topic}/partitions``,
``.../partitions/{partition}`` and its ``/offsets``.

The embedded format is the request's ``Content-Type``: ``application/vnd.kafka.json.v2+json``
(keys and values are JSON, written as compact JSON text), ``application/vnd.kafka.binary.v2+json``
(base64), or a schema format, ``application/vnd.kafka.{avro,protobuf,jsonschema}.v2+json``, with
``key_schema``/``value_schema`` (the raw schema, registered under ``<topic>-key``/``-value`` if
new) or ``key_schema_id``/``value_schema_id``, written through the broker's Schema Registry
(``schema_records.py``; 415 when it is not served); the answer names the schema ids used.
Records go through the v3 producer (``produce``),
batched the same way; each is answered in ``offsets`` with its partition and offset, or with v2's
``error_code`` 1 (not retriable) or 2 (retriable) and Kafka's message. v2's own codes answer
what cannot be produced at all: 40401 for an unknown topic, 40402 for an unknown partition.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...client.core.admin import TOPIC_RESOURCE
from ...client.core.errors import KafkaError, error_for
from ...client.core.structs import TopicPartition
from ...protocol.errors import ErrorCode
from .errors import RestError, bad_request, from_kafka
from .produce import Producer
from .proxy import MAX_BODY_BYTES, RestProxy, proxy_of
from .schema_records import SCHEMA_TYPES

V2_JSON = "application/vnd.kafka.v2+json"
#: the v2 media types of records -> the v3 type their data is given as
EMBEDDED = {"application/vnd.kafka.json.v2+json": "JSON",
            "application/vnd.kafka.binary.v2+json": "BINARY",
            "application/vnd.kafka.avro.v2+json": "AVRO",
            "application/vnd.kafka.protobuf.v2+json": "PROTOBUF",
            "application/vnd.kafka.jsonschema.v2+json": "JSONSCHEMA"}
#: Confluent's codes for a key or value sent without its schema
SCHEMA_MISSING = {"key": 42201, "value": 42202}


class V2Response(JSONResponse):
    media_type = V2_JSON


def _proxy(request: Request) -> RestProxy:
    return proxy_of(request)


async def _topic(proxy: RestProxy, name: str) -> Any:
    try:
        return await proxy.topic(name)
    except KafkaError as exc:
        if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise RestError(404, 40401, "Topic not found.") from None
        raise


def _embedded(request: Request, proxy: RestProxy) -> str:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    fmt = EMBEDDED.get(media)
    if fmt is None:
        raise RestError(415, 415, "HTTP 415 Unsupported Media Type")
    if fmt in SCHEMA_TYPES and proxy.schemas is None:
        raise RestError(415, 415, f"{media} needs the Schema Registry, which this broker does "
                                  "not serve: set schema.registry.listener, or use the json or "
                                  "binary embedded format")
    return fmt


def _schema_spec(body: dict[str, Any], field: str, fmt: str) -> dict[str, Any]:
    """How v3 names the schema v2's ``{field}_schema_id`` or ``{field}_schema`` gives."""
    schema_id = body.get(f"{field}_schema_id")
    if schema_id is not None:
        return {"schema_id": schema_id}
    schema = body.get(f"{field}_schema")
    if schema is not None:
        return {"type": fmt, "schema": schema}
    raise RestError(422, SCHEMA_MISSING[field],
                    f"Request includes {field}s but does not include {field} schema")


async def produce(request: Request) -> Response:
    proxy = _proxy(request)
    fmt = _embedded(request, proxy)
    info = await _topic(proxy, request.path_params["topic_name"])
    fixed = request.path_params.get("partition_id")
    if fixed is not None and fixed not in info.partitions:
        raise RestError(404, 40402, "Partition not found.")
    body = await _read(request)
    records = body.get("records") if isinstance(body, dict) else None
    if not isinstance(records, list) or not records:
        raise RestError(422, 42201, "Request includes no records")
    schemas = fmt in SCHEMA_TYPES
    if not schemas and any(body.get(k) is not None for k in (
            "key_schema", "key_schema_id", "value_schema", "value_schema_id")):
        raise RestError(422, 42201, "key_schema and value_schema go with the avro, protobuf "
                                    "and jsonschema embedded formats")
    items: list[Any] = []
    for record in records:
        if not isinstance(record, dict):
            raise RestError(422, 42201, "Each record must be a JSON object")
        item: dict[str, Any] = {
            "partition_id": fixed if fixed is not None else record.get("partition")}
        for field in ("key", "value"):
            if record.get(field) is not None:
                spec = _schema_spec(body, field, fmt) if schemas else {"type": fmt}
                item[field] = {**spec, "data": record[field]}
        items.append(item)
    producer = Producer(proxy, info)
    reports = await producer.produce(items)
    offsets = []
    for i, report in enumerate(reports):
        if report["error_code"] == 200:
            offsets.append({"partition": report["partition_id"], "offset": report["offset"],
                            "error_code": None, "error": None})
        else:
            offsets.append({"partition": None, "offset": None,
                            "error_code": 2 if i in producer.retriable else 1,
                            "error": report["message"]})
    return V2Response({"key_schema_id": _schema_id(reports, "key"),
                       "value_schema_id": _schema_id(reports, "value"), "offsets": offsets})


def _schema_id(reports: list[dict[str, Any]], field: str) -> int | None:
    for report in reports:
        written = report.get(field)
        if isinstance(written, dict) and written.get("schema_id") is not None:
            return int(written["schema_id"])
    return None


async def _read(request: Request) -> Any:
    import json

    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise RestError(413, 413, f"Request body of {declared} bytes exceeds {MAX_BODY_BYTES}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise RestError(413, 413, f"Request body exceeds {MAX_BODY_BYTES} bytes")
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise bad_request(f"Unexpected request body: {exc}") from None


async def list_topics(request: Request) -> Response:
    metadata = await _proxy(request).view.metadata(None)
    return V2Response(sorted(name for name, info in metadata.topics.items() if not info.error))


def _partition(p: Any) -> dict[str, Any]:
    return {"partition": p.partition, "leader": p.leader, "replicas": [
        {"broker": r, "leader": r == p.leader, "in_sync": r in p.isr} for r in p.replicas]}


async def get_topic(request: Request) -> Response:
    proxy = _proxy(request)
    info = await _topic(proxy, request.path_params["topic_name"])
    configs = await proxy.describe_configs(TOPIC_RESOURCE, info.name)
    return V2Response({
        "name": info.name,
        "configs": {entry.name: entry.value for entry, _ in configs if not entry.sensitive},
        "partitions": [_partition(p) for _, p in sorted(info.partitions.items())]})


async def list_partitions(request: Request) -> Response:
    info = await _topic(_proxy(request), request.path_params["topic_name"])
    return V2Response([_partition(p) for _, p in sorted(info.partitions.items())])


async def _one_partition(request: Request) -> tuple[RestProxy, Any, Any]:
    proxy = _proxy(request)
    info = await _topic(proxy, request.path_params["topic_name"])
    found = info.partitions.get(request.path_params["partition_id"])
    if found is None:
        raise RestError(404, 40402, "Partition not found.")
    return proxy, info, found


async def get_partition(request: Request) -> Response:
    _, _, found = await _one_partition(request)
    return V2Response(_partition(found))


async def partition_offsets(request: Request) -> Response:
    """``{"beginning_offset", "end_offset"}``: the log start and end offsets (ListOffsets)."""
    proxy, info, found = await _one_partition(request)
    offsets = (await proxy.view.start_end([info])).get(TopicPartition(info.name,
                                                                       found.partition))
    if offsets is None or offsets.error:
        raise from_kafka(error_for(offsets.error if offsets else 5, "ListOffsets"))
    return V2Response({"beginning_offset": offsets.start, "end_offset": offsets.end})


async def list_brokers(request: Request) -> Response:
    """``{"brokers": [ids]}``, as Confluent's v2 ``BrokersResource``."""
    metadata = await _proxy(request).view.metadata([])
    return V2Response({"brokers": sorted(metadata.brokers)})


def routes() -> list[Route]:
    return [Route("/brokers", list_brokers, methods=["GET"]),
            Route("/topics", list_topics, methods=["GET"]),
            Route("/topics/{topic_name}", get_topic, methods=["GET"]),
            Route("/topics/{topic_name}", produce, methods=["POST"]),
            Route("/topics/{topic_name}/partitions", list_partitions, methods=["GET"]),
            Route("/topics/{topic_name}/partitions/{partition_id:int}", get_partition,
                  methods=["GET"]),
            Route("/topics/{topic_name}/partitions/{partition_id:int}/offsets",
                  partition_offsets, methods=["GET"]),
            Route("/topics/{topic_name}/partitions/{partition_id:int}", produce,
                  methods=["POST"])]
