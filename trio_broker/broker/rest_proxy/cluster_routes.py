"""v3 routes for the cluster, its brokers, topics, topic and broker configs, and partitions.

Each answer is the Confluent shape (``shapes``) of what the Kafka protocol says: Metadata for
the cluster, brokers, topics and partitions; DescribeConfigs (with synonyms) for configs;
CreateTopics, DeleteTopics and IncrementalAlterConfigs for the writes. A write answers 201 (a
topic created) or 204 (deleted, altered), as Confluent does.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...client.core.admin import BROKER_RESOURCE, TOPIC_RESOURCE, ConfigOperation, NewTopic
from . import shapes
from .errors import RestError, bad_request, not_found
from .proxy import OPERATIONS, RestProxy, proxy_of, read_json

CLUSTER = "/v3/clusters/{cluster_id}"


def _proxy(request: Request) -> RestProxy:
    return proxy_of(request)


async def list_clusters(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    metadata = await proxy.view.metadata([])
    return JSONResponse(shapes.listing("KafkaClusterList", urls.root,
                                       [shapes.cluster(urls, metadata.controller_id)]))


async def get_cluster(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    metadata = await proxy.view.metadata([])
    return JSONResponse(shapes.cluster(urls, metadata.controller_id))


async def list_brokers(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    metadata = await proxy.view.metadata([])
    return JSONResponse(shapes.listing("KafkaBrokerList", f"{urls.cluster}/brokers", [
        shapes.broker(urls, b) for _, b in sorted(metadata.brokers.items())]))


async def get_broker(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    found = (await proxy.view.metadata([])).brokers.get(request.path_params["broker_id"])
    if found is None:
        raise not_found()
    return JSONResponse(shapes.broker(urls, found))


# --- topics ---------------------------------------------------------------------------------

async def list_topics(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    metadata = await proxy.view.metadata(None)
    return JSONResponse(shapes.listing("KafkaTopicList", f"{urls.cluster}/topics", [
        shapes.topic(urls, info.name, info.internal, info.num_partitions, _replication(info))
        for _, info in sorted(metadata.topics.items()) if not info.error]))


def _replication(info: Any) -> int:
    first = info.partitions.get(0) or next(iter(info.partitions.values()), None)
    return len(first.replicas) if first is not None else 0


async def get_topic(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    info = await proxy.topic(request.path_params["topic_name"])
    return JSONResponse(shapes.topic(urls, info.name, info.internal, info.num_partitions,
                                     _replication(info)))


def _int_field(body: dict[str, Any], name: str, bits: int) -> int:
    """An integer field of CreateTopics' ``bits``-bit width (absent: -1, the default)."""
    value = body.get(name)
    if value is None:
        return -1
    if not isinstance(value, int) or isinstance(value, bool):
        raise bad_request(f"{name} must be an integer")
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise RestError(400, 40002, f"{name} {value} is out of range (at most "
                                    f"{(1 << (bits - 1)) - 1})")
    return value


