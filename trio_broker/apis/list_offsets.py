"""ListOffsets: earliest (-2), latest (-1), or the first offset at or after a timestamp."""

from __future__ import annotations

from ..log import StorageError
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.messages import response_type
from .bodies import ListOffsetsRequest
from .context import HandlerContext, HandlerResult

_R = response_type(ApiKey.ListOffsets)
_TopicResp = _R.ListOffsetsTopicResponse
_PartResp = _TopicResp.ListOffsetsPartitionResponse

LATEST = -1
EARLIEST = -2


async def handle_list_offsets(ctx: HandlerContext, request: ListOffsetsRequest) -> HandlerResult:
    logs = ctx.broker.logs
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            log = logs.get_log(t.name, p.partition_index)
            if log is None:
                parts.append(_PartResp(partition_index=p.partition_index,
                                       error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                       timestamp=-1, offset=-1))
                continue
            error, ts, offset = 0, -1, -1
            try:
                if p.timestamp == LATEST:
                    offset = log.high_watermark
                elif p.timestamp == EARLIEST:
                    offset = log.log_start_offset
                elif p.timestamp < 0:
                    error = ErrorCode.INVALID_REQUEST
                else:
                    found = log.offset_for_timestamp(p.timestamp)
                    if found is not None:
                        offset, ts = found
            except StorageError as exc:
                error = exc.error_code
            parts.append(_PartResp(partition_index=p.partition_index, error_code=error,
                                   timestamp=ts, offset=offset))
        topics.append(_TopicResp(name=t.name, partitions=parts))
    return ctx.response(throttle_time_ms=0, topics=topics)
