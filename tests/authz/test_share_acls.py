"""Share groups under the ACL authorizer: READ on the group before anything else (a ShareFetch
without it is GROUP_AUTHORIZATION_FAILED even with no share session), then READ on each topic
(TOPIC_AUTHORIZATION_FAILED per partition)."""

from __future__ import annotations

from tests.authz.wire_login import creation, login
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.errors import ErrorCode
from trio_broker.testing import ThreadedBroker

TOPIC, GROUP, READ, DELETE, DESCRIBE = 2, 3, 3, 6, 8
SF = request_class(ApiKey.ShareFetch)


async def test_group_then_topic_authorization(acl_broker: ThreadedBroker) -> None:
    admin, alice = await login(acl_broker, "admin"), await login(acl_broker, "alice")
    topic, group = "share-acl-t", "share-acl-g"
    created = await admin.request(ApiKey.CreateTopics, 7, timeout_ms=10000, topics=[
        request_class(ApiKey.CreateTopics).CreatableTopic(
            name=topic, num_partitions=1, replication_factor=1)])
    topic_id = created.topics[0].topic_id

    async def heartbeat(epoch: int) -> int:
        answer = await alice.request(ApiKey.ShareGroupHeartbeat, 1, group_id=group,
                                     member_id="alice-1", member_epoch=epoch,
                                     subscribed_topic_names=[topic] if epoch == 0 else None)
        return int(answer.error_code)

    async def share_fetch(epoch: int) -> tuple[int, list[int]]:
        answer = await alice.request(
            ApiKey.ShareFetch, 1, group_id=group, member_id="alice-1",
            share_session_epoch=epoch, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
            max_records=10, batch_size=10, topics=[SF.FetchTopic(
                topic_id=topic_id, partitions=[SF.FetchTopic.FetchPartition(partition_index=0)])])
        return answer.error_code, [p.error_code for t in answer.responses for p in t.partitions]

    assert await heartbeat(0) == ErrorCode.GROUP_AUTHORIZATION_FAILED
    # group authorization comes before the share session (epoch 7 has none)
    assert await share_fetch(7) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, [])
    await admin.request(ApiKey.CreateAcls, 3, creations=[
        creation(3, GROUP, group, "User:alice", READ)])
    assert await heartbeat(0) == 0
    assert await share_fetch(7) == (ErrorCode.SHARE_SESSION_NOT_FOUND, [])
    assert await share_fetch(0) == (0, [ErrorCode.TOPIC_AUTHORIZATION_FAILED])
    await admin.request(ApiKey.CreateAcls, 3, creations=[
        creation(3, TOPIC, topic, "User:alice", READ)])
    assert await share_fetch(1) == (0, [])  # nothing to acquire: no partition to answer


async def test_share_group_offset_apis_authorization(acl_broker: ThreadedBroker) -> None:
    """Kafka's order: the group (DESCRIBE to describe, READ to alter, DELETE to delete), then
    each topic (DESCRIBE, READ, READ); a describe-all leaves out topics not authorized."""
    admin, bob = await login(acl_broker, "admin"), await login(acl_broker, "bob")
    topic, group = "share-acl-offsets-t", "share-acl-offsets-g"
    describe_cls = request_class(ApiKey.DescribeShareGroupOffsets)
    group_cls = describe_cls.DescribeShareGroupOffsetsRequestGroup
    alter_cls = request_class(ApiKey.AlterShareGroupOffsets).AlterShareGroupOffsetsRequestTopic
    delete_cls = request_class(ApiKey.DeleteShareGroupOffsets)
    await admin.request(ApiKey.CreateTopics, 7, timeout_ms=10000, topics=[
        request_class(ApiKey.CreateTopics).CreatableTopic(
            name=topic, num_partitions=1, replication_factor=1)])
    # the group exists, initialized on the topic, and empty
    for epoch in (0, -1):
        await admin.request(ApiKey.ShareGroupHeartbeat, 1, group_id=group, member_id="a-1",
                            member_epoch=epoch,
                            subscribed_topic_names=[topic] if epoch == 0 else None)

    async def describe(named: bool) -> tuple[int, list[tuple[str, int]]]:
        topics = [group_cls.DescribeShareGroupOffsetsRequestTopic(
            topic_name=topic, partitions=[0])] if named else None
        [g] = (await bob.request(ApiKey.DescribeShareGroupOffsets, 1, groups=[
            group_cls(group_id=group, topics=topics)])).groups
        return g.error_code, [(t.topic_name, p.error_code) for t in g.topics
                              for p in t.partitions]

    async def alter() -> tuple[int, list[int]]:
        answer = await bob.request(ApiKey.AlterShareGroupOffsets, 0, group_id=group, topics=[
            alter_cls(topic_name=topic, partitions=[
                alter_cls.AlterShareGroupOffsetsRequestPartition(partition_index=0,
                                                                 start_offset=0)])])
        return answer.error_code, [p.error_code for t in answer.responses for p in t.partitions]

    async def delete() -> tuple[int, list[int]]:
        answer = await bob.request(ApiKey.DeleteShareGroupOffsets, 0, group_id=group, topics=[
            delete_cls.DeleteShareGroupOffsetsRequestTopic(topic_name=topic)])
        return answer.error_code, [t.error_code for t in answer.responses]

    denied = ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert (await describe(True), await alter(), await delete()) == (
        (denied, []), (denied, []), (denied, []))
    await admin.request(ApiKey.CreateAcls, 3, creations=[
        creation(3, GROUP, group, "User:bob", op) for op in (DESCRIBE, READ, DELETE)])
    topic_denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert await describe(True) == (0, [(topic, topic_denied)])
    assert await describe(False) == (0, [])
    assert await alter() == (0, [topic_denied])
    assert await delete() == (0, [topic_denied])
    await admin.request(ApiKey.CreateAcls, 3, creations=[
        creation(3, TOPIC, topic, "User:bob", op) for op in (DESCRIBE, READ)])
    assert await describe(False) == (0, [(topic, 0)])
    assert await alter() == (0, [0])
    assert await delete() == (0, [0])
