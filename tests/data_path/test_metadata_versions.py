"""Metadata at every version, DescribeTopicPartitions, DescribeLogDirs, DescribeProducers and
the telemetry APIs, by raw requests."""

from __future__ import annotations

import uuid

import pytest

from tests.data_path.raw import metadata_body
from tests.wire import RawClient, idempotent_batch, init_producer_id, produce_one
from trio_broker.broker.server.authorized_operations import CLUSTER_OPERATIONS, TOPIC_OPERATIONS
from trio_broker.protocol.api_keys import SUPPORTED_VERSIONS, ApiKey, request_class
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.messages import make_request
from trio_broker.protocol.wire import bits_to_int

VERSIONS = range(SUPPORTED_VERSIONS[ApiKey.Metadata].min,
                 SUPPORTED_VERSIONS[ApiKey.Metadata].max + 1)


async def _request(broker, key: ApiKey, version: int, body=None, **fields):
    client = await RawClient.connect(broker.host, broker.port)
    try:
        return await client.request(key, version, body=body, **fields)
    finally:
        await client.aclose()


@pytest.mark.parametrize("version", VERSIONS)
async def test_every_version(trio_broker, version):
    logs = trio_broker.state.logs
    logs.create_topic("alpha", 2, {})
    logs.create_topic("beta", 1, {})
    logs.get_log("alpha", 1).become_leader(4)
    names = ["alpha", "gamma"]
    body = metadata_body(version, names, auto_create=False, cluster_ops=True, topic_ops=True)
    response = await _request(trio_broker, ApiKey.Metadata, version, body)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
        (0, trio_broker.host, trio_broker.port)]
    by_name = {t.name: t for t in response.topics}
    # v0-v3 imply auto-creation; v4+ may forbid it
    assert by_name["gamma"].error_code == (0 if version <= 3 else
                                           ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    alpha = by_name["alpha"]
    assert alpha.error_code == 0
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes)
            for p in alpha.partitions] == [(0, 0, [0], [0]), (1, 0, [0], [0])]
    epochs = [p.leader_epoch for p in alpha.partitions]
    assert epochs == ([0, 4] if version >= 7 else [-1, -1])  # v7+: leader epochs
    assert alpha.topic_id == (logs.topic_id("alpha") if version >= 10 else None)
    if version >= 10:
        assert by_name["gamma"].topic_id == (logs.topic_id("gamma") if version <= 3 else None)
    # v8+: authorized operations when asked (every one: no authorizer); cluster's until v10
    assert alpha.authorized_operations == (set(TOPIC_OPERATIONS) if version >= 8 else None)
    assert response.authorized_operations == (set(CLUSTER_OPERATIONS) if 8 <= version <= 10
                                              else None)
    if version >= 13:
        assert response.error_code == 0
    if version >= 1:  # null asks for all topics, an empty list for none
        everything = await _request(trio_broker, ApiKey.Metadata, version,
                                    metadata_body(version, None))
        assert {"alpha", "beta"} <= {t.name for t in everything.topics}
        nothing = await _request(trio_broker, ApiKey.Metadata, version,
                                 metadata_body(version, []))
        assert nothing.topics == []
    else:  # v0: the empty list is "all topics"
        everything = await _request(trio_broker, ApiKey.Metadata, 0, metadata_body(0, []))
        assert {"alpha", "beta"} <= {t.name for t in everything.topics}


async def test_authorized_operations_only_when_asked(trio_broker):
    trio_broker.state.logs.create_topic("quiet", 1, {})
    response = await _request(trio_broker, ApiKey.Metadata, 10, metadata_body(10, ["quiet"]))
    assert response.authorized_operations is None  # Kafka's "not requested" (-2**31)
    assert response.topics[0].authorized_operations is None
    # READ(3) .. DESCRIBE(8), DESCRIBE_CONFIGS(10), ALTER_CONFIGS(11)
    assert bits_to_int(TOPIC_OPERATIONS) == 0b1101_1111_1000 == 3576


async def test_v12_looks_topics_up_by_id(trio_broker):
    logs = trio_broker.state.logs
    logs.create_topic("by-id", 3, {})
    topic_id = logs.topic_id("by-id")
    unknown = uuid.uuid4()
    response = await _request(trio_broker, ApiKey.Metadata, 12,
                              metadata_body(12, ids=[topic_id, unknown], auto_create=True))
    by_id = {t.topic_id: t for t in response.topics}
    assert by_id[topic_id].name == "by-id"
    assert len(by_id[topic_id].partitions) == 3
    assert (by_id[unknown].error_code, by_id[unknown].name) == (ErrorCode.UNKNOWN_TOPIC_ID, None)
    # before v12 an id (or a null name) makes the whole request invalid
    topic = request_class(ApiKey.Metadata).MetadataRequestTopic(name="by-id", topic_id=topic_id)
    old = await _request(trio_broker, ApiKey.Metadata, 11, topics=[topic],
                         allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False)
    assert [t.error_code for t in old.topics] == [ErrorCode.INVALID_REQUEST]


