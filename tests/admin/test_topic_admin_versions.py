"""CreateTopics, DeleteTopics, CreatePartitions and InitProducerId at every advertised version,
raw over a socket, answers checked against a KRaft Kafka's (codes and messages)."""

from __future__ import annotations

import uuid

import pytest

from tests.wire import RawClient
from trio_broker.broker.apis.registry import advertised_versions
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.errors import ErrorCode as E

CT = request_class(ApiKey.CreateTopics)
DT = request_class(ApiKey.DeleteTopics)
CP = request_class(ApiKey.CreatePartitions)
#: Kafka's zero uuid ("no topic id"), as the codec writes it; read back as None
ZERO = uuid.UUID(int=0)


def versions(api_key: ApiKey) -> list[int]:
    r = advertised_versions()[api_key]
    return list(range(r.min, r.max + 1))


def test_admin_apis_advertise_kafkas_whole_range():
    advertised = advertised_versions()
    assert {k.name: tuple(advertised[k]) for k in (
        ApiKey.CreateTopics, ApiKey.DeleteTopics, ApiKey.CreatePartitions,
        ApiKey.InitProducerId, ApiKey.SaslHandshake, ApiKey.SaslAuthenticate,
        ApiKey.ApiVersions)} == {
        "CreateTopics": (0, 7), "DeleteTopics": (0, 6), "CreatePartitions": (0, 3),
        "InitProducerId": (0, 5), "SaslHandshake": (0, 1), "SaslAuthenticate": (0, 2),
        "ApiVersions": (0, 4)}


def new_topic(name, partitions=-1, rf=-1, *, assignments=(), configs=None):
    return CT.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf,
        assignments=[CT.CreatableTopic.CreatableReplicaAssignment(partition_index=i,
                                                                  broker_ids=list(b))
                     for i, b in assignments],
        configs=[CT.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                 for k, v in (configs or {}).items()])


async def create(client, version, *topics, validate_only=False):
    body = await client.request(ApiKey.CreateTopics, version, topics=list(topics),
                                timeout_ms=5000, validate_only=validate_only)
    return {t.name: t for t in body.topics}


@pytest.mark.parametrize("version", versions(ApiKey.CreateTopics))
async def test_create_topics(trio_broker, version):
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    logs = trio_broker.state.logs
    got = await create(client, version, new_topic("plain", 3, 1),
                       new_topic("defaults"), new_topic("assigned", assignments=[(0, [0]),
                                                                                (1, [0])]),
                       new_topic("dup", 1, 1), new_topic("dup", 2, 1),
                       new_topic("rf3", 1, 3), new_topic("zero", 0, 1),
                       new_topic("both", 2, -1, assignments=[(0, [0])]),
                       new_topic("elsewhere", assignments=[(0, [7])]),
                       new_topic("badconfig", configs={"retention.ms": "soon"}),
                       new_topic("compacted", 1, 1, configs={"cleanup.policy": "compact"}))
    assert logs.topics()["plain"] == 3
    assert logs.topics()["defaults"] == trio_broker.state.config.num_partitions
    assert logs.topics()["assigned"] == 2
    assert {n for n, t in got.items() if t.error_code == 0} == {
        "plain", "defaults", "assigned", "compacted"}
    expected = {
        "dup": (E.INVALID_REQUEST, "Duplicate topic name."),
        "rf3": (E.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition 3 time(s): "
                "The target replication factor of 3 cannot be reached because only 1 "
                "broker(s) are registered."),
        "zero": (E.INVALID_PARTITIONS,
                 "Number of partitions was set to an invalid non-positive value."),
        "both": (E.INVALID_REQUEST, "A manual partition assignment was specified, but "
                 "numPartitions was not set to -1."),
        "elsewhere": (E.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment "
                      "includes broker 7, but no such broker is registered."),
    }
    for name, (code, message) in expected.items():
        assert got[name].error_code == code, name
        if version >= 1:  # the message field exists from v1
            assert got[name].error_message == message, name
    assert got["badconfig"].error_code == E.INVALID_CONFIG
    assert "badconfig" not in logs.topics()
    if version >= 5:  # KIP-525: the new topic's partitions, replication and configs
        plain = got["plain"]
        assert (plain.num_partitions, plain.replication_factor,
                plain.topic_config_error_code) == (3, 1, 0)
        configs = {c.name: (c.value, c.config_source) for c in plain.configs}
        assert configs["cleanup.policy"] == ("delete", 5)
        assert got["compacted"].num_partitions == 1
        assert {c.name: (c.value, c.config_source) for c in got["compacted"].configs}[
            "cleanup.policy"] == ("compact", 1)
        assert [c.name for c in plain.configs] == sorted(c.name for c in plain.configs)
        assert (got["dup"].num_partitions, got["dup"].configs) == (-1, [])
    if version >= 7:
        assert got["plain"].topic_id == logs.topic_id("plain")
        assert got["plain"].topic_id is not None
        assert got["rf3"].topic_id is None
    # Creating it again: Kafka's message.
    again = await create(client, version, new_topic("plain", 1, 1))
    assert again["plain"].error_code == E.TOPIC_ALREADY_EXISTS
    if version >= 1:
        assert again["plain"].error_message == "Topic 'plain' already exists."
    await client.aclose()


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.CreateTopics) if v >= 1])
async def test_create_topics_validate_only(trio_broker, version):
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    got = await create(client, version, new_topic("maybe", 4, 1), validate_only=True)
    assert got["maybe"].error_code == 0
    assert "maybe" not in trio_broker.state.logs.topics()
    if version >= 5:
        assert got["maybe"].num_partitions == 4
    await client.aclose()


