"""Metadata v0-v13: the live brokers, and each partition's leader, replicas, ISR and offline
replicas as the cluster model has them (``cluster_model.py``; a single broker leads everything).

Per version: v0 reads an empty topic list as "all topics" (v1+: null is all, empty is none); v4
lets the client forbid auto-creation; v7 returns each partition's leader epoch (which clients use
to validate their positions, KIP-320); v8-v10 return the cluster's and v8+ each topic's
authorized operations when asked (every supported operation: there is no authorizer); v10+
returns topic ids, and v12+ looks topics up by id (UNKNOWN_TOPIC_ID, with a null name, for an
unknown one); v13's top-level error code is 0.
"""

from __future__ import annotations

from collections.abc import Container

from ...protocol.api_keys import SUPPORTED_VERSIONS, ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import Encoded, encode_data, make_request, make_response, response_type
from ..coordinator.internal_topics import is_internal
from ..security.acl import CLUSTER_NAME
from ..server import authz
from ..server.bodies import MetadataRequest, ResponseBody, Struct
from ..server.cluster_model import ClusterModel
from ..server.context import HandlerContext, HandlerResult
from ..server.state import BrokerState
from ..storage import LogManager
from .topics import ensure_topic, partition_count, validate_topic_name

_R = response_type(ApiKey.Metadata)
_Broker = _R.MetadataResponseBroker
_Topic = _R.MetadataResponseTopic
_Partition = _Topic.MetadataResponsePartition


async def handle_metadata(ctx: HandlerContext, request: MetadataRequest) -> HandlerResult:
    broker = ctx.broker
    logs = broker.logs
    v = ctx.version
    requested = request.topics
    all_topics = requested is None or (v == 0 and not requested)
    # (the codec reads the all-zero "no id" as None)
    if not all_topics and v < 12 and any(t.name is None or t.topic_id is not None
                                         for t in requested):
        # Kafka: names may only be null, and ids only set, from v12
        return _error_response(ctx, request, ErrorCode.INVALID_REQUEST)
    if (not requested and not all_topics and not broker.quotas.enabled
            and not (8 <= v <= 10 and request.include_cluster_authorized_operations)):
        return no_topics_answer(broker, v, ctx.listener)
    ids = [] if all_topics else [t.topic_id for t in requested if t.topic_id is not None]
    topics: list[Struct] = []
    names: list[str]
    if all_topics:  # only those the principal may describe
        names = sorted(authz.topics(ctx, authz.DESCRIBE, logs.topics()))
    elif ids:  # by id: names in the request are not looked at
        names = []
        for topic_id in dict.fromkeys(ids):
            name = logs.topic_name(topic_id)
            if name is None:
                topics.append(_Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None,
                                     topic_id=topic_id, is_internal=False, partitions=[]))
            else:
                names.append(name)
    else:
        names = list(dict.fromkeys(t.name for t in requested))
    allow_auto = (request.allow_auto_topic_creation if v >= 4 else True) and not ids
    offline = logs.offline_partitions
    for name in names:
        if not all_topics and not authz.topic(ctx, authz.DESCRIBE, name):
            # asked by id: the name is not revealed (Kafka)
            topics.append(_Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                 name=None if ids else name,
                                 topic_id=logs.topic_id(name) if ids else None,
                                 is_internal=False, partitions=[]))
            continue
        if validate_topic_name(name) is not None:
            topics.append(_topic(logs, broker.cluster, name, ErrorCode.INVALID_TOPIC_EXCEPTION,
                                 0, offline))
            continue
        known = partition_count(broker, name)
        if (known is None and not all_topics and allow_auto
                and broker.config.auto_create_topics_enable
                and not authz.may_create_topic(ctx, name)):
            error, count = ErrorCode.TOPIC_AUTHORIZATION_FAILED, 0
        elif known is None and not all_topics:
            error, count = await ensure_topic(broker, name, allow_auto_create=allow_auto)
        else:
            error, count = ErrorCode.NONE, known or 0
        topics.append(_topic(logs, broker.cluster, name, error, count, offline))
    if v >= 8 and request.include_topic_authorized_operations:
        for topic in topics:
            if topic.error_code == 0:
                topic.authorized_operations = authz.operations(ctx, authz.TOPIC, topic.name)
    cluster_ops = (authz.operations(ctx, authz.CLUSTER, CLUSTER_NAME) if 8 <= v <= 10
                   and request.include_cluster_authorized_operations else None)
    return ctx.response(
        throttle_time_ms=0,
        brokers=[_Broker(node_id=i, host=host, port=port, rack=broker.cluster.rack_of(i))
                 for i, host, port in broker.cluster.live_endpoints(ctx.listener)],
        cluster_id=broker.cluster_id,
        controller_id=broker.cluster.controller_id(broker.node_id),
        topics=topics,
        authorized_operations=cluster_ops,
        error_code=0,
    )


