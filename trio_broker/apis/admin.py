"""Topic administration: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
AlterConfigs.

Why replication is fixed at 1: a single broker holds the only replica, so a request for more is
INVALID_REPLICATION_FACTOR, as Kafka answers when too few brokers exist. Config sources follow
Kafka: 1 topic override, 4 static broker config, 5 default.
"""

from __future__ import annotations

import logging
from collections import Counter

import attrs
import trio

from ..config import SENSITIVE_KEYS, describe_keys
from ..log import TOPIC_CONFIG_KEYS, StorageError, log_config_from
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.messages import response_type
from .bodies import (
    AlterConfigsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    Struct,
)
from .context import HandlerContext, HandlerResult
from .state import BrokerState, TopicChange

LOGGER = logging.getLogger(__name__)

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
SOURCE_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

# topic config -> the broker key that supplies its default
_BROKER_SYNONYM = {
    "segment.bytes": "log.segment.bytes", "segment.ms": "log.roll.ms",
    "retention.ms": "log.retention.ms", "retention.bytes": "log.retention.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "flush.messages": "log.flush.interval.messages", "flush.ms": "log.flush.interval.ms",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type", "min.insync.replicas": "min.insync.replicas",
}


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


# --- DescribeConfigs -------------------------------------------------------------------------

_DC = response_type(ApiKey.DescribeConfigs)
_DCResult = _DC.DescribeConfigsResult
_DCConfig = _DCResult.DescribeConfigsResourceResult
_DCSyn = _DCConfig.DescribeConfigsSynonym


async def handle_describe_configs(ctx: HandlerContext,
                                  request: DescribeConfigsRequest) -> HandlerResult:
    results = []
    for r in request.resources:
        keys = set(r.configuration_keys) if r.configuration_keys is not None else None
        error, message = 0, None
        configs: list[Struct] = []
        if r.resource_type == RESOURCE_TOPIC:
            error, message, configs = _topic_configs(ctx.broker, r.resource_name, keys,
                                                     request.include_synonyms)
        elif r.resource_type == RESOURCE_BROKER:
            if r.resource_name not in ("", str(ctx.broker.node_id)):
                error, message = ErrorCode.INVALID_REQUEST, f"Unknown broker {r.resource_name!r}"
            else:
                configs = _broker_configs(ctx.broker, keys)
        else:
            error = ErrorCode.INVALID_REQUEST
            message = f"Unsupported resource type {r.resource_type}"
        results.append(_DCResult(error_code=error, error_message=message,
                                 resource_type=r.resource_type,
                                 resource_name=r.resource_name, configs=configs))
    return ctx.response(throttle_time_ms=0, results=results)


def _broker_defaults(broker: BrokerState) -> dict[str, str]:
    """Topic config values implied by the broker's config (before any topic override)."""
    return log_config_from(broker.config).to_topic_configs()


def _topic_configs(broker: BrokerState, name: str, keys: set[str] | None,
                   synonyms: bool) -> tuple[int, str | None, list[Struct]]:
    logs = broker.logs
    if name not in logs.topics():
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name!r} does not exist.", []
    current = logs.topic_config(name).to_topic_configs()
    overrides = logs.topic_overrides(name)
    broker_values = _broker_defaults(broker)
    configs = []
    for key, value in sorted(current.items()):
        if keys is not None and key not in keys:
            continue
        default = TOPIC_CONFIG_KEYS[key][1]
        if key in overrides:
            source = SOURCE_TOPIC
        elif broker_values.get(key) != default:
            source = SOURCE_STATIC_BROKER
        else:
            source = SOURCE_DEFAULT
        syn = []
        if synonyms:
            if key in overrides:
                syn.append(_DCSyn(name=key, value=overrides[key], source=SOURCE_TOPIC))
            if key in _BROKER_SYNONYM:
                bsrc = SOURCE_STATIC_BROKER if broker_values.get(key) != default else SOURCE_DEFAULT
                syn.append(_DCSyn(name=_BROKER_SYNONYM[key], value=broker_values.get(key),
                                  source=bsrc))
        configs.append(_DCConfig(name=key, value=value, read_only=False, config_source=source,
                                 is_sensitive=False, synonyms=syn))
    return 0, None, configs


def _broker_configs(broker: BrokerState, keys: set[str] | None) -> list[Struct]:
    values = attrs.asdict(broker.config)
    defaults = {k: d for k, d, _ in describe_keys()}
    configs = []
    for kafka_key, _default, _doc in describe_keys():
        if keys is not None and kafka_key not in keys:
            continue
        raw = values[kafka_key.replace(".", "_")]
        value = None if raw is None else str(raw).lower() if isinstance(raw, bool) else str(raw)
        source = SOURCE_DEFAULT if (value or "") == defaults[kafka_key] else SOURCE_STATIC_BROKER
        sensitive = kafka_key in SENSITIVE_KEYS
        configs.append(_DCConfig(name=kafka_key, value=None if sensitive else value,
                                 read_only=True, config_source=source, is_sensitive=sensitive,
                                 synonyms=[]))
    return configs


# --- AlterConfigs ----------------------------------------------------------------------------

_AC = response_type(ApiKey.AlterConfigs)


async def handle_alter_configs(ctx: HandlerContext, request: AlterConfigsRequest) -> HandlerResult:
    logs = ctx.broker.logs
    results = []
    for r in request.resources:
        error, message = 0, None
        if r.resource_type != RESOURCE_TOPIC:
            error = ErrorCode.INVALID_REQUEST
            message = "Only topic configs can be altered; broker configs are static."
        elif r.resource_name not in logs.topics():
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            message = f"Topic {r.resource_name!r} does not exist."
        else:
            try:
                logs.alter_topic_config(r.resource_name, {c.name: c.value for c in r.configs},
                                        validate_only=request.validate_only)
            except StorageError as exc:
                error, message = exc.error_code, str(exc)
        results.append(_AC.AlterConfigsResourceResponse(
            error_code=error, error_message=message, resource_type=r.resource_type,
            resource_name=r.resource_name))
    return ctx.response(throttle_time_ms=0, responses=results)