async def delete(client, version, *, names=(), ids=(), both=()):
    if version >= 6:
        topics = ([DT.DeleteTopicState(name=n, topic_id=ZERO) for n in names]
                  + [DT.DeleteTopicState(name=None, topic_id=i) for i in ids]
                  + [DT.DeleteTopicState(name=n, topic_id=i) for n, i in both])
        body = await client.request(ApiKey.DeleteTopics, version, topics=topics,
                                    timeout_ms=5000)
    else:
        body = await client.request(ApiKey.DeleteTopics, version, topic_names=list(names),
                                    timeout_ms=5000)
    return [(r.name, r.topic_id if version >= 6 else None, r.error_code,
             r.error_message if version >= 5 else None) for r in body.responses]


@pytest.mark.parametrize("version", versions(ApiKey.DeleteTopics))
async def test_delete_topics(trio_broker, version):
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    logs = trio_broker.state.logs
    for name in ("a", "b", "c"):
        logs.create_topic(name, 1, {})
    a_id = logs.topic_id("a") if version >= 6 else None
    got = await delete(client, version, names=["a", "ghost", "b", "b"])
    assert ("a", a_id, 0, None) in got
    assert ("ghost", None, E.UNKNOWN_TOPIC_OR_PARTITION,
            "This server does not host this topic-partition." if version >= 5 else None) in got
    assert [r for r in got if r[0] == "b"] == [
        ("b", None, E.INVALID_REQUEST,
         "Duplicate topic name." if version >= 5 else None)]
    assert set(logs.topics()) == {"b", "c"}
    if version >= 6:  # by topic id
        c_id = logs.topic_id("c")
        unknown = uuid.uuid4()
        got = await delete(client, version, ids=[c_id, unknown], both=[("b", c_id)],
                           names=[])
        assert ("c", c_id, 0, None) in got
        assert (None, unknown, E.UNKNOWN_TOPIC_ID,
                "This server does not host this topic ID.") in got
        assert ("b", c_id, E.INVALID_REQUEST,
                "You may not specify both topic name and topic id.") in got
        assert set(logs.topics()) == {"b"}
        neither = await client.request(ApiKey.DeleteTopics, version, timeout_ms=5000, topics=[
            DT.DeleteTopicState(name=None, topic_id=ZERO)])
        assert [(r.error_code, r.error_message) for r in neither.responses] == [
            (E.INVALID_REQUEST, "Neither topic name nor id were specified.")]
    await client.aclose()


@pytest.mark.broker_config(delete_topic_enable=False)
@pytest.mark.parametrize("version", [0, 2, 3, 6])
async def test_delete_topics_when_disabled(trio_broker, version):
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    trio_broker.state.logs.create_topic("kept", 1, {})
    got = await delete(client, version, names=["kept"])
    # Kafka: INVALID_REQUEST before v3, TOPIC_DELETION_DISABLED from v3
    assert [r[2] for r in got] == [E.TOPIC_DELETION_DISABLED if version >= 3
                                   else E.INVALID_REQUEST]
    assert "kept" in trio_broker.state.logs.topics()
    await client.aclose()


