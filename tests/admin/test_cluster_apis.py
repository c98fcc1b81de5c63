"""DescribeCluster, ElectLeaders and the partition reassignment APIs at every advertised version:
the answers a KRaft Kafka cluster of one node gives, raw over a socket."""

from __future__ import annotations

import pytest

from tests.wire import RawClient
from trio_broker.broker.apis.registry import advertised_versions
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.errors import ErrorCode as E

EL = request_class(ApiKey.ElectLeaders)
APR = request_class(ApiKey.AlterPartitionReassignments)
LPR = request_class(ApiKey.ListPartitionReassignments)
NOT_NEEDED = "Leader election not needed for topic partition."


def versions(api_key: ApiKey) -> list[int]:
    r = advertised_versions()[api_key]
    return list(range(r.min, r.max + 1))


def test_cluster_apis_advertise_kafkas_whole_range():
    advertised = advertised_versions()
    assert {k.name: tuple(advertised[k]) for k in (
        ApiKey.DescribeCluster, ApiKey.ElectLeaders, ApiKey.AlterPartitionReassignments,
        ApiKey.ListPartitionReassignments, ApiKey.DescribeUserScramCredentials,
        ApiKey.AlterUserScramCredentials)} == {
        "DescribeCluster": (0, 2), "ElectLeaders": (0, 2),
        "AlterPartitionReassignments": (0, 1), "ListPartitionReassignments": (0, 0),
        "DescribeUserScramCredentials": (0, 0), "AlterUserScramCredentials": (0, 0)}


