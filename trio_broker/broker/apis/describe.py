"""DescribeTopicPartitions v0, DescribeLogDirs v0-v5, DescribeProducers v0: what the admin tools
ask about partitions, their directories and their idempotent producers.

DescribeTopicPartitions (KIP-966) pages through partitions: topics in name order from the
cursor's, at most ``response_partition_limit`` partitions (capped by Kafka's
``max.request.partition.size.limit``, 2000), and a ``next_cursor`` where it stopped. With one
replica there are no eligible leader replicas beyond the leader (empty lists, as Kafka answers).
DescribeLogDirs lists each log dir (absolute path), its partitions' sizes and, from v4, the
file system's total and usable bytes, and from v5 whether the dir is cordoned (never here); an
offline dir answers KAFKA_STORAGE_ERROR. From v2 (the flexible versions) a compacted partition
also carries its cleanable dirty ratio in a tagged field of the project's own (``dirty_ratio``,
tag 9000): no Kafka request carries it, and Kafka's clients skip tags they do not know.
DescribeProducers lists a partition's producer ids with their epoch, last sequence and the
timestamp of their last batch; there are no transactions, so no coordinator epoch and no open
transaction (-1).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Container
from pathlib import Path

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import response_type
from ...protocol.wire import bits_to_int
from ..coordinator.internal_topics import is_internal
from ..offload import run_io
from ..server import authz
from ..server.bodies import (
    DescribeLogDirsRequest,
    DescribeProducersRequest,
    DescribeTopicPartitionsRequest,
    ResponseBody,
    Struct,
)
from ..server.context import HandlerContext, HandlerResult
from ..server.state import BrokerState
from ..storage import Log, LogManager
from ..storage.cleaner_manager import LogCleaner
from .topics import validate_topic_name

#: Kafka's max.request.partition.size.limit default: partitions one answer may describe
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000
#: Kafka's default message of UNKNOWN_TOPIC_OR_PARTITION (``Errors.message()``)
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."

_DTP = response_type(ApiKey.DescribeTopicPartitions)
_DtpTopic = _DTP.DescribeTopicPartitionsResponseTopic
_DtpPartition = _DtpTopic.DescribeTopicPartitionsResponsePartition
_Cursor = _DTP.Cursor
_DLD = response_type(ApiKey.DescribeLogDirs)
_DirResult = _DLD.DescribeLogDirsResult
_DirTopic = _DirResult.DescribeLogDirsTopic
_DirPartition = _DirTopic.DescribeLogDirsPartition
_DP = response_type(ApiKey.DescribeProducers)
_ProdTopic = _DP.TopicResponse
_ProdPartition = _ProdTopic.PartitionResponse
_ProducerState = _ProdPartition.ProducerState


async def handle_describe_topic_partitions(
        ctx: HandlerContext, request: DescribeTopicPartitionsRequest) -> HandlerResult:
    broker = ctx.broker
    cursor = request.cursor
    start_name = cursor.topic_name if cursor is not None else ""
    every = not request.topics
    requested = (sorted(authz.topics(ctx, authz.DESCRIBE, broker.logs.topics())) if every
                 else sorted({t.name for t in request.topics}))
    names = [n for n in requested if n >= start_name]
    if cursor is not None and ((not every and cursor.topic_name not in names)
                               or cursor.partition_index < 0):
        return _dtp_refused(ctx, request)
    remaining = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, request.response_partition_limit), 1)
    topics: list[Struct] = []
    next_cursor = None
    offline = broker.logs.offline_partitions
    for name in names:
        if remaining == 0:
            next_cursor = _Cursor(topic_name=name, partition_index=0)
            break
        ops = bits_to_int(authz.operations(ctx, authz.TOPIC, name))
        if not every and not authz.topic(ctx, authz.DESCRIBE, name):
            topics.append(_DtpTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name,
                                    topic_id=None, is_internal=False, partitions=[],
                                    topic_authorized_operations=ops))
            continue
        count = broker.logs.topics().get(name)
        if count is None:
            error = (ErrorCode.INVALID_TOPIC_EXCEPTION if validate_topic_name(name)
                     else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            topics.append(_DtpTopic(error_code=error, name=name, topic_id=None,
                                    is_internal=False, partitions=[],
                                    topic_authorized_operations=ops))
            continue
        first = cursor.partition_index if cursor is not None and name == start_name else 0
        upper = min(count, first + remaining)
        partitions = [_dtp_partition(broker, name, p, offline) for p in range(first, upper)]
        topics.append(_DtpTopic(error_code=0, name=name,
                                topic_id=broker.logs.topic_id(name),
                                is_internal=is_internal(name), partitions=partitions,
                                topic_authorized_operations=ops))
        if upper < count:
            next_cursor = _Cursor(topic_name=name, partition_index=upper)
            break
        remaining -= len(partitions)
    return ctx.response(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)


def _dtp_partition(broker: BrokerState, name: str, index: int,
                   offline: Container[tuple[str, int]]) -> Struct:
    cluster = broker.cluster
    state = cluster.partition(name, index)  # one node: replicas and ISR [node]
    log = broker.logs.get_log(name, index)
    down = log is None and (name, index) in offline
    return _DtpPartition(
        error_code=0, partition_index=index, leader_id=-1 if down else state.leader,
        leader_epoch=-1 if log is None else log.leader_epoch,
        replica_nodes=list(state.replicas), isr_nodes=[] if down else list(state.isr),
        eligible_leader_replicas=[], last_known_elr=[],
        offline_replicas=(list(state.replicas) if down else
                          [r for r in state.replicas if not cluster.nodes[r].alive]))


def _dtp_refused(ctx: HandlerContext, request: DescribeTopicPartitionsRequest) -> ResponseBody:
    """Kafka's answer to a bad cursor: INVALID_REQUEST for every topic asked for."""
    topics = [_DtpTopic(error_code=ErrorCode.INVALID_REQUEST, name=t.name, topic_id=None,
                        is_internal=False, partitions=[]) for t in request.topics]
    return ctx.response(throttle_time_ms=0, topics=topics, next_cursor=None)


