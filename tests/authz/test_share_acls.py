"""Share groups under the ACL authorizer: READ on the group before anything else (a ShareFetch
without it is GROUP_AUTHORIZATION_FAILED even with no share session), then READ on each topic
(TOPIC_AUTHORIZATION_FAILED per partition)."""

from __future__ import annotations

from tests.authz.wire_login import creation, login
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.errors import ErrorCode
from trio_broker.testing import ThreadedBroker

TOPIC, GROUP, READ = 2, 3, 3
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