@pytest.mark.parametrize("version", versions(ApiKey.CreatePartitions))
async def test_create_partitions(trio_broker, version):
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    logs = trio_broker.state.logs
    logs.create_topic("grow", 2, {})
    logs.create_topic("same", 2, {})
    logs.create_topic("manual", 1, {})
    assignment = CP.CreatePartitionsTopic.CreatePartitionsAssignment

    def topic(name, count, assignments=None):
        return CP.CreatePartitionsTopic(name=name, count=count, assignments=assignments)

    body = await client.request(ApiKey.CreatePartitions, version, timeout_ms=5000,
                                validate_only=False, topics=[
                                    topic("grow", 5), topic("same", 2), topic("same", 3),
                                    topic("ghost", 3), topic("manual", 1),
                                    topic("manual", 3, [assignment(broker_ids=[0])])])
    got = {r.name: (r.error_code, r.error_message) for r in body.results}
    assert got == {
        "grow": (0, None),
        "same": (E.INVALID_REQUEST, "Duplicate topic name."),
        "ghost": (E.UNKNOWN_TOPIC_OR_PARTITION, None),
        "manual": (E.INVALID_REQUEST, "Duplicate topic name."),
    }
    assert logs.topics()["grow"] == 5
    body = await client.request(ApiKey.CreatePartitions, version, timeout_ms=5000,
                                validate_only=False, topics=[
                                    topic("same", 2), topic("grow", 4),
                                    topic("manual", 3, [assignment(broker_ids=[0])]),
                                    topic("manual-two", 1)])
    got = {r.name: (r.error_code, r.error_message) for r in body.results}
    assert got["same"] == (E.INVALID_PARTITIONS, "Topic already has 2 partition(s).")
    assert got["grow"] == (E.INVALID_PARTITIONS,
                           "The topic grow currently has 5 partition(s); 4 would not be an "
                           "increase.")
    assert got["manual"] == (E.INVALID_REPLICA_ASSIGNMENT, "Attempted to add 2 additional "
                             "partition(s), but only 1 assignment(s) were specified.")
    body = await client.request(ApiKey.CreatePartitions, version, timeout_ms=5000,
                                validate_only=True, topics=[
                                    topic("manual", 3, [assignment(broker_ids=[0]),
                                                        assignment(broker_ids=[0])])])
    assert [(r.error_code, r.error_message) for r in body.results] == [(0, None)]
    assert logs.topics()["manual"] == 1  # validate only
    await client.aclose()


@pytest.mark.parametrize("version", versions(ApiKey.InitProducerId))
async def test_init_producer_id(trio_broker, version):
    client = await RawClient.connect(trio_broker.host, trio_broker.port)

    async def init(**fields):
        body = await client.request(ApiKey.InitProducerId, version, transaction_timeout_ms=60000,
                                    **fields)
        return body.error_code, body.producer_id, body.producer_epoch

    first = await init(transactional_id=None)
    second = await init(transactional_id=None, producer_id=first[1], producer_epoch=0)
    assert first[0] == second[0] == 0
    assert second[1] > first[1]  # idempotent producers always get a new id (Kafka)
    assert (first[2], second[2]) == (0, 0)
    # a transactional id keeps its producer id; each InitProducerId bumps its epoch
    code, txn_pid, epoch = await init(transactional_id="txn")
    assert (code, epoch) == (0, 0)
    assert txn_pid not in (first[1], second[1])
    assert await init(transactional_id="txn") == (0, txn_pid, 1)
    assert await init(transactional_id="") == (E.INVALID_REQUEST, -1, -1)
    if version >= 3:  # KIP-360: half a producer id/epoch pair is invalid
        assert await init(transactional_id=None, producer_id=5, producer_epoch=-1) == (
            E.INVALID_REQUEST, -1, -1)
        assert await init(transactional_id=None, producer_id=-1, producer_epoch=3) == (
            E.INVALID_REQUEST, -1, -1)
    await client.aclose()
