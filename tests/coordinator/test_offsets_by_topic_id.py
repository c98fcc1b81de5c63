"""OffsetCommit and OffsetFetch v10 (Kafka 4.2, KIP-848): topics named by id, over a socket.

Kafka's ``KafkaApis`` resolves each id to a name first; an id no topic has is answered
UNKNOWN_TOPIC_ID for every partition asked (after the commit's or fetch's other topics), and the
answer names each topic by its id only. v9 still names topics and reads the same offsets.
"""

from __future__ import annotations

import uuid

from tests.wire import RawClient
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.errors import ErrorCode as E

COMMIT = request_class(ApiKey.OffsetCommit).OffsetCommitRequestTopic
FETCH = request_class(ApiKey.OffsetFetch).OffsetFetchRequestGroup
G = "by-id"


def _commit_topic(offsets: dict[int, int], *, name: str = "", topic_id: uuid.UUID | None = None):
    part = COMMIT.OffsetCommitRequestPartition
    return COMMIT(name=name, topic_id=topic_id, partitions=[
        part(partition_index=p, committed_offset=o, committed_metadata=f"m{o}")
        for p, o in offsets.items()])


async def _commit(client: RawClient, version: int, *topics) -> dict:
    body = await client.request(ApiKey.OffsetCommit, version, group_id=G, topics=list(topics))
    return {(t.topic_id if version >= 10 else t.name, p.partition_index): p.error_code
            for t in body.topics for p in t.partitions}


async def _fetch(client: RawClient, version: int, topics) -> tuple[int, dict]:
    body = await client.request(ApiKey.OffsetFetch, version, require_stable=False,
                                groups=[FETCH(group_id=G, topics=topics)])
    (group,) = body.groups
    return group.error_code, {
        (t.topic_id if version >= 10 else t.name, p.partition_index):
            (p.committed_offset, p.metadata, p.error_code)
        for t in group.topics for p in t.partitions}


async def test_v10_commits_and_fetches_by_topic_id(trio_broker):
    trio_broker.state.logs.create_topic("a", 2, {})
    trio_broker.state.logs.create_topic("b", 1, {})
    a, b = (trio_broker.state.logs.topic_id(t) for t in "ab")
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    try:
        committed = await _commit(client, 10, _commit_topic({0: 5, 1: 6}, topic_id=a),
                                  _commit_topic({0: 7, 3: 1}, topic_id=b))
        assert committed == {(a, 0): 0, (a, 1): 0, (b, 0): 0,
                             (b, 3): E.UNKNOWN_TOPIC_OR_PARTITION}
        asked = [FETCH.OffsetFetchRequestTopics(topic_id=a, partition_indexes=[1, 0]),
                 FETCH.OffsetFetchRequestTopics(topic_id=b, partition_indexes=[0])]
        assert await _fetch(client, 10, asked) == (0, {
            (a, 1): (6, "m6", 0), (a, 0): (5, "m5", 0), (b, 0): (7, "m7", 0)})
        # all topics: each named by its id
        assert await _fetch(client, 10, None) == (0, {
            (a, 0): (5, "m5", 0), (a, 1): (6, "m6", 0), (b, 0): (7, "m7", 0)})
        # v9 reads the same offsets by name, and names them in its answer
        by_name = [FETCH.OffsetFetchRequestTopics(name="a", partition_indexes=[0])]
        assert await _fetch(client, 9, by_name) == (0, {("a", 0): (5, "m5", 0)})
    finally:
        await client.aclose()


async def test_v10_an_unknown_topic_id_is_unknown_topic_id(trio_broker):
    trio_broker.state.logs.create_topic("known", 1, {})
    known = trio_broker.state.logs.topic_id("known")
    stranger = uuid.uuid4()
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    try:
        committed = await _commit(client, 10, _commit_topic({0: 3, 1: 4}, topic_id=stranger),
                                  _commit_topic({0: 9}, topic_id=known),
                                  _commit_topic({0: 1}, topic_id=None))
        assert committed == {(stranger, 0): E.UNKNOWN_TOPIC_ID, (stranger, 1): E.UNKNOWN_TOPIC_ID,
                             (known, 0): 0, (None, 0): E.UNKNOWN_TOPIC_ID}
        asked = [FETCH.OffsetFetchRequestTopics(topic_id=stranger, partition_indexes=[0, 1]),
                 FETCH.OffsetFetchRequestTopics(topic_id=known, partition_indexes=[0])]
        error, found = await _fetch(client, 10, asked)
        assert error == 0
        # the known topic first (the coordinator's answer), then the unknown id's partitions
        assert list(found.items()) == [
            ((known, 0), (9, "m9", 0)), ((stranger, 0), (-1, "", E.UNKNOWN_TOPIC_ID)),
            ((stranger, 1), (-1, "", E.UNKNOWN_TOPIC_ID))]
    finally:
        await client.aclose()


async def test_v9_is_unchanged(trio_broker):
    trio_broker.state.logs.create_topic("named", 1, {})
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    try:
        committed = await _commit(client, 9, _commit_topic({0: 2}, name="named"),
                                  _commit_topic({0: 2}, name="missing"))
        assert committed == {("named", 0): 0, ("missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        by_name = [FETCH.OffsetFetchRequestTopics(name="named", partition_indexes=[0])]
        assert await _fetch(client, 9, by_name) == (0, {("named", 0): (2, "m2", 0)})
        assert await _fetch(client, 9, None) == (0, {("named", 0): (2, "m2", 0)})
        # v10 reads what v9 committed
        named = trio_broker.state.logs.topic_id("named")
        by_id = [FETCH.OffsetFetchRequestTopics(topic_id=named, partition_indexes=[0])]
        assert await _fetch(client, 10, by_id) == (0, {(named, 0): (2, "m2", 0)})
    finally:
        await client.aclose()


async def test_v10_all_topics_leaves_out_a_topic_without_an_id(trio_broker):
    """Offsets can outlive their topic; v10 can only name a topic by its id, so (as Kafka's
    KafkaApis does) a fetch of every topic leaves out one that no longer has an id."""
    logs = trio_broker.state.logs
    logs.create_topic("kept", 1, {})
    logs.create_topic("gone", 1, {})
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    try:
        assert await _commit(client, 9, _commit_topic({0: 1}, name="kept"),
                             _commit_topic({0: 2}, name="gone")) == {("kept", 0): 0,
                                                                     ("gone", 0): 0}
        logs.delete_topic("gone")
        error, by_name = await _fetch(client, 9, None)
        kept = logs.topic_id("kept")
        assert (await _fetch(client, 10, None)) == (0, {(kept, 0): (1, "m1", 0)})
        # v9 still names the deleted topic's offsets
        assert (error, set(by_name)) == (0, {("kept", 0), ("gone", 0)})
    finally:
        await client.aclose()