#: (version, cluster id, controller, listener, live brokers with their racks) -> the answer naming
#: no topic, encoded
_NO_TOPICS: dict[tuple[object, ...], Encoded] = {}


def no_topics_answer(broker: BrokerState, version: int, listener: str) -> Encoded:
    """The answer to a Metadata request naming no topic (a client's periodic refresh of the
    brokers) that arrived on ``listener``, encoded once per version, cluster state and listener
    (each listener names the brokers by its own endpoints): nothing else goes into it."""
    cluster = broker.cluster
    live = cluster.live_brokers(listener)
    key = (version, broker.cluster_id, cluster.controller_id(broker.node_id), listener, live)
    answer = _NO_TOPICS.get(key)
    if answer is None:
        if len(_NO_TOPICS) >= 64:  # brokers of many tests in one process
            _NO_TOPICS.clear()
        body = make_response(ApiKey.Metadata, version, throttle_time_ms=0, error_code=0,
                             topics=[], cluster_id=key[1], controller_id=key[2],
                             authorized_operations=None,
                             brokers=[_Broker(node_id=i, host=h, port=p, rack=rack)
                                      for i, h, p, rack in live])
        answer = _NO_TOPICS[key] = Encoded(body, version)
    return answer


def refresh_answer(broker: BrokerState, version: int, body: bytes, listener: str,
                   ) -> Encoded | None:
    """The answer to a client's periodic refresh (a Metadata request naming no topic, arrived on
    ``listener``) straight from the request's encoded ``body``, as ``handle_metadata`` would
    give it; None for any other request, which ``handle_metadata`` answers."""
    if broker.quotas.enabled or not no_topics_body(version, body):
        return None
    return no_topics_answer(broker, version, listener)


#: version -> the request bodies that name no topic and ask for nothing the answer above lacks
_NO_TOPICS_BODIES: dict[int, frozenset[bytes]] = {}


def no_topics_body(version: int, body: bytes) -> bool:
    """Whether ``body`` (a Metadata request's encoded body) is one ``no_topics_answer`` answers
    as ``handle_metadata`` would: no topic named (v1+: v0 reads an empty list as all topics),
    no cluster operations asked for, no tagged fields. Lets the request path answer the
    periodic refresh without decoding it; anything else (bodies equal in meaning but spelt
    otherwise among them) goes through ``handle_metadata``."""
    bodies = _NO_TOPICS_BODIES.get(version)
    if bodies is None:
        if version < 1 or version > SUPPORTED_VERSIONS[ApiKey.Metadata].max:
            return False
        bodies = _NO_TOPICS_BODIES[version] = frozenset(
            encode_data(make_request(ApiKey.Metadata, version, topics=[],
                                     allow_auto_topic_creation=auto,
                                     include_topic_authorized_operations=ops,
                                     include_cluster_authorized_operations=False),
                        version)[2:]
            for auto in (True, False) for ops in (True, False))
    return body in bodies


def _error_response(ctx: HandlerContext, request: MetadataRequest, error: int) -> ResponseBody:
    """Kafka's answer to a request it refuses whole: every topic asked for, with the error."""
    topics = [_Topic(error_code=error, name=t.name or "", topic_id=t.topic_id, is_internal=False,
                     partitions=[]) for t in request.topics]
    return ctx.response(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=-1,
                        topics=topics, error_code=0)


def _topic(logs: LogManager, cluster: ClusterModel, name: str, error: int, count: int,
           offline: Container[tuple[str, int]]) -> Struct:
    partitions = []
    nodes = cluster.nodes
    for p in range(count):
        log = logs.get_log(name, p)
        down = log is None and (name, p) in offline
        state = cluster.partition(name, p)
        partitions.append(_Partition(
            error_code=(ErrorCode.KAFKA_STORAGE_ERROR if down else
                        ErrorCode.LEADER_NOT_AVAILABLE if state.leader < 0 else 0),
            partition_index=p, leader_id=-1 if down else state.leader,
            leader_epoch=-1 if log is None else log.leader_epoch,
            replica_nodes=list(state.replicas), isr_nodes=[] if down else list(state.isr),
            offline_replicas=(list(state.replicas) if down else
                              [r for r in state.replicas if not nodes[r].alive])))
    topic_id = logs.topic_id(name) if error == ErrorCode.NONE else None
    return _Topic(error_code=error, name=name, topic_id=topic_id,
                  is_internal=is_internal(name), partitions=partitions)