@pytest.mark.parametrize("version", versions(ApiKey.DescribeCluster))
async def test_describe_cluster(trio_broker, version):
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    state = trio_broker.state
    body = await client.request(ApiKey.DescribeCluster, version,
                                include_cluster_authorized_operations=True, endpoint_type=1,
                                include_fenced_brokers=True)
    assert (body.error_code, body.error_message, body.cluster_id, body.controller_id) == (
        0, None, state.cluster_id, state.node_id)
    assert [(b.broker_id, b.host, b.port, b.rack) for b in body.brokers] == [
        (state.node_id, trio_broker.host, trio_broker.port, None)]
    # No authorizer: every cluster operation (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
    # DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE).
    assert set(body.authorized_operations) == {5, 7, 8, 9, 10, 11, 12}
    plain = await client.request(ApiKey.DescribeCluster, version,
                                 include_cluster_authorized_operations=False, endpoint_type=1)
    assert plain.authorized_operations is None  # Kafka's "not requested"
    if version >= 1:  # KIP-919 endpoint types: this is a broker endpoint
        controller = await client.request(ApiKey.DescribeCluster, version,
                                          include_cluster_authorized_operations=False,
                                          endpoint_type=2)
        assert (controller.error_code, controller.error_message) == (
            E.MISMATCHED_ENDPOINT_TYPE, "The request was sent to an endpoint of type BROKER, "
            "but we wanted an endpoint of type CONTROLLER")
        unknown = await client.request(ApiKey.DescribeCluster, version,
                                       include_cluster_authorized_operations=False,
                                       endpoint_type=9)
        assert (unknown.error_code, unknown.error_message) == (
            E.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 9")
    await client.aclose()


def _elections(body):
    return {(t.topic, p.partition_id): (p.error_code, p.error_message)
            for t in body.replica_election_results for p in t.partition_result}


@pytest.mark.parametrize("version", versions(ApiKey.ElectLeaders))
async def test_elect_leaders(trio_broker, version):
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    trio_broker.state.logs.create_topic("t", 2, {})
    for election in ((0, 1) if version >= 1 else (0,)):
        body = await client.request(ApiKey.ElectLeaders, version, election_type=election,
                                    timeout_ms=5000, topic_partitions=[
                                        EL.TopicPartitions(topic="t", partitions=[0, 1, 9]),
                                        EL.TopicPartitions(topic="ghost", partitions=[0])])
        assert _elections(body) == {
            ("t", 0): (E.ELECTION_NOT_NEEDED, NOT_NEEDED),
            ("t", 1): (E.ELECTION_NOT_NEEDED, NOT_NEEDED),
            ("t", 9): (E.UNKNOWN_TOPIC_OR_PARTITION, "No such partition as t-9"),
            ("ghost", 0): (E.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as ghost")}
        if version >= 1:
            assert body.error_code == 0
    # Every partition: those that need no election are left out, topics still listed.
    everything = await client.request(ApiKey.ElectLeaders, version, election_type=0,
                                      timeout_ms=5000, topic_partitions=None)
    assert [(t.topic, t.partition_result) for t in everything.replica_election_results] == [
        ("t", [])]
    if version >= 1:
        bad = await client.request(ApiKey.ElectLeaders, version, election_type=7,
                                   timeout_ms=5000, topic_partitions=[
                                       EL.TopicPartitions(topic="t", partitions=[0])])
        assert bad.error_code == E.INVALID_REQUEST
        assert _elections(bad) == {("t", 0): (E.INVALID_REQUEST, "Unknown election type 7")}
    await client.aclose()


@pytest.mark.parametrize("version", versions(ApiKey.AlterPartitionReassignments))
async def test_alter_partition_reassignments(trio_broker, version):
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    trio_broker.state.logs.create_topic("t", 2, {})
    node = trio_broker.state.node_id
    partition = APR.ReassignableTopic.ReassignablePartition
    body = await client.request(
        ApiKey.AlterPartitionReassignments, version, timeout_ms=5000,
        allow_replication_factor_change=True, topics=[
            APR.ReassignableTopic(name="t", partitions=[
                partition(partition_index=0, replicas=[node]),
                partition(partition_index=1, replicas=None),
                partition(partition_index=5, replicas=[node])]),
            APR.ReassignableTopic(name="ghost", partitions=[
                partition(partition_index=0, replicas=[node])]),
            APR.ReassignableTopic(name="t", partitions=[
                partition(partition_index=0, replicas=[node, node + 1]),
                partition(partition_index=0, replicas=[node, node]),
                partition(partition_index=0, replicas=[])])])
    assert (body.error_code, body.error_message) == (0, None)
    got = [[(p.partition_index, p.error_code, p.error_message) for p in t.partitions]
           for t in body.responses]
    assert got == [
        [(0, 0, None), (1, E.NO_REASSIGNMENT_IN_PROGRESS,
                        "No partition reassignment is in progress."),
         (5, E.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:5.")],
        [(0, E.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named ghost.")],
        [(0, E.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes broker "
                                           f"{node + 1}, but no such broker is registered."),
         (0, E.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes the "
                                           f"broker {node} more than once."),
         (0, E.INVALID_REPLICA_ASSIGNMENT,
          "The manual partition assignment includes an empty replica list.")]]
    if version >= 1:  # KIP-860: a reassignment may be told not to change the replication
        fixed = await client.request(
            ApiKey.AlterPartitionReassignments, version, timeout_ms=5000,
            allow_replication_factor_change=False, topics=[APR.ReassignableTopic(
                name="t", partitions=[partition(partition_index=0, replicas=[node, node + 1])])])
        assert fixed.allow_replication_factor_change is False
        assert [(p.error_code, p.error_message) for p in fixed.responses[0].partitions] == [
            (E.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 1 to 2")]
    listed = await client.request(ApiKey.ListPartitionReassignments, 0, timeout_ms=5000,
                                  topics=None)
    assert (listed.error_code, listed.topics) == (0, [])
    named = await client.request(ApiKey.ListPartitionReassignments, 0, timeout_ms=5000,
                                 topics=[LPR.ListPartitionReassignmentsTopics(
                                     name="t", partition_indexes=[0, 1])])
    assert (named.error_code, named.topics) == (0, [])
    await client.aclose()
