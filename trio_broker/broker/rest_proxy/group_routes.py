"""v3 routes for consumer groups: the groups, their consumers, and their lag.

A group is described by DescribeGroups on its coordinator; its lag is its committed offsets
(OffsetFetch) against each partition's log end offset (ListOffsets on the leader), as
``kafka-consumer-groups --describe`` computes it. A lag row names the consumer a partition is
assigned to, or ``""`` when none is. A group the coordinator knows nothing of (``Dead``) is
Confluent's 404.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...client.core.groups import GroupDescription, MemberDescription
from ...client.core.metadata import TopicInfo
from ...client.core.structs import TopicPartition
from ...client.trio.consumer.coordinator_lookup import CoordinatorLookup
from . import shapes
from .cluster_routes import CLUSTER
from .errors import not_found
from .proxy import RestProxy, proxy_of
from .shapes import Json, Urls


def _proxy(request: Request) -> RestProxy:
    return proxy_of(request)


def group_shape(urls: Urls, description: GroupDescription, coordinator: int) -> Json:
    url = urls.group(description.group_id)
    return shapes.resource(
        "KafkaConsumerGroup", url, f"{urls.crn}/consumer-group={description.group_id}",
        cluster_id=urls.cluster_id, consumer_group_id=description.group_id,
        is_simple=description.protocol_type == "", partition_assignor=description.protocol,
        state=shapes.GROUP_STATES.get(description.state, "UNKNOWN"),
        type=description.group_type.upper(), is_mixed_consumer_group=description.mixed,
        coordinator=shapes.related(urls.broker(coordinator)) if coordinator >= 0 else None,
        consumers=shapes.related(f"{url}/consumers"),
        lag_summary=shapes.related(f"{url}/lag-summary"))


def consumer_shape(urls: Urls, group_id: str, member: MemberDescription) -> Json:
    url = f"{urls.group(group_id)}/consumers/{member.member_id}"
    return shapes.resource(
        "KafkaConsumer", url,
        f"{urls.crn}/consumer-group={group_id}/consumer={member.member_id}",
        cluster_id=urls.cluster_id, consumer_group_id=group_id, consumer_id=member.member_id,
        instance_id=None, client_id=member.client_id,
        assignments=shapes.related(f"{url}/assignments"))


async def _group(proxy: RestProxy, group_id: str) -> tuple[GroupDescription, int]:
    description = await proxy.view.describe_group(group_id)
    if description.state == "Dead":
        raise not_found(f"Consumer group {group_id} cannot be found.")
    return description, await CoordinatorLookup(proxy.admin.client, group_id).find()


async def list_groups(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    rows = [row for row in await proxy.view.list_groups() if row.protocol_type == "consumer"]
    await proxy.view.describe_rows(rows)
    data = [group_shape(urls, GroupDescription(row.group_id, row.state, row.protocol_type,
                                               row.protocol, []), row.coordinator)
            for row in rows if row.state != "Dead"]
    return JSONResponse(shapes.listing("KafkaConsumerGroupList",
                                       f"{urls.cluster}/consumer-groups", data))


async def get_group(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    description, coordinator = await _group(proxy, request.path_params["group_id"])
    return JSONResponse(group_shape(urls, description, coordinator))


async def list_consumers(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    group_id = request.path_params["group_id"]
    description, _ = await _group(proxy, group_id)
    return JSONResponse(shapes.listing(
        "KafkaConsumerList", f"{urls.group(group_id)}/consumers",
        [consumer_shape(urls, group_id, m)
         for m in sorted(description.members, key=lambda m: m.member_id)]))


async def get_consumer(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    group_id = request.path_params["group_id"]
    description, _ = await _group(proxy, group_id)
    for member in description.members:
        if member.member_id == request.path_params["consumer_id"]:
            return JSONResponse(consumer_shape(urls, group_id, member))
    raise not_found()


async def consumer_assignments(request: Request) -> Response:
    """The partitions the group assigned to one consumer (``KafkaConsumerAssignment``)."""
    proxy = _proxy(request)
    urls = proxy.urls(request)
    group_id, consumer_id = request.path_params["group_id"], request.path_params["consumer_id"]
    description, _ = await _group(proxy, group_id)
    member = next((m for m in description.members if m.member_id == consumer_id), None)
    if member is None:
        raise not_found()
    url = f"{urls.group(group_id)}/consumers/{consumer_id}/assignments"
    return JSONResponse(shapes.listing("KafkaConsumerAssignmentList", url, [
        shapes.resource(
            "KafkaConsumerAssignment", f"{url}/{tp.topic}/partitions/{tp.partition}",
            f"{urls.crn}/consumer-group={group_id}/consumer={consumer_id}"
            f"/assignment={tp.topic}/partition={tp.partition}",
            cluster_id=urls.cluster_id, consumer_group_id=group_id, consumer_id=consumer_id,
            topic_name=tp.topic, partition_id=tp.partition,
            partition=shapes.related(f"{urls.topic(tp.topic)}/partitions/{tp.partition}"),
            lag=shapes.related(
                f"{urls.group(group_id)}/lags/{tp.topic}/partitions/{tp.partition}"))
        for tp in sorted(member.assignment)]))


async def _lags(proxy: RestProxy, urls: Urls, group_id: str) -> list[Json]:
    description, _ = await _group(proxy, group_id)
    committed = await proxy.admin.list_consumer_group_offsets(group_id)
    owners = {tp: m for m in description.members for tp in m.assignment}
    topics = sorted({tp.topic for tp in committed})
    ends: dict[TopicPartition, tuple[int, int]] = {}
    if topics:
        metadata = await proxy.view.metadata(topics)
        ends = await proxy.view.offsets(
            TopicInfo(t.name, t.error, t.internal, [
                p for p in t.partitions.values()
                if TopicPartition(t.name, p.partition) in committed])
            for t in metadata.topics.values() if not t.error)
    rows = []
    for tp in sorted(committed):
        code, end = ends.get(tp, (3, -1))
        if code:
            continue
        current = committed[tp].offset
        owner = owners.get(tp)
        url = f"{urls.group(group_id)}/lags/{tp.topic}/partitions/{tp.partition}"
        rows.append(shapes.resource(
            "KafkaConsumerLag", url,
            f"{urls.crn}/consumer-group={group_id}/lag={tp.topic}/partition={tp.partition}",
            cluster_id=urls.cluster_id, consumer_group_id=group_id, topic_name=tp.topic,
            partition_id=tp.partition, current_offset=current, log_end_offset=end,
            lag=max(0, end - current), consumer_id=owner.member_id if owner else "",
            instance_id=None, client_id=owner.client_id if owner else ""))
    return rows


async def list_lags(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    group_id = request.path_params["group_id"]
    rows = await _lags(proxy, urls, group_id)
    return JSONResponse(shapes.listing("KafkaConsumerLagList",
                                       f"{urls.group(group_id)}/lags", rows))


async def get_lag(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    params = request.path_params
    for row in await _lags(proxy, urls, params["group_id"]):
        if (row["topic_name"], row["partition_id"]) == (params["topic_name"],
                                                         params["partition_id"]):
            return JSONResponse(row)
    raise not_found()


async def lag_summary(request: Request) -> Response:
    proxy = _proxy(request)
    urls = proxy.urls(request)
    group_id = request.path_params["group_id"]
    rows = await _lags(proxy, urls, group_id)
    top: dict[str, Any] = max(rows, key=lambda r: r["lag"], default={})
    url = urls.group(group_id)
    max_lag_partition = None
    if top:
        max_lag_partition = shapes.related(
            f"{urls.topic(top['topic_name'])}/partitions/{top['partition_id']}")
    return JSONResponse(shapes.resource(
        "KafkaConsumerGroupLagSummary", f"{url}/lag-summary",
        f"{urls.crn}/consumer-group={group_id}/lag-summary", cluster_id=urls.cluster_id,
        consumer_group_id=group_id, max_lag_consumer_id=top.get("consumer_id", ""),
        max_lag_instance_id=None, max_lag_client_id=top.get("client_id", ""),
        max_lag_topic_name=top.get("topic_name", ""),
        max_lag_partition_id=top.get("partition_id", 0), max_lag=top.get("lag", 0),
        total_lag=sum(r["lag"] for r in rows),
        max_lag_consumer=shapes.related(f"{url}/consumers/{top['consumer_id']}")
        if top.get("consumer_id") else None,
        max_lag_partition=max_lag_partition))


def routes() -> list[Route]:
    group = CLUSTER + "/consumer-groups/{group_id}"
    return [
        Route(CLUSTER + "/consumer-groups", list_groups),
        Route(group, get_group),
        Route(group + "/consumers", list_consumers),
        # a KIP-848 member id is a client-made base64 string that may hold "/": the id is a
        # path, the route with a suffix tried first
        Route(group + "/consumers/{consumer_id:path}/assignments", consumer_assignments),
        Route(group + "/consumers/{consumer_id:path}", get_consumer),
        Route(group + "/lags", list_lags),
        Route(group + "/lags/{topic_name}/partitions/{partition_id:int}", get_lag),
        Route(group + "/lag-summary", lag_summary),
    ]
