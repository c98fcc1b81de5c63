"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets on the wire
(confluent-kafka 2.16.1's AdminClient has no call for them): the start offset and lag of each
share-partition (-1 when never initialized), Kafka's errors (an unknown group, a group with
members, unknown topics and partitions, nothing to delete), and an altered start offset seen by
confluent-kafka's ShareConsumer: its next delivery starts there."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import ShareConsumer

from tests.share.test_share_errors import create_topic, heartbeat, produce, share_fetch
from trio_broker.client.blocking import BrokerConnection, parse_address
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.errors import ErrorCode
from trio_broker.testing import ThreadedBroker

DESCRIBE = request_class(ApiKey.DescribeShareGroupOffsets)
ALTER = request_class(ApiKey.AlterShareGroupOffsets)
DELETE = request_class(ApiKey.DeleteShareGroupOffsets)


@pytest.fixture
def conn(kafka_broker: ThreadedBroker) -> Iterator[BrokerConnection]:
    with BrokerConnection(*parse_address(kafka_broker.bootstrap_servers)) as c:
        yield c


def describe(conn: BrokerConnection, group: str, topic: str | None, version: int = 1,
             partitions: tuple[int, ...] = (0,)) -> Any:
    topics = None if topic is None else [DESCRIBE.DescribeShareGroupOffsetsRequestGroup.
                                         DescribeShareGroupOffsetsRequestTopic(
                                             topic_name=topic, partitions=list(partitions))]
    [answer] = conn.call(ApiKey.DescribeShareGroupOffsets, version, groups=[
        DESCRIBE.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=topics)]).groups
    return answer


