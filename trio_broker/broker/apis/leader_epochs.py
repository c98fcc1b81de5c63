"""OffsetForLeaderEpoch v0-v4, and the leader-epoch check Fetch and ListOffsets share.

Why: after a leader change or a restart, a consumer holding a position read under leader epoch E
asks where E ended here (KIP-320). If that is before its position, the log it read from was
truncated and it truncates too, instead of skipping ahead silently. The answer is Kafka's
``LeaderEpochFileCache.endOffsetFor`` over the partition's epochs (``storage/leader_epoch.py``):
the end offset of the largest epoch <= E, the log end for the current epoch, and -1/-1 (with no
error) for an epoch this log cannot place.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import response_type
from ..server import authz
from ..server.bodies import OffsetForLeaderEpochRequest
from ..server.context import HandlerContext, HandlerResult
from ..storage import Log

_R = response_type(ApiKey.OffsetForLeaderEpoch)
_TopicResp = _R.OffsetForLeaderTopicResult
_PartResp = _TopicResp.EpochEndOffset
#: "no epoch given" in a request's current_leader_epoch (``RecordBatch.NO_PARTITION_LEADER_EPOCH``)
NO_EPOCH = -1


def check_leader_epoch(log: Log, requested: int) -> int:
    """Kafka's ``Partition.checkCurrentLeaderEpoch``: 0, or why a request naming ``requested``
    as the current leader epoch is refused (an older one is fenced, a newer one unknown)."""
    if requested == NO_EPOCH:
        return 0
    current = log.leader_epoch
    if requested < current:
        return ErrorCode.FENCED_LEADER_EPOCH
    if requested > current:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return 0


async def handle_offset_for_leader_epoch(ctx: HandlerContext,
                                         request: OffsetForLeaderEpochRequest) -> HandlerResult:
    logs = ctx.broker.logs
    topics = []
    for t in request.topics:
        parts = []
        described = authz.topic(ctx, authz.DESCRIBE, t.topic)
        for p in t.partitions:
            log = logs.get_log(t.topic, p.partition)
            if not described:
                parts.append(_PartResp(partition=p.partition,
                                       error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if log is None:
                offline = (t.topic, p.partition) in logs.offline_partitions
                missing = (ErrorCode.KAFKA_STORAGE_ERROR if offline
                           else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                parts.append(_PartResp(partition=p.partition, error_code=missing))
                continue
            error = (check_leader_epoch(log, p.current_leader_epoch)
                     or ctx.broker.cluster.leader_error(ctx.broker.node_id, t.topic,
                                                        p.partition))
            if error:
                parts.append(_PartResp(partition=p.partition, error_code=error))
                continue
            epoch, end_offset = log.end_offset_for_epoch(p.leader_epoch)
            parts.append(_PartResp(partition=p.partition, error_code=0, leader_epoch=epoch,
                                   end_offset=end_offset))
        topics.append(_TopicResp(topic=t.topic, partitions=parts))
    return ctx.response(throttle_time_ms=0, topics=topics)
