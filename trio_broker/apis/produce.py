"""Produce: validate each partition's one batch as bytes, append it, acknowledge.

Why bytes only: the batch header and its CRC-32C are all the broker needs to check; records are
never decoded here, compressed batches are stored as they came, and the only rewrites are the
base offset and leader epoch (outside the CRC) and, under LogAppendTime, the max timestamp.
"""

from __future__ import annotations

import logging

import trio

from ..log import Log, LogAppendInfo, StorageError
from ..protocol.api_keys import ApiKey
from ..protocol.batch import validate_batch
from ..protocol.compression import Compression
from ..protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)
from ..protocol.messages import response_type
from .bodies import ProduceRequest, Struct
from .context import CloseConnection, HandlerContext, HandlerResult
from .topics import validate_topic_name

LOGGER = logging.getLogger(__name__)

_R = response_type(ApiKey.Produce)
_TopicResp = _R.TopicProduceResponse
_PartResp = _TopicResp.PartitionProduceResponse


def _part(index: int, error: int, base_offset: int = -1, append_time: int = -1,
          log_start: int = -1) -> Struct:
    return _PartResp(index=index, error_code=error, base_offset=base_offset,
                     log_append_time_ms=append_time, log_start_offset=log_start)


async def handle_produce(ctx: HandlerContext, request: ProduceRequest) -> HandlerResult:
    broker = ctx.broker
    acks = request.acks
    logs = broker.logs
    results = []
    to_flush: list[tuple[Log, list[Struct], int]] = []
    now_ms = broker.now_ms()
    for topic in request.topic_data:
        parts = []
        for pd in topic.partition_data:
            if acks not in (0, 1, -1):
                parts.append(_part(pd.index, ErrorCode.INVALID_REQUIRED_ACKS))
                continue
            if request.transactional_id is not None:
                parts.append(_part(pd.index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
                continue
            log = logs.get_log(topic.name, pd.index)
            if log is None:
                offline = (topic.name, pd.index) in logs.offline_partitions
                missing = (ErrorCode.KAFKA_STORAGE_ERROR if offline else
                         ErrorCode.INVALID_TOPIC_EXCEPTION if validate_topic_name(topic.name)
                         else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                parts.append(_part(pd.index, missing))
                continue
            error, info = _append(ctx, log, pd.records, now_ms)
            if info is None:
                parts.append(_part(pd.index, error))
                continue
            parts.append(_part(pd.index, 0, info.first_offset, info.log_append_time_ms,
                               info.log_start_offset))
            if not info.duplicate:
                broker.fetch_purgatory.notify((topic.name, pd.index), info.size)
            # A duplicate too: its original may still be waiting for its fsync on another
            # connection, and the retry must not be acknowledged before the original would be.
            if log.needs_flush():
                to_flush.append((log, parts, len(parts) - 1))
        results.append(_TopicResp(name=topic.name, partition_responses=parts))
    for log, parts, i in to_flush:
        try:
            await trio.to_thread.run_sync(log.flush)
        except StorageError as exc:
            LOGGER.error("flush of %s failed: %s", log.name, exc)
            parts[i] = _part(parts[i].index, ErrorCode.KAFKA_STORAGE_ERROR)
    if acks == 0:
        if any(p.error_code for t in results for p in t.partition_responses):
            return CloseConnection("acks=0 produce failed")
        return None
    return ctx.response(responses=results, throttle_time_ms=0)


def _append(ctx: HandlerContext, log: Log, records: bytes | None,
            now_ms: int) -> tuple[int, LogAppendInfo | None]:
    if not records:
        return ErrorCode.INVALID_RECORD, None
    try:
        header = validate_batch(records, max_message_bytes=log.config.max_message_bytes)
        if header.compression == Compression.ZSTD and ctx.version < 7:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, None
        if header.is_transactional:
            return ErrorCode.INVALID_TXN_STATE, None
        info = log.append(records, header, now_ms=now_ms)  # bytes: the log copies the header
    except CorruptRecordError as exc:
        LOGGER.debug("corrupt batch for %s: %s", log.name, exc)
        return ErrorCode.CORRUPT_MESSAGE, None
    except InvalidRecordError as exc:
        LOGGER.debug("invalid batch for %s: %s", log.name, exc)
        return ErrorCode.INVALID_RECORD, None
    except RecordTooLargeError:
        return ErrorCode.MESSAGE_TOO_LARGE, None
    except UnsupportedCompressionError:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, None
    except StorageError as exc:
        if exc.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
            LOGGER.error("append to %s failed: %s", log.name, exc)
        return exc.error_code, None
    return 0, info
