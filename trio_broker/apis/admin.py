"""Topic administration: CreateTopics, DeleteTopics, CreatePartitions.

Why replication is fixed at 1: a single broker holds the only replica, so a request for more is
INVALID_REPLICATION_FACTOR, as Kafka answers when too few brokers exist. The config APIs
(DescribeConfigs, AlterConfigs, IncrementalAlterConfigs) are in ``configs.py``.
"""

from __future__ import annotations

import logging
from collections import Counter

import trio

from ..log import StorageError
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.messages import response_type
from .bodies import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    Struct,
)
from .context import HandlerContext, HandlerResult
from .state import BrokerState, TopicChange

LOGGER = logging.getLogger(__name__)

# --- CreateTopics ----------------------------------------------------------------------------

_CT = response_type(ApiKey.CreateTopics)

#: Partitions one topic may have. Each costs three open files and some memory, and Metadata
#: lists every one, so a request for 2**31-1 partitions must fail fast instead of exhausting
#: the broker.
MAX_PARTITIONS_PER_TOPIC = 10_000


async def handle_create_topics(ctx: HandlerContext, request: CreateTopicsRequest) -> HandlerResult:
    broker = ctx.broker
    counts = Counter(t.name for t in request.topics)
    results = []
    for t in request.topics:
        error, message = _create_one(broker, t, request.validate_only, counts[t.name] > 1,
                                     ctx.version)
        results.append(_CT.CreatableTopicResult(name=t.name, error_code=error,
                                                error_message=message))
    return ctx.response(throttle_time_ms=0, topics=results)


def _create_one(broker: BrokerState, t: Struct, validate_only: bool, duplicated: bool,
                version: int) -> tuple[int, str | None]:
    if duplicated:
        return ErrorCode.INVALID_REQUEST, f"Create topics request included {t.name!r} twice."
    node = broker.node_id
    partitions = t.num_partitions
    if t.assignments:
        if partitions != -1:
            return (ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set.")
        for a in t.assignments:
            if list(a.broker_ids) != [node]:
                return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Replica assignment {list(a.broker_ids)} names brokers other than {node}.")
        partitions = len(t.assignments)
    if partitions == -1:
        partitions = broker.config.num_partitions
    rf = t.replication_factor
    if rf == -1 and not t.assignments:
        rf = broker.config.default_replication_factor
    if not t.assignments and rf != 1:
        return (ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {rf} larger than available brokers: 1." if rf > 1 else
                "Replication factor must be larger than 0, or -1 to use the default value.")
    if partitions < 1:
        return (ErrorCode.INVALID_PARTITIONS,
                "Number of partitions must be larger than 0, or -1 to use the default value.")
    if partitions > MAX_PARTITIONS_PER_TOPIC:
        return (ErrorCode.INVALID_PARTITIONS,
                f"Number of partitions {partitions} exceeds the limit of "
                f"{MAX_PARTITIONS_PER_TOPIC} per topic.")
    configs = {}
    for c in t.configs:
        if c.value is None:
            return ErrorCode.INVALID_CONFIG, f"Null value not supported for topic config {c.name}"
        configs[c.name] = c.value
    try:
        broker.logs.create_topic(t.name, partitions, configs, validate_only=validate_only)
    except StorageError as exc:
        return exc.error_code, str(exc)
    if not validate_only:
        broker.topics_changed(TopicChange(t.name, 0, partitions))
    return 0, None


# --- DeleteTopics ----------------------------------------------------------------------------

_DT = response_type(ApiKey.DeleteTopics)


async def handle_delete_topics(ctx: HandlerContext, request: DeleteTopicsRequest) -> HandlerResult:
    broker = ctx.broker
    results = []
    for name in request.topic_names:
        error = 0
        if not broker.config.delete_topic_enable:
            error = ErrorCode.TOPIC_DELETION_DISABLED
        elif name not in broker.logs.topics():
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            count = broker.logs.topics()[name]
            try:
                await trio.to_thread.run_sync(broker.logs.delete_topic, name)
            except StorageError as exc:
                error = exc.error_code
            else:
                broker.topics_changed(TopicChange(name, count, 0))
        results.append(_DT.DeletableTopicResult(name=name, error_code=error))
    return ctx.response(throttle_time_ms=0, responses=results)


# --- CreatePartitions ------------------------------------------------------------------------

_CP = response_type(ApiKey.CreatePartitions)


async def handle_create_partitions(ctx: HandlerContext,
                                   request: CreatePartitionsRequest) -> HandlerResult:
    broker = ctx.broker
    results = []
    for t in request.topics:
        error, message = 0, None
        if t.name not in broker.logs.topics():
            error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {t.name!r} not found."
        elif t.assignments and any(list(a.broker_ids) != [broker.node_id]
                                   for a in t.assignments):
            error, message = ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Unknown broker in assignment."
        elif t.count > MAX_PARTITIONS_PER_TOPIC:
            error, message = (ErrorCode.INVALID_PARTITIONS,
                              f"Number of partitions {t.count} exceeds the limit of "
                              f"{MAX_PARTITIONS_PER_TOPIC} per topic.")
        else:
            previous = broker.logs.topics()[t.name]
            try:
                broker.logs.add_partitions(t.name, t.count, validate_only=request.validate_only)
            except StorageError as exc:
                error, message = exc.error_code, str(exc)
            else:
                if not request.validate_only:
                    broker.topics_changed(TopicChange(t.name, previous, t.count))
        results.append(_CP.CreatePartitionsTopicResult(name=t.name, error_code=error,
                                                        error_message=message))
    return ctx.response(throttle_time_ms=0, results=results)
