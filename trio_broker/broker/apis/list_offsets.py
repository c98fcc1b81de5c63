"""ListOffsets v0-v11: offsets by time, and the special timestamps.

Special timestamps, each from the version Kafka allows it (an earlier version, or an unknown
negative timestamp, is UNSUPPORTED_VERSION for that partition): -1 latest (v0+; the high
watermark, or the last stable offset for ``read_committed``, v2+), -2 earliest (v0+), -3 the
offset of the record with the largest timestamp (v7+, KIP-734), -4 earliest local (v8+; the log
start, as there is no tiered storage), -5 latest tiered (v9+) and -6 earliest pending upload
(v11+, KIP-1023): offset -1, as a broker without remote storage answers. A time >= 0 finds
the first record at or after it (offset -1 if none).

v0 answers with up to ``max_num_offsets`` segment start offsets by file time (Kafka's old
``legacyFetchOffsetsBefore``); v4+ takes ``current_leader_epoch`` (FENCED/UNKNOWN_LEADER_EPOCH)
and returns the leader epoch of the offset found; v10's ``timeout_ms`` bounds remote-storage
lookups, which never happen here. A partition named twice in a v1+ request is INVALID_REQUEST.
"""

from __future__ import annotations

from collections import Counter

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import response_type
from ..server import authz
from ..server.bodies import ListOffsetsRequest, Struct
from ..server.context import HandlerContext, HandlerResult
from ..storage import StorageError
from ..storage.lookups import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)
from .leader_epochs import check_leader_epoch

_R = response_type(ApiKey.ListOffsets)
_TopicResp = _R.ListOffsetsTopicResponse
_PartResp = _TopicResp.ListOffsetsPartitionResponse

LATEST = LATEST_TIMESTAMP
EARLIEST = EARLIEST_TIMESTAMP
READ_COMMITTED = 1
#: special timestamp -> the first version that may ask for it (Kafka's table)
_FIRST_VERSION = {LATEST_TIMESTAMP: 0, EARLIEST_TIMESTAMP: 0, MAX_TIMESTAMP: 7,
                  EARLIEST_LOCAL_TIMESTAMP: 8, LATEST_TIERED_TIMESTAMP: 9,
                  EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11}


async def handle_list_offsets(ctx: HandlerContext, request: ListOffsetsRequest) -> HandlerResult:
    v = ctx.version
    seen = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    topics = []
    for t in request.topics:
        parts = []
        described = authz.topic(ctx, authz.DESCRIBE, t.name)
        for p in t.partitions:
            if not described:
                parts.append(_error(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif v >= 1 and seen[t.name, p.partition_index] > 1:
                parts.append(_error(p.partition_index, ErrorCode.INVALID_REQUEST))
            elif p.timestamp < 0 and v < _FIRST_VERSION.get(p.timestamp, 99):
                parts.append(_error(p.partition_index, ErrorCode.UNSUPPORTED_VERSION))
            elif v == 0:
                parts.append(_legacy(ctx, t.name, p))
            else:
                parts.append(_lookup(ctx, t.name, p, committed=(
                    request.isolation_level == READ_COMMITTED)))
        topics.append(_TopicResp(name=t.name, partitions=parts))
    return ctx.response(throttle_time_ms=0, topics=topics)


def _error(index: int, error: int) -> Struct:
    return _PartResp(partition_index=index, error_code=error, timestamp=-1, offset=-1)


def _missing(ctx: HandlerContext, topic: str, index: int) -> int:
    if (topic, index) in ctx.broker.logs.offline_partitions:
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _lookup(ctx: HandlerContext, topic: str, p: Struct, *, committed: bool) -> Struct:
    log = ctx.broker.logs.get_log(topic, p.partition_index)
    if log is None:
        return _error(p.partition_index, _missing(ctx, topic, p.partition_index))
    error = (check_leader_epoch(log, p.current_leader_epoch)
             or ctx.broker.cluster.leader_error(ctx.broker.node_id, topic, p.partition_index))
    if error:
        return _error(p.partition_index, error)
    # a client reads up to the high watermark, or the last stable offset under read_committed
    last_fetchable = log.last_stable_offset if committed else log.high_watermark
    try:
        if p.timestamp == LATEST_TIMESTAMP:
            timestamp, offset, epoch = -1, last_fetchable, log.leader_epoch
        else:
            found = log.fetch_offset_by_timestamp(p.timestamp)
            if found is None or (p.timestamp not in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP)
                                 and found.offset >= last_fetchable):
                return _PartResp(partition_index=p.partition_index, error_code=0, timestamp=-1,
                                 offset=-1)
            timestamp, offset, epoch = found
    except StorageError as exc:
        return _error(p.partition_index, exc.error_code)
    return _PartResp(partition_index=p.partition_index, error_code=0, timestamp=timestamp,
                     offset=offset, leader_epoch=epoch)


def _legacy(ctx: HandlerContext, topic: str, p: Struct) -> Struct:
    """v0: old-style offsets; a consumer never sees one above the high watermark."""
    log = ctx.broker.logs.get_log(topic, p.partition_index)
    if log is None:
        return _PartResp(partition_index=p.partition_index,
                         error_code=_missing(ctx, topic, p.partition_index), old_style_offsets=[])
    try:
        offsets = log.legacy_offsets_before(p.timestamp, p.max_num_offsets, ctx.broker.now_ms())
    except StorageError as exc:
        return _PartResp(partition_index=p.partition_index, error_code=exc.error_code,
                         old_style_offsets=[])
    hw = log.high_watermark
    if any(o > hw for o in offsets):
        offsets = [hw, *(o for o in offsets if o <= hw)]
    return _PartResp(partition_index=p.partition_index, error_code=0, old_style_offsets=offsets)
