"""Topic administration: CreateTopics (v0-7), DeleteTopics (v0-6), CreatePartitions (v0-3).

Why replication is at most the number of brokers: a single broker holds the only replica (a test
cluster of N nodes, N: ``server/cluster_model.py``), so a request for more is
INVALID_REPLICATION_FACTOR, as Kafka answers when too few brokers exist. The checks, their order
and their messages are a KRaft controller's. The config APIs (DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs) are in ``configs.py``; CreateTopics v5+ describes the new topic's
configs the way DescribeConfigs does (``config.describe``).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Container

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import response_type
from ..config.describe import Sources, describe_topic
from ..config.keys import NO_EFFECT, no_effect_topic_keys
from ..offload import run_io
from ..server import authz
from ..server.bodies import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    Struct,
)
from ..server.context import HandlerContext, HandlerResult
from ..server.state import BrokerState, TopicChange
from ..storage import StorageError

LOGGER = logging.getLogger(__name__)

# --- CreateTopics ----------------------------------------------------------------------------

_CT = response_type(ApiKey.CreateTopics)

#: Partitions one topic may have. Each holds an open file (its active segment's log:
#: storage.md, "Open files") and some memory, and Metadata lists every one, so a request for
#: 2**31-1 partitions must fail fast instead of exhausting the broker.
MAX_PARTITIONS_PER_TOPIC = 10_000



async def handle_create_topics(ctx: HandlerContext, request: CreateTopicsRequest) -> HandlerResult:
    """CreateTopics v0-v7, as a KRaft controller answers (v5+ with the new topic's configs and
    counts, v7 with its id; ``validate_only`` from v1 answers the same without creating)."""
    broker = ctx.broker
    counts = Counter(t.name for t in request.topics)
    validate_only = ctx.version >= 1 and request.validate_only
    results = []
    for name in counts:  # each name answered once, in the order first asked
        if counts[name] > 1:
            results.append(_CT.CreatableTopicResult(
                name=name, topic_id=None, error_code=ErrorCode.INVALID_REQUEST,
                error_message="Duplicate topic name.", configs=[]))
            continue
        if not authz.may_create_topic(ctx, name):
            results.append(_CT.CreatableTopicResult(
                name=name, topic_id=None, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                error_message=None, configs=[]))
            continue
        [topic] = (t for t in request.topics if t.name == name)
        results.append(await _create_one(broker, topic, validate_only))
    return ctx.response(throttle_time_ms=0, topics=results)


async def _create_one(broker: BrokerState, t: Struct, validate_only: bool) -> Struct:
    def failed(error: int, message: str | None) -> Struct:
        return _CT.CreatableTopicResult(name=t.name, topic_id=None, error_code=error,
                                        error_message=message, configs=[])

    configs: dict[str, str] = {}
    for c in t.configs:
        if c.value is None:
            return failed(ErrorCode.INVALID_CONFIG,
                          f"Null value not supported for topic config {c.name}")
        configs[c.name] = c.value
    try:  # Kafka's order: the name, an existing topic, the configs, then the partitions
        broker.logs.create_topic(t.name, 1, configs, validate_only=True)
    except StorageError as exc:
        return failed(exc.error_code, str(exc))
    error, message, partitions = _partition_count(broker, t)
    if error:
        return failed(error, message)
    topic_id = None  # validate_only: no topic, no id (Kafka's zero uuid on the wire)
    if not validate_only:
        try:
            # its fsyncs (milliseconds) run off the event loop
            topic_id = await run_io(broker.logs.create_topic, t.name, partitions, configs)
        except StorageError as exc:
            return failed(exc.error_code, str(exc))
        broker.topics_changed(TopicChange(t.name, 0, partitions))
        no_effect = no_effect_topic_keys(configs)
        if no_effect:
            LOGGER.info("%s (topic %s): %s", NO_EFFECT, t.name, ", ".join(no_effect))
    rf = _replication_factor(broker, t)
    if not validate_only:
        broker.cluster.set_replication(t.name, rf)
        for a in t.assignments or ():
            broker.cluster.assign(t.name, a.partition_index, list(a.broker_ids))
    return _CT.CreatableTopicResult(
        name=t.name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None,
        topic_config_error_code=ErrorCode.NONE, num_partitions=partitions, replication_factor=rf,
        configs=[_CT.CreatableTopicResult.CreatableTopicConfigs(
            name=name, value=value, read_only=False, config_source=source, is_sensitive=False)
            for name, value, source in _effective_topic_configs(broker, configs)])


def _partition_count(broker: BrokerState, t: Struct) -> tuple[int, str | None, int]:
    """(error, message, partitions) of a new topic: Kafka's checks of its assignment, or of
    its partition count and replication factor, on a cluster of this one broker."""
    node = broker.node_id
    if t.assignments:
        if t.replication_factor != -1:
            return (ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, "
                    "but replication factor was not set to -1.", 0)
        if t.num_partitions != -1:
            return (ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, "
                    "but numPartitions was not set to -1.", 0)
        seen: set[int] = set()
        factor: int | None = None  # the first partition's sets the others'
        for a in t.assignments:
            if a.partition_index in seen:
                return (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Found multiple manual partition "
                        f"assignments for partition {a.partition_index}", 0)
            seen.add(a.partition_index)
            problem = (replica_assignment_problem(list(a.broker_ids), node,
                                                  registered=broker.cluster.nodes,
                                                  replication_factor=factor)
                       or all_fenced_problem(broker, list(a.broker_ids), a.partition_index))
            if problem:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem, 0
            factor = len(a.broker_ids)
        if seen != set(range(len(seen))):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "partitions should be a consecutive 0-based integer sequence", 0)
        partitions = len(seen)
    else:
        rf, partitions = t.replication_factor, t.num_partitions
        if rf < -1 or rf == 0:
            return (ErrorCode.INVALID_REPLICATION_FACTOR,
                    "Replication factor must be larger than 0, or -1 to use the default value.",
                    0)
        if partitions < -1 or partitions == 0:
            return (ErrorCode.INVALID_PARTITIONS,
                    "Number of partitions was set to an invalid non-positive value.", 0)
        partitions = broker.config.num_partitions if partitions == -1 else partitions
        rf = broker.cluster.default_replication if rf == -1 else rf
        registered = broker.cluster.size
        if rf > registered:
            return (ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"Unable to replicate the partition {rf} time(s): The target replication "
                    f"factor of {rf} cannot be reached because only {registered} broker(s) "
                    "are registered.", 0)
    if partitions > MAX_PARTITIONS_PER_TOPIC:
        return (ErrorCode.INVALID_PARTITIONS,
                f"Number of partitions {partitions} exceeds the limit of "
                f"{MAX_PARTITIONS_PER_TOPIC} per topic.", 0)
    return ErrorCode.NONE, None, partitions


def _replication_factor(broker: BrokerState, t: Struct) -> int:
    """The new topic's replication factor: the assignment's, the request's or the default."""
    if t.assignments:
        return len(t.assignments[0].broker_ids)
    rf: int = t.replication_factor
    return broker.cluster.default_replication if rf == -1 else rf


