"""Cluster APIs with one-node answers: DescribeCluster, ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments.

Why they exist on a single broker: admin clients call them (confluent-kafka's
``describe_cluster``, Kafka's ``kafka-leader-election`` and ``kafka-reassign-partitions``), and a
cluster of one node has definite answers. This broker is the only broker and the (KRaft-style)
controller, it leads every partition, which is its own preferred leader, so an election is never
needed and the only replica set a partition can have is ``[this broker]``: a reassignment to it
changes nothing and completes at once, and no reassignment is ever in progress. The messages
and error codes are those a KRaft controller gives.
"""

from __future__ import annotations

from collections.abc import Container

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import response_type
from ..security.acl import CLUSTER_NAME
from ..server import authz
from ..server.bodies import (
    AlterPartitionReassignmentsRequest,
    DescribeClusterRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
    Struct,
)
from ..server.context import HandlerContext, HandlerResult
from ..server.state import BrokerState
from .admin import all_fenced_problem, replica_assignment_problem

_BROKER_ENDPOINT, _CONTROLLER_ENDPOINT = 1, 2
_ENDPOINT_NAMES = {_BROKER_ENDPOINT: "BROKER", _CONTROLLER_ENDPOINT: "CONTROLLER"}


async def handle_describe_cluster(ctx: HandlerContext,
                                  request: DescribeClusterRequest) -> HandlerResult:
    """DescribeCluster v0-v2, as a broker endpoint answers it."""
    broker = ctx.broker
    endpoint = request.endpoint_type if ctx.version >= 1 else _BROKER_ENDPOINT
    if endpoint != _BROKER_ENDPOINT:
        if endpoint in _ENDPOINT_NAMES:
            error, message = (ErrorCode.MISMATCHED_ENDPOINT_TYPE,
                              "The request was sent to an endpoint of type BROKER, but we "
                              f"wanted an endpoint of type {_ENDPOINT_NAMES[endpoint]}")
        else:
            error, message = (ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                              f"Unsupported endpoint type {endpoint}")
        return ctx.response(throttle_time_ms=0, error_code=error, error_message=message,
                            endpoint_type=_BROKER_ENDPOINT, cluster_id="", brokers=[],
                            authorized_operations=None)
    cls = response_type(ApiKey.DescribeCluster).DescribeClusterBroker
    nodes = [cls(broker_id=i, host=host, port=port, rack=broker.cluster.rack_of(i),
                 is_fenced=False)
             for i, host, port in broker.cluster.live_endpoints(ctx.listener)]
    return ctx.response(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
        endpoint_type=_BROKER_ENDPOINT, cluster_id=broker.cluster_id,
        controller_id=broker.cluster.controller_id(broker.node_id), brokers=nodes,
        authorized_operations=(authz.operations(ctx, authz.CLUSTER, CLUSTER_NAME)
                               if request.include_cluster_authorized_operations else None))


# --- ElectLeaders ----------------------------------------------------------------------------

_EL = response_type(ApiKey.ElectLeaders)
_PREFERRED, _UNCLEAN = 0, 1


async def handle_elect_leaders(ctx: HandlerContext, request: ElectLeadersRequest) -> HandlerResult:
    """ElectLeaders v0-v2: every partition already has its preferred (and only) leader."""
    election = request.election_type if ctx.version >= 1 else _PREFERRED
    asked = request.topic_partitions
    if not authz.cluster(ctx, authz.ALTER):
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return ctx.response(throttle_time_ms=0, error_code=denied, replica_election_results=[
            _election(t.topic, [(p, denied, None) for p in t.partitions]) for t in asked or []])
    if election not in (_PREFERRED, _UNCLEAN):
        message = f"Unknown election type {election}"
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                            replica_election_results=[
                                _election(t.topic, [(p, ErrorCode.INVALID_REQUEST, message)
                                                    for p in t.partitions])
                                for t in asked or []])
    topics = ctx.broker.logs.topics()
    offline = ctx.broker.logs.offline_partitions
    results = []
    if asked is None:  # every partition; those that need no election are left out (Kafka)
        for name, count in topics.items():
            outcomes = (_elect(name, p, election, topics, offline) for p in range(count))
            results.append(_election(name, [(p, e, m) for p, (e, m) in enumerate(outcomes)
                                            if e != ErrorCode.ELECTION_NOT_NEEDED]))
    else:
        for t in asked:
            results.append(_election(t.topic, [(p, *_elect(t.topic, p, election, topics, offline))
                                               for p in t.partitions]))
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE,
                        replica_election_results=results)


