"""Share group requests on the wire (the blocking client's connection, raw message bodies):
Kafka's error codes for a stale member epoch, an unknown member, an invalid heartbeat, share
session epochs, acknowledgements of records not acquired and overlapping ranges, and the state
unchanged after each; renew acknowledgements (KIP-1222)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from trio_broker.broker.coordinator.share import RecordState
from trio_broker.client.blocking import BrokerConnection, parse_address
from trio_broker.protocol.api_keys import SUPPORTED_VERSIONS, ApiKey, request_class
from trio_broker.protocol.errors import ErrorCode
from trio_broker.testing import ThreadedBroker

SF = request_class(ApiKey.ShareFetch)
SA = request_class(ApiKey.ShareAcknowledge)


@pytest.fixture
def conn(kafka_broker: ThreadedBroker) -> Iterator[BrokerConnection]:
    with BrokerConnection(*parse_address(kafka_broker.bootstrap_servers)) as c:
        yield c


def create_topic(conn: BrokerConnection, name: str) -> uuid.UUID:
    conn.call(ApiKey.CreateTopics, 5, topics=[request_class(ApiKey.CreateTopics).CreatableTopic(
        name=name, num_partitions=1, replication_factor=1)], timeout_ms=10000)
    meta = conn.call(ApiKey.Metadata, 12, topics=[
        request_class(ApiKey.Metadata).MetadataRequestTopic(name=name)])
    return meta.topics[0].topic_id


def produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, value=b"%d" % i)
    assert p.flush(20) == 0


def heartbeat(conn: BrokerConnection, group: str, member: str, epoch: int,
              topics: list[str] | None) -> Any:
    return conn.call(ApiKey.ShareGroupHeartbeat, 1, group_id=group, member_id=member,
                     member_epoch=epoch, subscribed_topic_names=topics)


def share_fetch(conn: BrokerConnection, group: str, member: str, epoch: int, topic_id: uuid.UUID,
                acks: list[tuple[int, int, list[int]]] | None = None, **extra: Any) -> Any:
    batches = [SF.FetchTopic.FetchPartition.AcknowledgementBatch(
        first_offset=f, last_offset=la, acknowledge_types=t) for f, la, t in acks or []]
    return conn.call(ApiKey.ShareFetch, 1, group_id=group, member_id=member,
                     share_session_epoch=epoch, max_wait_ms=extra.get("max_wait_ms", 0),
                     min_bytes=1, max_bytes=1 << 20, max_records=500, batch_size=500,
                     topics=[SF.FetchTopic(topic_id=topic_id, partitions=[
                         SF.FetchTopic.FetchPartition(partition_index=0,
                                                      acknowledgement_batches=batches)])])


def share_ack(conn: BrokerConnection, group: str, member: str, epoch: int, topic_id: uuid.UUID,
              acks: list[tuple[int, int, list[int]]]) -> Any:
    return conn.call(ApiKey.ShareAcknowledge, 1, group_id=group, member_id=member,
                     share_session_epoch=epoch, topics=[SA.AcknowledgeTopic(
                         topic_id=topic_id, partitions=[SA.AcknowledgeTopic.AcknowledgePartition(
                             partition_index=0, acknowledgement_batches=[
                                 SA.AcknowledgeTopic.AcknowledgePartition.AcknowledgementBatch(
                                     first_offset=f, last_offset=la, acknowledge_types=t)
                                 for f, la, t in acks])])])


def acquired(response: Any) -> list[tuple[int, int, int]]:
    return [(r.first_offset, r.last_offset, r.delivery_count)
            for t in response.responses for p in t.partitions for r in p.acquired_records]


def test_the_share_apis_are_advertised_at_kafka_4_2s_versions(conn: BrokerConnection) -> None:
    answer = conn.call(ApiKey.ApiVersions, 3, client_software_name="t",
                       client_software_version="1")
    ranges = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert ranges[ApiKey.ShareGroupHeartbeat] == (1, 1)
    assert ranges[ApiKey.ShareGroupDescribe] == (1, 1)
    assert ranges[ApiKey.ShareFetch] == (1, 2)
    assert ranges[ApiKey.ShareAcknowledge] == (1, 2)
    assert SUPPORTED_VERSIONS[ApiKey.ShareFetch] == (1, 2)


def test_heartbeat_errors(conn: BrokerConnection, unique_topic: Callable[[str], str]) -> None:
    group, topic = unique_topic("sg"), unique_topic("t")
    assert heartbeat(conn, group, "", 0, [topic]).error_code == ErrorCode.INVALID_REQUEST
    assert heartbeat(conn, group, "m1", 0, None).error_code == ErrorCode.INVALID_REQUEST
    assert heartbeat(conn, group, "m1", -2, [topic]).error_code == ErrorCode.INVALID_REQUEST
    # a group never joined
    assert heartbeat(conn, group, "m1", 3, None).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    joined = heartbeat(conn, group, "m1", 0, [topic])
    assert joined.error_code == 0
    assert joined.member_id == "m1"
    assert joined.member_epoch == 1
    heartbeat(conn, group, "m2", 0, [topic])  # the group epoch moves on
    moved = heartbeat(conn, group, "m1", 1, None)
    assert moved.error_code == 0
    assert moved.member_epoch == 2
    stale = heartbeat(conn, group, "m1", 1, None)
    assert stale.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert heartbeat(conn, group, "m1", 2, None).error_code == 0  # still a member
    assert heartbeat(conn, group, "m3", 1, None).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    left = heartbeat(conn, group, "m1", -1, None)
    assert (left.error_code, left.member_epoch) == (0, -1)
    described = conn.call(ApiKey.ShareGroupDescribe, 1, group_ids=[group, unique_topic("none")],
                          include_authorized_operations=False).groups
    assert [m.member_id for m in described[0].members] == ["m2"]
    assert described[0].group_state == "Stable"
    assert described[1].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    listed = conn.call(ApiKey.ListGroups, 5, states_filter=[], types_filter=["Share"]).groups
    assert (group, "share", "Stable", "share") in {
        (g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed}
    consumers = conn.call(ApiKey.ListGroups, 5, states_filter=[], types_filter=["consumer"])
    assert group not in {g.group_id for g in consumers.groups}
    deleted = conn.call(ApiKey.DeleteGroups, 2, groups_names=[group]).results
    assert [r.error_code for r in deleted] == [ErrorCode.NON_EMPTY_GROUP]
    assert heartbeat(conn, group, "m2", -1, None).error_code == 0
    deleted = conn.call(ApiKey.DeleteGroups, 2, groups_names=[group]).results
    assert [r.error_code for r in deleted] == [0]
    gone = conn.call(ApiKey.ShareGroupDescribe, 1, group_ids=[group],
                     include_authorized_operations=False).groups
    assert gone[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_session_and_acknowledgement_errors_leave_the_state_unchanged(
        kafka_broker: ThreadedBroker, conn: BrokerConnection,
        unique_topic: Callable[[str], str]) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    group, topic = unique_topic("sg"), unique_topic("t")
    topic_id = create_topic(conn, topic)
    hb = heartbeat(conn, group, "m1", 0, [topic])
    assert [tp.topic_id for tp in hb.assignment.topic_partitions] == [topic_id]
    heartbeat(conn, group, "m2", 0, [topic])
    produce(bootstrap, topic, 10)  # after the subscription: latest is where the group starts
    # no session yet
    assert share_fetch(conn, group, "m1", 1, topic_id).error_code == (
        ErrorCode.SHARE_SESSION_NOT_FOUND)
    first = share_fetch(conn, group, "m1", 0, topic_id)
    assert first.error_code == 0
    assert acquired(first) == [(0, 9, 1)]
    assert first.acquisition_lock_timeout_ms == 30000
    # the session is at epoch 1 now: 0 opens a new one, 5 is not its epoch
    assert share_fetch(conn, group, "m1", 5, topic_id).error_code == (
        ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    # m2 acknowledging m1's records: INVALID_RECORD_STATE, nothing changes
    second = share_fetch(conn, group, "m2", 0, topic_id, acks=[(0, 4, [1])])
    part = second.responses[0].partitions[0]
    assert part.acknowledge_error_code == ErrorCode.INVALID_RECORD_STATE
    assert acquired(second) == []
    # overlapping ranges: INVALID_REQUEST; ShareAcknowledge may not open a session
    overlap = share_ack(conn, group, "m1", 1, topic_id, [(0, 4, [1]), (3, 6, [1])])
    assert overlap.responses[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST
    assert share_ack(conn, group, "m1", 0, topic_id, [(0, 0, [1])]).error_code == (
        ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    # unknown group / member ids are not sessions
    assert share_ack(conn, unique_topic("nogroup"), "m1", 1, topic_id,
                     [(0, 0, [1])]).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    # out of order (descending) ranges: INVALID_REQUEST; records never fetched, and a batch
    # whose second half was never fetched: INVALID_RECORD_STATE, the first half not applied
    for epoch, acks, error in ((2, [(5, 6, [1]), (0, 1, [1])], ErrorCode.INVALID_REQUEST),
                               (3, [(50, 60, [1])], ErrorCode.INVALID_RECORD_STATE),
                               (4, [(0, 4, [1]), (8, 12, [1])],
                                ErrorCode.INVALID_RECORD_STATE)):
        refused = share_ack(conn, group, "m1", epoch, topic_id, acks)
        assert refused.responses[0].partitions[0].error_code == error, acks
    # the state is as it was: m1 accepts all ten (the session moved to 5 with the refusals)
    ok = share_ack(conn, group, "m1", 5, topic_id, [(0, 9, [1])])
    assert ok.error_code == 0
    assert ok.responses[0].partitions[0].error_code == 0
    assert kafka_broker.broker is not None
    sp = kafka_broker.broker.state.shares.partitions[(group, topic_id, 0)]
    assert (sp.start_offset, sp.end_offset, sp.in_flight) == (10, 10, {})


def test_renew_acknowledgements_on_the_wire(
        kafka_broker: ThreadedBroker, conn: BrokerConnection,
        unique_topic: Callable[[str], str]) -> None:
    """KIP-1222: RENEW (type 4) only in a v2 request with IsRenewAck; a renewing ShareFetch asks
    for nothing and gets nothing; renewing records the member does not hold is
    INVALID_RECORD_STATE; the delivery count is unchanged and the state unchanged on refusals."""
    group, topic = unique_topic("sg"), unique_topic("t")
    topic_id = create_topic(conn, topic)
    heartbeat(conn, group, "m1", 0, [topic])
    heartbeat(conn, group, "m2", 0, [topic])
    produce(kafka_broker.bootstrap_servers, topic, 4)
    assert acquired(share_fetch(conn, group, "m1", 0, topic_id)) == [(0, 3, 1)]
    share_fetch(conn, group, "m2", 0, topic_id)  # m2's session, holding nothing
    assert kafka_broker.broker is not None
    sp = kafka_broker.broker.state.shares.partitions[(group, topic_id, 0)]
    before = {o: (r.state, r.delivery_count, r.member_id, r.deadline)
              for o, r in sp.in_flight.items()}

    def renew_fetch(member: str, epoch: int, acks: list[tuple[int, int, list[int]]],
                    *, renew: bool = True, max_records: int = 0) -> Any:
        batches = [SF.FetchTopic.FetchPartition.AcknowledgementBatch(
            first_offset=f, last_offset=la, acknowledge_types=t) for f, la, t in acks]
        return conn.call(ApiKey.ShareFetch, 2, group_id=group, member_id=member,
                         share_session_epoch=epoch, max_wait_ms=0, min_bytes=0, max_bytes=0,
                         max_records=max_records, batch_size=0, share_acquire_mode=0,
                         is_renew_ack=renew, topics=[SF.FetchTopic(topic_id=topic_id, partitions=[
                             SF.FetchTopic.FetchPartition(partition_index=0,
                                                          acknowledgement_batches=batches)])])

    # a renewing ShareFetch asking for records: INVALID_REQUEST as a whole
    asks = renew_fetch("m1", 1, [(0, 0, [4])], max_records=10)
    assert asks.error_code == ErrorCode.INVALID_REQUEST
    # RENEW without IsRenewAck (v2), or in v1: INVALID_REQUEST for the partition
    assert renew_fetch("m1", 1, [(0, 0, [4])], renew=False).responses[0].partitions[
        0].acknowledge_error_code == ErrorCode.INVALID_REQUEST
    assert share_ack(conn, group, "m1", 2, topic_id, [(0, 0, [4])]).responses[0].partitions[
        0].error_code == ErrorCode.INVALID_REQUEST
    # m2 renewing m1's records, m1 renewing records past its own: INVALID_RECORD_STATE
    theirs = renew_fetch("m2", 1, [(0, 1, [4])])
    assert theirs.responses[0].partitions[0].acknowledge_error_code == (
        ErrorCode.INVALID_RECORD_STATE)
    past = conn.call(ApiKey.ShareAcknowledge, 2, group_id=group, member_id="m1",
                     share_session_epoch=3, is_renew_ack=True, topics=[SA.AcknowledgeTopic(
                         topic_id=topic_id, partitions=[SA.AcknowledgeTopic.AcknowledgePartition(
                             partition_index=0, acknowledgement_batches=[
                                 SA.AcknowledgeTopic.AcknowledgePartition.AcknowledgementBatch(
                                     first_offset=2, last_offset=9, acknowledge_types=[4])])])])
    assert past.responses[0].partitions[0].error_code == ErrorCode.INVALID_RECORD_STATE
    assert past.acquisition_lock_timeout_ms == 30000
    assert {o: (r.state, r.delivery_count, r.member_id, r.deadline)
            for o, r in sp.in_flight.items()} == before
    # m1 renews two and accepts one in the same renewing ShareFetch: nothing acquired
    ok = renew_fetch("m1", 4, [(0, 1, [4]), (2, 2, [1])])
    assert ok.error_code == 0
    [part] = ok.responses[0].partitions
    assert (part.acknowledge_error_code, part.acquired_records, part.records) == (0, [], None)
    assert {o: (r.state, r.delivery_count, r.member_id) for o, r in sp.in_flight.items()} == {
        0: (RecordState.ACQUIRED, 1, "m1"), 1: (RecordState.ACQUIRED, 1, "m1"),
        2: (RecordState.ACKNOWLEDGED, 1, ""), 3: (RecordState.ACQUIRED, 1, "m1")}
    assert sp.in_flight[0].deadline > before[0][3]
    assert sp.in_flight[3].deadline == before[3][3]
