"""A whole response that carries one error code, built from the request (Kafka's
``AbstractRequest.getErrorResponse``): for an injected error and for NOT_COORDINATOR.

Why per API: a response names what was asked (topics, partitions, keys) and the client matches
the two, so an error is written where that API's client reads it: per partition for the
partitioned APIs, per key for FindCoordinator v4+, at the top level elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..broker.server.bodies import ResponseBody
from ..broker.server.context import HandlerContext
from ..protocol.api_keys import ApiKey
from ..protocol.messages import response_type
from .fault_state import ERROR_APIS

Builder = Callable[[HandlerContext, Any, int], ResponseBody]


def _produce(ctx: HandlerContext, body: Any, code: int) -> ResponseBody:
    t_cls = response_type(ApiKey.Produce).TopicProduceResponse
    p_cls = t_cls.PartitionProduceResponse
    return ctx.response(throttle_time_ms=0, responses=[
        t_cls(name=t.name, topic_id=t.topic_id, partition_responses=[
            p_cls(index=p.index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                  log_start_offset=-1, record_errors=[]) for p in t.partition_data])
        for t in body.topic_data])


def _fetch(ctx: HandlerContext, body: Any, code: int) -> ResponseBody:
    t_cls = response_type(ApiKey.Fetch).FetchableTopicResponse
    p_cls = t_cls.PartitionData
    return ctx.response(throttle_time_ms=0, error_code=0, session_id=0, node_endpoints=[],
                        responses=[t_cls(topic=t.topic, topic_id=t.topic_id, partitions=[
                            p_cls(partition_index=p.partition, error_code=code,
                                  high_watermark=-1, last_stable_offset=-1,
                                  log_start_offset=-1, aborted_transactions=[],
                                  preferred_read_replica=-1, records=b"")
                            for p in t.partitions]) for t in body.topics])


def _list_offsets(ctx: HandlerContext, body: Any, code: int) -> ResponseBody:
    t_cls = response_type(ApiKey.ListOffsets).ListOffsetsTopicResponse
    p_cls = t_cls.ListOffsetsPartitionResponse
    return ctx.response(throttle_time_ms=0, topics=[
        t_cls(name=t.name, partitions=[
            p_cls(partition_index=p.partition_index, error_code=code, timestamp=-1, offset=-1,
                  leader_epoch=-1) for p in t.partitions]) for t in body.topics])


def _offset_commit(api: ApiKey) -> Builder:
    r = response_type(api)
    t_cls = getattr(r, f"{api.name}ResponseTopic")
    p_cls = getattr(t_cls, f"{api.name}ResponsePartition")

    def build(ctx: HandlerContext, body: Any, code: int) -> ResponseBody:
        return ctx.response(throttle_time_ms=0, topics=[
            t_cls(name=t.name, partitions=[
                p_cls(partition_index=p.partition_index, error_code=code)
                for p in t.partitions]) for t in body.topics])

    return build


def _offset_for_leader_epoch(ctx: HandlerContext, body: Any, code: int) -> ResponseBody:
    t_cls = response_type(ApiKey.OffsetForLeaderEpoch).OffsetForLeaderTopicResult
    p_cls = t_cls.EpochEndOffset
    return ctx.response(throttle_time_ms=0, topics=[
        t_cls(topic=t.topic, partitions=[
            p_cls(partition=p.partition, error_code=code, leader_epoch=-1, end_offset=-1)
            for p in t.partitions]) for t in body.topics])


def _find_coordinator(ctx: HandlerContext, body: Any, code: int) -> ResponseBody:
    if ctx.version >= 4:
        cls = response_type(ApiKey.FindCoordinator).Coordinator
        return ctx.response(throttle_time_ms=0, coordinators=[
            cls(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=None)
            for key in body.coordinator_keys])
    return ctx.response(throttle_time_ms=0, error_code=code, error_message=None, node_id=-1,
                        host="", port=-1)


def _offset_fetch(ctx: HandlerContext, body: Any, code: int) -> ResponseBody:
    if ctx.version >= 8:
        g_cls = response_type(ApiKey.OffsetFetch).OffsetFetchResponseGroup
        return ctx.response(throttle_time_ms=0, groups=[
            g_cls(group_id=g.group_id, topics=[], error_code=code) for g in body.groups])
    if ctx.version >= 2:
        return ctx.response(throttle_time_ms=0, topics=[], error_code=code)
    t_cls = response_type(ApiKey.OffsetFetch).OffsetFetchResponseTopic
    p_cls = t_cls.OffsetFetchResponsePartition
    return ctx.response(topics=[t_cls(name=t.name, partitions=[
        p_cls(partition_index=p, committed_offset=-1, metadata="", error_code=code)
        for p in t.partition_indexes]) for t in body.topics or []])


def _add_partitions_to_txn(ctx: HandlerContext, body: Any, code: int) -> ResponseBody:
    t_cls = response_type(ApiKey.AddPartitionsToTxn).AddPartitionsToTxnResult
    topic_cls = t_cls.AddPartitionsToTxnTopicResult
    p_cls = topic_cls.AddPartitionsToTxnPartitionResult

    def topics(asked: Any) -> list[Any]:
        return [topic_cls(name=t.name, results_by_partition=[
            p_cls(partition_index=p, partition_error_code=code) for p in t.partitions])
            for t in asked]

    if ctx.version < 4:
        return ctx.response(throttle_time_ms=0,
                            results_by_topic_v3_and_below=topics(body.v3_and_below_topics))
    return ctx.response(throttle_time_ms=0, error_code=0, results_by_transaction=[
        t_cls(transactional_id=t.transactional_id, topic_results=topics(t.topics))
        for t in body.transactions])


def _top_level(ctx: HandlerContext, body: Any, code: int) -> ResponseBody:
    return ctx.response(throttle_time_ms=0, error_code=code)


_BUILDERS: dict[int, Builder] = {
    ApiKey.Produce: _produce,
    ApiKey.Fetch: _fetch,
    ApiKey.ListOffsets: _list_offsets,
    ApiKey.OffsetCommit: _offset_commit(ApiKey.OffsetCommit),
    ApiKey.TxnOffsetCommit: _offset_commit(ApiKey.TxnOffsetCommit),
    ApiKey.OffsetForLeaderEpoch: _offset_for_leader_epoch,
    ApiKey.FindCoordinator: _find_coordinator,
    ApiKey.OffsetFetch: _offset_fetch,
    ApiKey.AddPartitionsToTxn: _add_partitions_to_txn,
}
def error_response(ctx: HandlerContext, body: Any, code: int) -> ResponseBody:
    """The response to ``body`` with ``code`` wherever that API's client reads its error."""
    return _BUILDERS.get(ctx.header.api_key, _top_level)(ctx, body, code)


def _check_builders() -> None:
    extra = set(_BUILDERS) - ERROR_APIS
    if extra:
        raise ValueError(f"builders for APIs not in ERROR_APIS: {extra}")


_check_builders()
