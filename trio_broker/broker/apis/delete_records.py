"""DeleteRecords v0-v2: move partitions' log start offsets forward (``kafka-delete-records``).

What Kafka does, on one node: offset -1 means the high watermark; an offset below 0 or above the
high watermark is OFFSET_OUT_OF_RANGE; a topic whose ``cleanup.policy`` lacks ``delete`` is
POLICY_VIOLATION; otherwise the log start offset moves there (never back), readers below it get
OFFSET_OUT_OF_RANGE, ListOffsets EARLIEST answers it, and whole segments below it are removed by
the next retention pass. The answer's low watermark is the new log start offset. The new start
is checkpointed (fsynced) before the answer, off the event loop.
"""

from __future__ import annotations

import logging

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import response_type
from ..coordinator.internal_topics import is_internal
from ..offload import run_io
from ..server import authz
from ..server.bodies import RequestBody, Struct
from ..server.context import HandlerContext, HandlerResult
from ..server.state import BrokerState
from ..storage import Log, StorageError

LOGGER = logging.getLogger(__name__)
HIGH_WATERMARK = -1
_DR = response_type(ApiKey.DeleteRecords)


async def handle_delete_records(ctx: HandlerContext, request: RequestBody) -> HandlerResult:
    asked = [(t.name, p.partition_index, p.offset) for t in request.topics
             for p in t.partitions]
    allowed = authz.topics(ctx, authz.DELETE, {name for name, _, _ in asked})
    done = iter(await run_io(
        _delete, ctx.broker, [entry for entry in asked if entry[0] in allowed]))
    result = _DR.DeleteRecordsTopicResult.DeleteRecordsPartitionResult
    topics: dict[str, list[Struct]] = {}
    for name, partition, _ in asked:
        error, low = (next(done) if name in allowed
                      else (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1))
        topics.setdefault(name, []).append(result(partition_index=partition,
                                                  low_watermark=low, error_code=error))
    return ctx.response(throttle_time_ms=0, topics=[
        _DR.DeleteRecordsTopicResult(name=name, partitions=parts)
        for name, parts in topics.items()])


def _delete(broker: BrokerState, asked: list[tuple[str, int, int]]) -> list[tuple[int, int]]:
    return [_delete_one(broker, *entry) for entry in asked]


def _delete_one(broker: BrokerState, topic: str, partition: int,
                offset: int) -> tuple[int, int]:
    """(error code, low watermark) of one partition."""
    if is_internal(topic):  # Kafka's ReplicaManager.deleteRecords refuses these first
        return ErrorCode.INVALID_TOPIC_EXCEPTION, -1
    log: Log | None = broker.logs.get_log(topic, partition)
    if log is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
    if "delete" not in log.config.cleanup_policy.split(","):
        return ErrorCode.POLICY_VIOLATION, -1
    target = log.high_watermark if offset == HIGH_WATERMARK else offset
    try:
        low = broker.logs.delete_records(log, target)
    except StorageError as exc:
        if exc.error_code != ErrorCode.OFFSET_OUT_OF_RANGE:
            LOGGER.error("DeleteRecords on %s failed: %s", log.name, exc)
        return exc.error_code, -1
    except OSError as exc:  # the checkpoint could not be written
        LOGGER.error("DeleteRecords on %s: checkpointing the log start failed: %s", log.name,
                     exc)
        return ErrorCode.KAFKA_STORAGE_ERROR, -1
    LOGGER.info("DeleteRecords moved the log start offset of %s to %d", log.name, low)
    return ErrorCode.NONE, low


__all__ = ["handle_delete_records"]