def _elect(topic: str, partition: int, election: int, topics: dict[str, int],
           offline: Container[tuple[str, int]]) -> tuple[ErrorCode, str | None]:
    if topic not in topics:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
    if not 0 <= partition < topics[topic]:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{partition}"
    if (topic, partition) in offline:  # its only replica is offline: nobody can lead it
        if election == _PREFERRED:
            return (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                    "The preferred leader was not available.")
        return (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                "Eligible topic partition leaders are not available.")
    return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."


def _election(topic: str, partitions: list[tuple[int, ErrorCode, str | None]]) -> Struct:
    return _EL.ReplicaElectionResult(topic=topic, partition_result=[
        _EL.ReplicaElectionResult.PartitionResult(partition_id=p, error_code=e, error_message=m)
        for p, e, m in partitions])


# --- partition reassignments -----------------------------------------------------------------

_APR = response_type(ApiKey.AlterPartitionReassignments)


async def handle_alter_partition_reassignments(
        ctx: HandlerContext, request: AlterPartitionReassignmentsRequest) -> HandlerResult:
    """AlterPartitionReassignments v0-v1: registered, distinct brokers are accepted, and the
    reassignment completes at once (the storage is shared: nothing to move); anything else is
    refused as a KRaft controller refuses it."""
    allow_rf_change = request.allow_replication_factor_change if ctx.version >= 1 else True
    if not authz.cluster(ctx, authz.ALTER):
        return ctx.response(throttle_time_ms=0, allow_replication_factor_change=allow_rf_change,
                            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            error_message=None, responses=[])
    topics = ctx.broker.logs.topics()
    responses = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            error, message = _reassign(ctx.broker, t.name, p.partition_index, p.replicas,
                                       topics, allow_rf_change)
            parts.append(_APR.ReassignableTopicResponse.ReassignablePartitionResponse(
                partition_index=p.partition_index, error_code=error, error_message=message))
        responses.append(_APR.ReassignableTopicResponse(name=t.name, partitions=parts))
    return ctx.response(throttle_time_ms=0, allow_replication_factor_change=allow_rf_change,
                        error_code=ErrorCode.NONE, error_message=None, responses=responses)


def _reassign(broker: BrokerState, topic: str, partition: int, replicas: list[int] | None,
              topics: dict[str, int], allow_rf_change: bool) -> tuple[ErrorCode, str | None]:
    if topic not in topics:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}."
    if not 0 <= partition < topics[topic]:
        return (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"Unable to find partition {topic}:{partition}.")
    if replicas is None:  # cancel: there is never a reassignment to cancel
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."
    cluster = broker.cluster
    current = len(cluster.partition(topic, partition).replicas)
    if not allow_rf_change and len(replicas) != current:
        return (ErrorCode.INVALID_REPLICATION_FACTOR,
                f"The replication factor is changed from {current} to {len(replicas)}")
    problem = (replica_assignment_problem(list(replicas), broker.node_id,
                                          registered=cluster.nodes)
               or all_fenced_problem(broker, list(replicas), partition))
    if problem:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem
    cluster.reassign(topic, partition, list(replicas))
    return ErrorCode.NONE, None


async def handle_list_partition_reassignments(
        ctx: HandlerContext, request: ListPartitionReassignmentsRequest) -> HandlerResult:
    """ListPartitionReassignments v0: no reassignment is ever in progress on one node."""
    error = (ErrorCode.NONE if authz.cluster(ctx, authz.DESCRIBE)
             else ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return ctx.response(throttle_time_ms=0, error_code=error, error_message=None, topics=[])