async def handle_describe_log_dirs(ctx: HandlerContext,
                                   request: DescribeLogDirsRequest) -> HandlerResult:
    if not authz.cluster(ctx, authz.DESCRIBE):
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            results=[])
    wanted = None if request.topics is None else {
        (t.topic, p) for t in request.topics for p in t.partitions}
    # sizes and file system figures come from the disk: off the event loop
    results = await run_io(_describe_log_dirs, ctx.broker.logs, wanted,
                           ctx.broker.cleaner, ctx.broker.now_ms())
    return ctx.response(throttle_time_ms=0, error_code=0, results=results)


def _describe_log_dirs(logs: LogManager, wanted: set[tuple[str, int]] | None,
                       cleaner: LogCleaner | None = None, now_ms: int = 0) -> list[Struct]:
    by_dir: dict[str, dict[str, list[Struct]]] = {}
    for log in sorted(logs.all_logs(), key=lambda lg: (lg.topic, lg.partition)):
        log_dir = logs.log_dir_of(log.topic, log.partition)
        if log_dir is None or (wanted is not None and (log.topic, log.partition) not in wanted):
            continue
        ratio = None if cleaner is None else _dirty_ratio(cleaner, log, log_dir, now_ms)
        by_dir.setdefault(os.path.abspath(log_dir), {}).setdefault(log.topic, []).append(
            _DirPartition(partition_index=log.partition, partition_size=log.size_bytes,
                          offset_lag=0, is_future_key=False,
                          dirty_ratio=-1.0 if ratio is None else ratio))
    results = []
    for log_dir in logs.log_dirs:
        path = os.path.abspath(log_dir)
        try:
            if log_dir in logs.offline_dirs:
                raise OSError("offline")
            usage = shutil.disk_usage(path)
        except OSError:
            results.append(_DirResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=path,
                                      topics=[]))
            continue
        topics = [_DirTopic(name=name, partitions=parts)
                  for name, parts in by_dir.get(path, {}).items()]
        # v5 (KIP-1066): this broker has no cordoned log dirs (a single dir per broker takes
        # every new partition), which Kafka answers as is_cordoned false
        results.append(_DirResult(error_code=0, log_dir=path, topics=topics,
                                  total_bytes=usage.total, usable_bytes=usage.free,
                                  is_cordoned=False))
    return results


def _dirty_ratio(cleaner: LogCleaner, log: Log, log_dir: Path, now_ms: int) -> float | None:
    try:
        return cleaner.dirty_ratio(log, log_dir, now_ms)
    except Exception:  # a log closed meanwhile: described without a ratio
        return None


async def handle_describe_producers(ctx: HandlerContext,
                                    request: DescribeProducersRequest) -> HandlerResult:
    logs = ctx.broker.logs
    topics = []
    for t in request.topics:
        invalid = validate_topic_name(t.name)
        known = logs.topics().get(t.name)
        parts = []
        readable = authz.topic(ctx, authz.READ, t.name)
        for index in t.partition_indexes:
            if not readable:
                parts.append(_ProdPartition(partition_index=index,
                                            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if invalid is not None:
                parts.append(_ProdPartition(partition_index=index, error_message=invalid,
                                            error_code=ErrorCode.INVALID_TOPIC_EXCEPTION))
                continue
            if known is None:
                parts.append(_ProdPartition(partition_index=index,
                                            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                            error_message=UNKNOWN_TOPIC_MESSAGE))
                continue
            log = logs.get_log(t.name, index)
            if log is None:
                offline = (t.name, index) in logs.offline_partitions
                parts.append(_ProdPartition(partition_index=index, error_code=(
                    ErrorCode.KAFKA_STORAGE_ERROR if offline
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
                continue
            producers = [_ProducerState(producer_id=s.producer_id, producer_epoch=s.producer_epoch,
                                        last_sequence=s.last_sequence,
                                        last_timestamp=s.last_timestamp,
                                        coordinator_epoch=s.coordinator_epoch,
                                        current_txn_start_offset=s.current_txn_start_offset)
                         for s in log.active_producers()]
            parts.append(_ProdPartition(partition_index=index, error_code=0,
                                        active_producers=producers))
        topics.append(_ProdTopic(name=t.name, partitions=parts))
    return ctx.response(throttle_time_ms=0, topics=topics)