def offsets(answer: Any) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (start offset, lag)"""
    return {(t.topic_name, p.partition_index): (p.start_offset, p.lag)
            for t in answer.topics for p in t.partitions}


def alter(conn: BrokerConnection, group: str, topic: str,
          starts: dict[int, int]) -> Any:
    return conn.call(ApiKey.AlterShareGroupOffsets, 0, group_id=group, topics=[
        ALTER.AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[
            ALTER.AlterShareGroupOffsetsRequestTopic.AlterShareGroupOffsetsRequestPartition(
                partition_index=p, start_offset=s) for p, s in starts.items()])])


def delete(conn: BrokerConnection, group: str, *topics: str) -> Any:
    return conn.call(ApiKey.DeleteShareGroupOffsets, 0, group_id=group, topics=[
        DELETE.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics])


def test_the_offset_apis_are_advertised_at_kafka_4_2s_versions(conn: BrokerConnection) -> None:
    answer = conn.call(ApiKey.ApiVersions, 3, client_software_name="t",
                       client_software_version="1")
    ranges = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert ranges[ApiKey.DescribeShareGroupOffsets] == (0, 1)
    assert ranges[ApiKey.AlterShareGroupOffsets] == (0, 0)
    assert ranges[ApiKey.DeleteShareGroupOffsets] == (0, 0)


def test_describe_alter_delete(conn: BrokerConnection,
                               unique_topic: Callable[[str], str]) -> None:
    group, topic = unique_topic("sg"), unique_topic("t")
    topic_id = create_topic(conn, topic)
    bootstrap = f"{conn.host}:{conn.port}"
    produce(bootstrap, topic, 10)
    # nothing initialized: start offset -1, lag -1 (v1), no lag field in v0
    assert offsets(describe(conn, group, topic)) == {(topic, 0): (-1, -1)}
    assert offsets(describe(conn, group, "no-such-topic")) == {("no-such-topic", 0): (-1, -1)}
    v0 = describe(conn, group, topic, version=0)
    assert (v0.error_code, v0.topics[0].partitions[0].start_offset) == (0, -1)
    assert describe(conn, group, None).topics == []
    assert alter(conn, group, topic, {0: 0}).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert alter(conn, "", topic, {0: 0}).error_code == ErrorCode.INVALID_GROUP_ID
    assert delete(conn, group, topic).error_code == ErrorCode.GROUP_ID_NOT_FOUND

    # a member joins: the share-partition starts at the log end (latest)
    assert heartbeat(conn, group, "m1", 0, [topic]).error_code == 0
    produce(bootstrap, topic, 5)
    assert offsets(describe(conn, group, topic)) == {(topic, 0): (10, 5)}
    got = share_fetch(conn, group, "m1", 0, topic_id)
    assert got.error_code == 0
    share_fetch(conn, group, "m1", 1, topic_id, acks=[(10, 11, [1]), (13, 13, [3])])
    # 10, 11 accepted: the start moves; 13 rejected: done, so out of the lag; 12, 14 in flight
    assert offsets(describe(conn, group, topic)) == {(topic, 0): (12, 2)}
    assert offsets(describe(conn, group, None)) == {(topic, 0): (12, 2)}
    assert alter(conn, group, topic, {0: 3}).error_code == ErrorCode.NON_EMPTY_GROUP
    assert delete(conn, group, topic).error_code == ErrorCode.NON_EMPTY_GROUP

    assert heartbeat(conn, group, "m1", -1, None).error_code == 0
    answer = alter(conn, group, topic, {0: 3, 7: 0})
    assert answer.error_code == 0
    [t] = answer.responses
    assert (t.topic_name, t.topic_id) == (topic, topic_id)
    assert [(p.partition_index, p.error_code) for p in t.partitions] == [
        (0, 0), (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    [unknown] = alter(conn, group, "no-such-topic", {0: 1}).responses
    assert (unknown.topic_id, unknown.partitions[0].error_code) == (
        None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)  # the zero uuid
    assert offsets(describe(conn, group, topic)) == {(topic, 0): (3, 12)}

    # the next member's first delivery starts at the altered start offset
    assert heartbeat(conn, group, "m2", 0, [topic]).error_code == 0
    again = share_fetch(conn, group, "m2", 0, topic_id)
    assert [r.first_offset for t in again.responses for p in t.partitions
            for r in p.acquired_records][:1] == [3]
    assert heartbeat(conn, group, "m2", -1, None).error_code == 0

    answer = delete(conn, group, topic, "no-such-topic")
    assert [(t.topic_name, t.error_code) for t in answer.responses] == [
        (topic, 0), ("no-such-topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert answer.responses[0].topic_id == topic_id
    assert offsets(describe(conn, group, topic)) == {(topic, 0): (-1, -1)}
    [again_deleted] = delete(conn, group, topic).responses
    assert (again_deleted.error_code, again_deleted.error_message) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete.")


def test_an_altered_start_offset_is_where_a_share_consumer_starts(
        kafka_broker: ThreadedBroker, conn: BrokerConnection,
        unique_topic: Callable[[str], str]) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    group, topic = unique_topic("sg"), unique_topic("t")
    create_topic(conn, topic)
    produce(bootstrap, topic, 20)
    # the group exists (empty) once a member has come and gone
    assert heartbeat(conn, group, "m0", 0, [topic]).error_code == 0
    assert heartbeat(conn, group, "m0", -1, None).error_code == 0
    assert offsets(describe(conn, group, topic)) == {(topic, 0): (20, 0)}
    assert alter(conn, group, topic, {0: 15}).responses[0].partitions[0].error_code == 0
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([topic])
    got: list[int] = []
    deadline = time.monotonic() + 20
    while len(got) < 5 and time.monotonic() < deadline:
        got += [m.offset() for m in consumer.poll(0.5) if m.error() is None]
    assert sorted(got) == [15, 16, 17, 18, 19]
    # implicit acknowledgement: the next poll accepts them, and the group is done
    deadline = time.monotonic() + 10
    while offsets(describe(conn, group, topic)) != {(topic, 0): (20, 0)}:
        assert time.monotonic() < deadline, offsets(describe(conn, group, topic))
        consumer.poll(0.2)
    consumer.close()
