"""v3 replicas: a partition's replicas (``.../partitions/{p}/replicas[/{broker_id}]``) and the
replicas a broker holds (``/brokers/{broker_id}/partition-replicas``), from Metadata: which
broker holds each, whether it leads, whether it is in sync. And the reassignments in progress
(``.../partitions/{p}/reassignment``, ``-`` for every topic or partition), from the controller's
ListPartitionReassignments."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...client.core.errors import describe_code, error_for
from ...client.core.structs import PartitionInfo
from ...protocol.api_keys import ApiKey, request_class
from ...protocol.messages import make_request
from . import shapes
from .cluster_routes import CLUSTER
from .errors import not_found
from .proxy import RestProxy, proxy_of
from .shapes import Json, Urls


def replica_shape(urls: Urls, topic: str, partition: PartitionInfo, broker_id: int) -> Json:
    url = f"{urls.topic(topic)}/partitions/{partition.partition}/replicas/{broker_id}"
    return shapes.resource(
        "KafkaReplica", url,
        f"{urls.crn}/topic={topic}/partition={partition.partition}/replica={broker_id}",
        cluster_id=urls.cluster_id, topic_name=topic, partition_id=partition.partition,
        broker_id=broker_id, is_leader=partition.leader == broker_id,
        is_in_sync=broker_id in partition.isr, broker=shapes.related(urls.broker(broker_id)))


async def _partition(proxy: RestProxy, request: Request) -> PartitionInfo:
    info = await proxy.topic(request.path_params["topic_name"])
    found = info.partitions.get(request.path_params["partition_id"])
    if found is None:
        raise not_found("This server does not host this topic-partition.")
    return found


async def list_replicas(request: Request) -> Response:
    proxy = proxy_of(request)
    urls = proxy.urls(request)
    partition = await _partition(proxy, request)
    topic = request.path_params["topic_name"]
    return JSONResponse(shapes.listing(
        "KafkaReplicaList", f"{urls.topic(topic)}/partitions/{partition.partition}/replicas",
        [replica_shape(urls, topic, partition, b) for b in partition.replicas]))


async def get_replica(request: Request) -> Response:
    proxy = proxy_of(request)
    urls = proxy.urls(request)
    partition = await _partition(proxy, request)
    broker_id = request.path_params["broker_id"]
    if broker_id not in partition.replicas:
        raise not_found()
    return JSONResponse(replica_shape(urls, request.path_params["topic_name"], partition,
                                      broker_id))


async def broker_replicas(request: Request) -> Response:
    proxy = proxy_of(request)
    urls = proxy.urls(request)
    broker_id = request.path_params["broker_id"]
    metadata = await proxy.view.metadata(None)
    if broker_id not in metadata.brokers:
        raise not_found()
    data = [replica_shape(urls, name, p, broker_id)
            for name, info in sorted(metadata.topics.items()) if not info.error
            for _, p in sorted(info.partitions.items()) if broker_id in p.replicas]
    return JSONResponse(shapes.listing(
        "KafkaReplicaList", f"{urls.broker(broker_id)}/partition-replicas", data))


async def _reassignments(request: Request) -> list[Json]:
    """The controller's reassignments in progress, for the path's topic and partition (or
    ``-``: every one)."""
    proxy = proxy_of(request)
    urls = proxy.urls(request)
    topic = request.path_params["topic_name"]
    partition = request.path_params.get("partition_id")
    topics: Any = None
    if topic != "-":
        info = await proxy.topic(topic)  # 40403 for an unknown topic
        wanted = [partition] if partition is not None else sorted(info.partitions)
        cls = request_class(ApiKey.ListPartitionReassignments).ListPartitionReassignmentsTopics
        topics = [cls(name=topic, partition_indexes=wanted)]
    metadata = await proxy.view.metadata([])
    answer = await proxy.admin.client.request(
        metadata.controller_id, ApiKey.ListPartitionReassignments,
        lambda v: make_request(ApiKey.ListPartitionReassignments, v, timeout_ms=30_000,
                               topics=topics))
    if answer.error_code:
        raise error_for(answer.error_code, f"reassignments: {describe_code(answer.error_code)}"
                        f": {answer.error_message or describe_code(answer.error_code)}")
    out = []
    for t in answer.topics:
        for p in t.partitions:
            url = f"{urls.topic(t.name)}/partitions/{p.partition_index}"
            out.append(shapes.resource(
                "KafkaReassignment", f"{url}/reassignment",
                f"{urls.crn}/topic={t.name}/partition={p.partition_index}/reassignment",
                cluster_id=urls.cluster_id, topic_name=t.name, partition_id=p.partition_index,
                adding_replicas=list(p.adding_replicas),
                removing_replicas=list(p.removing_replicas),
                replicas=shapes.related(f"{url}/replicas")))
    return sorted(out, key=lambda r: (r["topic_name"], r["partition_id"]))


async def list_reassignments(request: Request) -> Response:
    urls = proxy_of(request).urls(request)
    data = await _reassignments(request)
    url = f"{urls.topic(request.path_params['topic_name'])}/partitions/-/reassignment"
    return JSONResponse(shapes.listing("KafkaReassignmentList", url, data))


async def get_reassignment(request: Request) -> Response:
    found = await _reassignments(request)
    if not found:
        raise not_found()
    return JSONResponse(found[0])


def routes() -> list[Route]:
    partition = CLUSTER + "/topics/{topic_name}/partitions/{partition_id:int}"
    partitions = CLUSTER + "/topics/{topic_name}/partitions"
    return [Route(partitions + "/-/reassignment", list_reassignments),
            Route(partition + "/reassignment", get_reassignment),
            Route(partition + "/replicas", list_replicas),
            Route(partition + "/replicas/{broker_id:int}", get_replica),
            Route(CLUSTER + "/brokers/{broker_id:int}/partition-replicas", broker_replicas)]