def replica_assignment_problem(replicas: list[int], node: int, *,
                               registered: Container[int] = (),
                               replication_factor: int | None = None) -> str | None:
    """Kafka's ``validateManualPartitionAssignment``: every replica a registered broker (this
    one, or one of ``registered``), none twice, as many as ``replication_factor`` if given."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    previous = None
    for broker_id in sorted(replicas):
        if broker_id != node and broker_id not in registered:
            return (f"The manual partition assignment includes broker {broker_id}, but no such "
                    "broker is registered.")
        if broker_id == previous:
            return (f"The manual partition assignment includes the broker {broker_id} more "
                    "than once.")
        previous = broker_id
    if replication_factor is not None and len(replicas) != replication_factor:
        return (f"The manual partition assignment includes a partition with {len(replicas)} "
                "replica(s), but this is not consistent with previous partitions, which have "
                f"{replication_factor} replica(s).")
    return None


def all_fenced_problem(broker: BrokerState, replicas: list[int], partition: int) -> str | None:
    """Kafka's refusal of an assignment with no live replica: the partition would have no
    leader (a stopped node of a test cluster is a fenced broker)."""
    nodes = broker.cluster.nodes
    if any(nodes[r].alive for r in replicas if r in nodes):
        return None
    return (f"All brokers specified in the manual partition assignment for partition "
            f"{partition} are fenced or in controlled shutdown.")


def _effective_topic_configs(broker: BrokerState,
                             overrides: dict[str, str]) -> list[tuple[str, str | None, int]]:
    """(name, value, source) of every config of a topic created with ``overrides``, sorted, as
    CreateTopics v5+ returns them: what DescribeConfigs would show for the new topic."""
    values = broker.logs.default_config.with_overrides(overrides).to_topic_configs()
    return [(e.name, e.value, int(e.source))
            for e in describe_topic(values, overrides, Sources(broker.dynamic_configs), None)]


# --- DeleteTopics ----------------------------------------------------------------------------

_DT = response_type(ApiKey.DeleteTopics)


async def handle_delete_topics(ctx: HandlerContext, request: DeleteTopicsRequest) -> HandlerResult:
    """DeleteTopics v0-v6 (v6 names topics by name or by id), as a KRaft controller answers.

    A topic id of None is Kafka's zero uuid: "no id" (the codec reads and writes it so)."""
    broker = ctx.broker
    v = ctx.version
    asked: list[tuple[str | None, uuid.UUID | None]] = (
        [(t.name, t.topic_id) for t in request.topics] if v >= 6
        else [(name, None) for name in request.topic_names])
    if not broker.config.delete_topic_enable:
        error = ErrorCode.TOPIC_DELETION_DISABLED if v >= 3 else ErrorCode.INVALID_REQUEST
        return ctx.response(throttle_time_ms=0, responses=[
            _DT.DeletableTopicResult(name=name, topic_id=tid, error_code=error,
                                     error_message="Topic deletion is disabled.")
            for name, tid in asked])
    results: list[Struct] = []

    def answer(name: str | None, tid: uuid.UUID | None, error: int,
               message: str | None) -> None:
        results.append(_DT.DeletableTopicResult(name=name, topic_id=tid, error_code=error,
                                                error_message=message))

    names = Counter(name for name, tid in asked if name is not None and tid is None)
    ids = Counter(tid for name, tid in asked if name is None and tid is not None)
    targets: dict[str, uuid.UUID] = {}  # what to delete: name -> id
    for name, tid in asked:
        if name is None and tid is None:
            answer(None, None, ErrorCode.INVALID_REQUEST,
                   "Neither topic name nor id were specified.")
        elif name is not None and tid is not None:
            answer(name, tid, ErrorCode.INVALID_REQUEST,
                   "You may not specify both topic name and topic id.")
        elif name is not None and names[name] != 1:
            if names[name] > 1:  # answered once, then marked
                answer(name, None, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
                names[name] = 0
        elif tid is not None and ids[tid] != 1:
            if ids[tid] > 1:
                answer(None, tid, ErrorCode.INVALID_REQUEST, "Duplicate topic id.")
                ids[tid] = 0
        elif tid is not None:
            found = broker.logs.topic_name(tid)
            if found is None:
                answer(None, tid, ErrorCode.UNKNOWN_TOPIC_ID,
                       "This server does not host this topic ID.")
            elif found in targets:
                answer(found, tid, ErrorCode.INVALID_REQUEST,
                       "The provided topic name maps to an ID that was already supplied.")
            else:
                targets[found] = tid
        else:
            assert name is not None
            found_id = broker.logs.topic_id(name)
            if not authz.topic(ctx, authz.DELETE, name):
                answer(name, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
            elif found_id is None:
                answer(name, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       "This server does not host this topic-partition.")
            elif name in targets:
                answer(name, found_id, ErrorCode.INVALID_REQUEST,
                       "The provided topic name maps to an ID that was already supplied.")
            else:
                targets[name] = found_id
    for name, tid in targets.items():
        count = broker.logs.topics().get(name)
        if not authz.topic(ctx, authz.DELETE, name):  # named by id
            answer(None, tid, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
            continue
        if count is None:  # deleted meanwhile by another request
            answer(name, tid, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                   "This server does not host this topic-partition.")
            continue
        try:
            await run_io(broker.logs.delete_topic, name)
        except StorageError as exc:
            answer(name, tid, exc.error_code, str(exc))
        else:
            broker.topics_changed(TopicChange(name, count, 0))
            answer(name, tid, ErrorCode.NONE, None)
    return ctx.response(throttle_time_ms=0, responses=results)


# --- CreatePartitions ------------------------------------------------------------------------

_CP = response_type(ApiKey.CreatePartitions)


async def handle_create_partitions(ctx: HandlerContext,
                                   request: CreatePartitionsRequest) -> HandlerResult:
    """CreatePartitions v0-v3: add partitions to existing topics (placed as the cluster places
    them, or on the replicas the request assigns), checked as a KRaft controller checks them."""
    broker = ctx.broker
    counts = Counter(t.name for t in request.topics)
    results = []
    for name in counts:
        error: int
        message: str | None
        if counts[name] > 1:
            error, message = ErrorCode.INVALID_REQUEST, "Duplicate topic name."
        else:
            [t] = (t for t in request.topics if t.name == name)
            error, message = ((ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
                              if not authz.topic(ctx, authz.ALTER, name)
                              else await _add_partitions(broker, t, request.validate_only))
        results.append(_CP.CreatePartitionsTopicResult(name=name, error_code=error,
                                                        error_message=message))
    return ctx.response(throttle_time_ms=0, results=results)


async def _add_partitions(broker: BrokerState, t: Struct, validate_only: bool,
                          ) -> tuple[int, str | None]:
    current = broker.logs.topics().get(t.name)
    if current is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
    if t.count == current:
        return ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s)."
    if t.count < current:
        return (ErrorCode.INVALID_PARTITIONS, f"The topic {t.name} currently has {current} "
                f"partition(s); {t.count} would not be an increase.")
    added = t.count - current
    if t.assignments is not None:
        if len(t.assignments) != added:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Attempted to add {added} additional partition(s), but only "
                    f"{len(t.assignments)} assignment(s) were specified.")
        factor = len(broker.cluster.partition(t.name, 0).replicas)
        for i, a in enumerate(t.assignments):
            problem = (replica_assignment_problem(list(a.broker_ids), broker.node_id,
                                                  registered=broker.cluster.nodes,
                                                  replication_factor=factor)
                       or all_fenced_problem(broker, list(a.broker_ids), current + i))
            if problem:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem
    if t.count > MAX_PARTITIONS_PER_TOPIC:
        return (ErrorCode.INVALID_PARTITIONS, f"Number of partitions {t.count} exceeds the "
                f"limit of {MAX_PARTITIONS_PER_TOPIC} per topic.")
    try:
        await run_io(lambda: broker.logs.add_partitions(t.name, t.count,
                                                         validate_only=validate_only))
    except StorageError as exc:
        return exc.error_code, str(exc)
    if not validate_only:
        broker.topics_changed(TopicChange(t.name, current, t.count))
        for i, a in enumerate(t.assignments or ()):
            broker.cluster.assign(t.name, current + i, list(a.broker_ids))
    return ErrorCode.NONE, None