async def create_topic(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    body = await read_json(request)
    if not isinstance(body, dict):
        raise bad_request("Request body must be a JSON object")
    name = body.get("topic_name")
    if not isinstance(name, str) or not name:
        raise bad_request("topic_name must be a non-empty string")
    partitions = _int_field(body, "partitions_count", 32)  # Kafka's NumPartitions: int32
    replication = _int_field(body, "replication_factor", 16)  # ReplicationFactor: int16
    # Kafka's checks, made here: the admin client sends a non-positive count as "the default"
    if partitions < -1 or partitions == 0:
        raise RestError(400, 40002, "Number of partitions was set to an invalid non-positive "
                                    "value.")
    if replication < -1 or replication == 0:
        raise RestError(400, 40002, "Replication factor must be larger than 0, or -1 to use "
                                    "the default value.")
    configs: dict[str, str] = {}
    listed = body.get("configs")
    listed = [] if listed is None else listed
    if not isinstance(listed, list):
        raise bad_request("configs must be a list of {\"name\": ..., \"value\": ...}")
    for item in listed:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise bad_request("configs must be a list of {\"name\": ..., \"value\": ...}")
        value = item.get("value")
        if value is None:
            raise bad_request(f"config {item['name']!r} needs a value")
        configs[item["name"]] = str(value)
    validate_only = _flag(body, "validate_only")
    await proxy.admin.create_topics([NewTopic(name, partitions, replication, configs)],
                                    validate_only=validate_only)
    if validate_only:
        shown = shapes.topic(urls, name, False, max(partitions, 0), max(replication, 0))
    else:
        info = await proxy.topic(name)
        shown = shapes.topic(urls, name, info.internal, info.num_partitions,
                             _replication(info))
    return JSONResponse(shown, status_code=201)


async def delete_topic(request: Request) -> Response:
    proxy = _proxy(request)
    proxy.urls(request)
    name = request.path_params["topic_name"]
    await proxy.topic(name)  # Kafka's 40403 for an unknown topic, before deleting
    await proxy.admin.delete_topics([name])
    return Response(status_code=204)


# --- partitions -----------------------------------------------------------------------------

async def list_partitions(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    info = await proxy.topic(request.path_params["topic_name"])
    return JSONResponse(shapes.listing(
        "KafkaPartitionList", f"{urls.topic(info.name)}/partitions",
        [shapes.partition(urls, info.name, p) for _, p in sorted(info.partitions.items())]))


async def get_partition(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    info = await proxy.topic(request.path_params["topic_name"])
    found = info.partitions.get(request.path_params["partition_id"])
    if found is None:
        raise not_found("This server does not host this topic-partition.")
    return JSONResponse(shapes.partition(urls, info.name, found))


def _flag(body: dict[str, Any], name: str) -> bool:
    """A boolean field (absent: false); anything else is Confluent's 400, as Jackson's."""
    value = body.get(name, False)
    if value is None or isinstance(value, bool):
        return bool(value)
    raise bad_request(f"{name} must be true or false")


# --- configs --------------------------------------------------------------------------------

async def _owner(request: Request, proxy: RestProxy,
                 ) -> tuple[int, tuple[str, str, str | int], str]:
    """(resource type, the shape's owner triple, the resource name Kafka knows it by); a broker
    that is not in the cluster is Confluent's 404, as for the broker itself."""
    if "topic_name" in request.path_params:
        name = request.path_params["topic_name"]
        return TOPIC_RESOURCE, ("topic", "topic_name", name), name
    if "broker_id" in request.path_params:
        broker_id = request.path_params["broker_id"]
        if broker_id not in (await proxy.view.metadata([])).brokers:
            raise not_found()
        return BROKER_RESOURCE, ("broker", "broker_id", broker_id), str(broker_id)
    # the cluster-wide broker defaults: Kafka's broker resource without a name
    return BROKER_RESOURCE, ("cluster", "config_type", "BROKER"), ""


async def list_configs(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    kind, owner, name = await _owner(request, proxy)
    described = await proxy.describe_configs(kind, name)
    shape, collection, _ = shapes.config_collection(urls, owner)
    return JSONResponse(shapes.listing(f"{shape}List", collection, [
        shapes.config(urls, owner, entry, synonyms) for entry, synonyms in described]))


async def get_config(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    kind, owner, name = await _owner(request, proxy)
    wanted = request.path_params["name"]
    described = await proxy.describe_configs(kind, name, [wanted])
    for entry, synonyms in described:
        if entry.name == wanted:
            return JSONResponse(shapes.config(urls, owner, entry, synonyms))
    raise not_found()


async def update_config(request: Request) -> Response:
    proxy = _proxy(request)
    proxy.urls(request)
    kind, _, name = await _owner(request, proxy)
    body = await read_json(request)
    if not isinstance(body, dict) or "value" not in body:
        raise bad_request("Request body must be {\"value\": ...}")
    value = body["value"]
    await proxy.alter_configs(kind, name, [(request.path_params["name"], ConfigOperation.SET,
                                            None if value is None else str(value))])
    return Response(status_code=204)


async def reset_config(request: Request) -> Response:
    proxy = _proxy(request)
    proxy.urls(request)
    kind, _, name = await _owner(request, proxy)
    await proxy.alter_configs(kind, name, [(request.path_params["name"],
                                            ConfigOperation.DELETE, None)])
    return Response(status_code=204)


async def alter_configs(request: Request) -> Response:
    """``POST .../configs:alter`` with ``{"data": [{"name", "value", "operation"}, ...]}``."""
    proxy = _proxy(request)
    proxy.urls(request)
    kind, _, name = await _owner(request, proxy)
    body = await read_json(request)
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        raise bad_request("Request body must be {\"data\": [...]}")
    changes: list[tuple[str, int, str | None]] = []
    for item in body["data"]:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise bad_request("Each change must name a config: {\"name\": ..., \"value\": ...}")
        operation = str(item.get("operation") or "SET").upper()
        if operation not in OPERATIONS:
            raise bad_request(f"Unknown operation {operation!r}: use one of "
                              + ", ".join(OPERATIONS))
        value = item.get("value")
        changes.append((item["name"], OPERATIONS[operation],
                        None if value is None else str(value)))
    await proxy.alter_configs(kind, name, changes,
                              validate_only=_flag(body, "validate_only"))
    return Response(status_code=204)


def routes() -> list[Route]:
    topic = CLUSTER + "/topics/{topic_name}"
    broker = CLUSTER + "/brokers/{broker_id:int}"
    out = [
        Route("/v3/clusters", list_clusters),
        Route(CLUSTER, get_cluster),
        Route(CLUSTER + "/brokers", list_brokers),
        Route(broker, get_broker),
        Route(CLUSTER + "/topics", list_topics, methods=["GET"]),
        Route(CLUSTER + "/topics", create_topic, methods=["POST"]),
        Route(topic, get_topic, methods=["GET"]),
        Route(topic, delete_topic, methods=["DELETE"]),
        Route(topic + "/partitions", list_partitions),
        Route(topic + "/partitions/{partition_id:int}", get_partition),
    ]
    for configs in (topic + "/configs", broker + "/configs", CLUSTER + "/broker-configs"):
        out += [
            Route(configs, list_configs),
            Route(configs + ":alter", alter_configs, methods=["POST"]),
            Route(configs + "/{name}", get_config, methods=["GET"]),
            Route(configs + "/{name}", update_config, methods=["PUT"]),
            Route(configs + "/{name}", reset_config, methods=["DELETE"]),
        ]
    return out