async def test_deleted_and_recreated_topic_gets_a_new_id(trio_broker):
    logs = trio_broker.state.logs
    logs.create_topic("again", 1, {})
    first = logs.topic_id("again")
    logs.delete_topic("again")
    logs.create_topic("again", 1, {})
    response = await _request(trio_broker, ApiKey.Metadata, 12, metadata_body(12, ids=[first]))
    assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    response = await _request(trio_broker, ApiKey.Metadata, 12, metadata_body(12, ["again"]))
    assert response.topics[0].topic_id not in (None, first)


def _dtp(names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None):
    cls = request_class(ApiKey.DescribeTopicPartitions)
    return make_request(ApiKey.DescribeTopicPartitions, 0,
                        topics=[cls.TopicRequest(name=n) for n in names],
                        response_partition_limit=limit,
                        cursor=None if cursor is None else cls.Cursor(topic_name=cursor[0],
                                                                      partition_index=cursor[1]))


async def test_describe_topic_partitions_pages_with_a_cursor(trio_broker):
    logs = trio_broker.state.logs
    logs.create_topic("d-a", 3, {})
    logs.create_topic("d-b", 2, {})
    logs.get_log("d-b", 1).become_leader(7)
    whole = await _request(trio_broker, ApiKey.DescribeTopicPartitions, 0,
                           _dtp(["d-b", "d-a", "d-missing"]))
    assert [(t.name, t.error_code) for t in whole.topics] == [
        ("d-a", 0), ("d-b", 0), ("d-missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert whole.next_cursor is None
    a, b, _ = whole.topics
    assert a.topic_id == logs.topic_id("d-a")
    assert [p.leader_epoch for p in b.partitions] == [0, 7]
    assert b.partitions[0].eligible_leader_replicas == []
    assert a.topic_authorized_operations == bits_to_int(TOPIC_OPERATIONS)
    # two partitions per answer: d-a 0-1, then d-a 2 + d-b 0, then d-b 1
    pages, cursor = [], None
    while True:
        page = await _request(trio_broker, ApiKey.DescribeTopicPartitions, 0,
                              _dtp(["d-a", "d-b"], limit=2, cursor=cursor))
        pages.append([(t.name, [p.partition_index for p in t.partitions]) for t in page.topics])
        if page.next_cursor is None:
            break
        cursor = (page.next_cursor.topic_name, page.next_cursor.partition_index)
    assert pages == [[("d-a", [0, 1])], [("d-a", [2]), ("d-b", [0])], [("d-b", [1])]]
    refused = await _request(trio_broker, ApiKey.DescribeTopicPartitions, 0,
                             _dtp(["d-a"], cursor=("d-zzz", 0)))
    assert [t.error_code for t in refused.topics] == [ErrorCode.INVALID_REQUEST]
    everything = await _request(trio_broker, ApiKey.DescribeTopicPartitions, 0, _dtp([]))
    assert [t.name for t in everything.topics] == ["d-a", "d-b"]


@pytest.mark.parametrize("version", range(SUPPORTED_VERSIONS[ApiKey.DescribeLogDirs].max + 1))
async def test_describe_log_dirs_every_version(trio_broker, version):
    logs = trio_broker.state.logs
    logs.create_topic("dirs", 2, {})
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    assert (await produce_one(client, "dirs", _plain_batch()))[0] == 0
    await client.aclose()
    cls = request_class(ApiKey.DescribeLogDirs)
    response = await _request(trio_broker, ApiKey.DescribeLogDirs, version, topics=None)
    [result] = response.results
    assert result.error_code == 0
    assert result.log_dir == str(logs.log_dirs[0].absolute())
    [topic] = [t for t in result.topics if t.name == "dirs"]
    sizes = {p.partition_index: p.partition_size for p in topic.partitions}
    assert sizes == {0: logs.get_log("dirs", 0).size_bytes, 1: 0}
    assert sizes[0] > 0
    assert {(p.offset_lag, p.is_future_key) for p in topic.partitions} == {(0, False)}
    if version >= 4:
        assert result.total_bytes > 0
        assert 0 <= result.usable_bytes <= result.total_bytes
    else:
        assert (result.total_bytes, result.usable_bytes) == (-1, -1)
    # v5 (Kafka 4.3, KIP-1066): no dir is cordoned here, and none reads as cordoned below v5
    assert result.is_cordoned is False
    only = await _request(trio_broker, ApiKey.DescribeLogDirs, version,
                          topics=[cls.DescribableLogDirTopic(topic="dirs", partitions=[1])])
    [result] = only.results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [
        ("dirs", [1])]


def _plain_batch() -> bytes:
    from trio_broker.protocol.records import build_batch

    return build_batch([(b"k", b"v" * 100)] * 5)


async def test_describe_producers(trio_broker):
    trio_broker.state.logs.create_topic("producers", 1, {})
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    _, pid, epoch = await init_producer_id(client)
    assert (await produce_one(client, "producers", idempotent_batch(pid, 0, 3)))[0] == 0
    assert (await produce_one(client, "producers", idempotent_batch(pid, 3, 2)))[0] == 0
    await client.aclose()
    cls = request_class(ApiKey.DescribeProducers)
    response = await _request(trio_broker, ApiKey.DescribeProducers, 0, topics=[
        cls.TopicRequest(name="producers", partition_indexes=[0, 5]),
        cls.TopicRequest(name="nope", partition_indexes=[0]),
        cls.TopicRequest(name="bad name!", partition_indexes=[0])])
    mine, nope, bad = response.topics
    ok, missing = mine.partitions
    assert ok.error_code == 0
    [state] = ok.active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (pid, epoch, 4)
    assert state.last_timestamp > 0
    assert (state.coordinator_epoch, state.current_txn_start_offset) == (-1, -1)
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert nope.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert nope.partitions[0].error_message == "This server does not host this topic-partition."
    assert bad.partitions[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


async def test_telemetry_says_no_subscription(trio_broker):
    first = await _request(trio_broker, ApiKey.GetTelemetrySubscriptions, 0,
                           client_instance_id=None)
    assert first.error_code == 0
    assert first.client_instance_id is not None  # the broker names a new instance
    assert first.requested_metrics == []  # nothing to push: clients stay quiet
    assert first.push_interval_ms == 300_000
    assert first.accepted_compression_types == [4, 3, 1, 2]
    # cumulative sums: what Prometheus scrapes (Kafka asks for deltas for its OTLP reporters)
    assert (first.telemetry_max_bytes, first.delta_temporality) == (1 << 20, False)
    instance = first.client_instance_id
    again = await _request(trio_broker, ApiKey.GetTelemetrySubscriptions, 0,
                           client_instance_id=instance)
    assert again.error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED  # before the interval
    fields = {"client_instance_id": instance, "terminating": False, "compression_type": 0,
              "metrics": b"m"}
    wrong = await _request(trio_broker, ApiKey.PushTelemetry, 0, subscription_id=1, **fields)
    assert wrong.error_code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    # a terminating push is never throttled; an undecodable payload is INVALID_RECORD
    last = {**fields, "terminating": True}
    pushed = await _request(trio_broker, ApiKey.PushTelemetry, 0,
                            subscription_id=first.subscription_id, **last)
    assert pushed.error_code == ErrorCode.INVALID_RECORD
    after = await _request(trio_broker, ApiKey.PushTelemetry, 0,
                           subscription_id=first.subscription_id, **last)
    assert after.error_code == ErrorCode.INVALID_REQUEST  # nothing after terminating
    bad = await _request(trio_broker, ApiKey.PushTelemetry, 0, subscription_id=0,
                         **{**fields, "client_instance_id": None})
    assert bad.error_code == ErrorCode.INVALID_REQUEST


def test_telemetry_advertised_and_librdkafka_quiet_without_subscription(kafka_broker,
                                                                          unique_topic):
    """The KIP-714 APIs are advertised (this broker receives client metrics); a client no
    subscription matches is told no metrics: librdkafka takes its instance id (an info line,
    as with any Kafka that receives telemetry) and warns of nothing."""
    import confluent_kafka

    from trio_broker.broker.apis.registry import advertised_versions

    assert ApiKey.GetTelemetrySubscriptions in advertised_versions()
    assert ApiKey.PushTelemetry in advertised_versions()
    logged: list[tuple[int, str]] = []

    class Capture:
        def log(self, level: int, fmt: str, *args: object) -> None:
            logged.append((level, fmt % args if args else fmt))

    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                                         "logger": Capture()})
    producer.produce(unique_topic("quiet"), b"v")
    assert producer.flush(10) == 0
    producer.poll(0.5)  # telemetry is asked for right after the first ApiVersions
    telemetry = [(level, line) for level, line in logged if "elemetry" in line]
    assert [line for _, line in telemetry if "instance id changed" in line], logged
    assert not [line for level, line in telemetry if level <= 5], logged  # syslog: <= notice
    instances = kafka_broker.broker.state.telemetry.instances.values()
    assert instances
    assert all(i.requested_metrics == () for i in instances)  # no subscription: no metrics
