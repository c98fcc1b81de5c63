"""Metadata: this broker is the leader, replica and ISR of every partition it holds."""

from __future__ import annotations

from collections.abc import Container

from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.messages import response_type
from .bodies import MetadataRequest, Struct
from .context import HandlerContext, HandlerResult
from .topics import ensure_topic, partition_count, validate_topic_name

_R = response_type(ApiKey.Metadata)
_Broker = _R.MetadataResponseBroker
_Topic = _R.MetadataResponseTopic
_Partition = _Topic.MetadataResponsePartition


async def handle_metadata(ctx: HandlerContext, request: MetadataRequest) -> HandlerResult:
    broker = ctx.broker
    node = broker.node_id
    v = ctx.version
    names: list[str] | None
    if request.topics is None or (v == 0 and not request.topics):
        names = None  # all topics
    else:
        names = [t.name for t in request.topics]
    allow_auto = request.allow_auto_topic_creation if v >= 4 else True
    offline = broker.logs.offline_partitions
    topics = []
    if names is None:
        for name, count in sorted(broker.logs.topics().items()):
            topics.append(_topic(name, ErrorCode.NONE, count, node, offline))
    else:
        for name in names:
            if validate_topic_name(name) is not None:
                topics.append(_topic(name, ErrorCode.INVALID_TOPIC_EXCEPTION, 0, node, offline))
                continue
            known = partition_count(broker, name)
            if known is None:
                error, count = ensure_topic(broker, name, allow_auto_create=allow_auto)
            else:
                error, count = ErrorCode.NONE, known
            topics.append(_topic(name, error, count, node, offline))
    return ctx.response(
        throttle_time_ms=0,
        brokers=[_Broker(node_id=node, host=broker.advertised_host, port=broker.advertised_port,
                         rack=None)],
        cluster_id=broker.config.cluster_id,
        controller_id=node,
        topics=topics,
    )


def _topic(name: str, error: ErrorCode, count: int, node: int,
           offline: Container[tuple[str, int]]) -> Struct:
    partitions = []
    for p in range(count):
        down = (name, p) in offline
        partitions.append(_Partition(
            error_code=ErrorCode.KAFKA_STORAGE_ERROR if down else 0, partition_index=p,
            leader_id=-1 if down else node, leader_epoch=-1, replica_nodes=[node],
            isr_nodes=[] if down else [node], offline_replicas=[node] if down else []))
    return _Topic(error_code=error, name=name, is_internal=False, partitions=partitions)
