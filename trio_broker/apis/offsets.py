"""OffsetCommit and OffsetFetch: committed consumer positions.

Why OffsetCommit is deferred: the answer promises durability, so it is sent only after the
coordinator has fsynced the commit's record; the handler returns at once and the coordinator's
writer answers (``Reply``). OffsetFetch reads memory, which only ever holds durable offsets.
"""

from __future__ import annotations

from typing import Any

from ..coordinator import OffsetAndMetadata, OffsetCommitEntry
from ..coordinator.offset_log import TopicPartition
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.messages import ApiMessage, response_type
from .context import HandlerResult, RequestContext
from .groups import Reply, coordinator
from .registry import handler


@handler(ApiKey.OffsetCommit)
async def offset_commit(ctx: RequestContext, request: Any) -> HandlerResult:
    topic_cls = response_type(ApiKey.OffsetCommit).OffsetCommitResponseTopic
    part_cls = topic_cls.OffsetCommitResponsePartition
    # Kafka stores a null metadata string as "" (OffsetAndMetadata.NoMetadata).
    entries = [OffsetCommitEntry(t.name, p.partition_index, p.committed_offset,
                                 p.committed_metadata or "")
               for t in request.topics for p in t.partitions]

    def build(results: dict[TopicPartition, ErrorCode]) -> ApiMessage:
        return ctx.response(throttle_time_ms=0, topics=[
            topic_cls(name=t.name, partitions=[
                part_cls(partition_index=p.partition_index,
                         error_code=results.get((t.name, p.partition_index), ErrorCode.NONE))
                for p in t.partitions])
            for t in request.topics])

    coord = coordinator(ctx)
    if coord is None:
        return build({(e.topic, e.partition): ErrorCode.COORDINATOR_NOT_AVAILABLE
                      for e in entries})
    # Like Kafka, refuse offsets for partitions that do not exist (they could never be read).
    unknown: dict[TopicPartition, ErrorCode] = {}
    if ctx.broker.logs is not None:
        counts = ctx.broker.logs.topics()
        unknown = {(e.topic, e.partition): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                   for e in entries if not 0 <= e.partition < counts.get(e.topic, 0)}
        entries = [e for e in entries if (e.topic, e.partition) not in unknown]
    if not entries:
        return build(unknown)

    def merged(results: dict[TopicPartition, ErrorCode]) -> ApiMessage:
        return build({**results, **unknown})

    reply: Reply[dict[TopicPartition, ErrorCode]] = Reply(ctx, merged)
    coord.commit_offsets(group_id=request.group_id,
                         generation_id=request.generation_id_or_member_epoch,
                         member_id=request.member_id,
                         # now + retention must fit the offsets file's i64 expiry; 2**62 ms
                         # is still forever (a value near 2**63 crashed the commit).
                         retention_time_ms=min(getattr(request, "retention_time_ms", -1), 2**62),
                         offsets=entries, respond=reply)
    return reply.result()


@handler(ApiKey.OffsetFetch)
async def offset_fetch(ctx: RequestContext, request: Any) -> HandlerResult:
    topic_cls = response_type(ApiKey.OffsetFetch).OffsetFetchResponseTopic
    part_cls = topic_cls.OffsetFetchResponsePartition
    coord = coordinator(ctx)
    wanted: list[TopicPartition] | None = None
    if request.topics is not None:
        wanted = [(t.name, p) for t in request.topics for p in t.partition_indexes]
    found: list[tuple[TopicPartition, OffsetAndMetadata | None]] = []
    if coord is None:
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        error, found = coord.fetch_offsets(request.group_id, wanted)
    if error:
        if ctx.version >= 2:
            return ctx.response(throttle_time_ms=0, topics=[], error_code=error)
        # v1 has no top-level error code: every requested partition carries it.
        found = [(tp, None) for tp in wanted or []]
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), om in found:
        by_topic.setdefault(topic, []).append(part_cls(
            partition_index=partition,
            committed_offset=-1 if om is None else om.offset,
            metadata="" if om is None else om.metadata,
            error_code=error))
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE,
                        topics=[topic_cls(name=topic, partitions=parts)
                                for topic, parts in by_topic.items()])
