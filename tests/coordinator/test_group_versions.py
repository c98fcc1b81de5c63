"""The group and offset APIs at every version the broker advertises, answers checked against
Kafka's (its classic coordinator, ``KafkaApis`` and the message schemas), error codes included.

Requests go through the registered handlers with real encoding and decoding on both sides
(``conftest.Client``), so each version's layout is exercised along with its meaning.
"""

from __future__ import annotations

import pytest
import trio.testing

from trio_broker.broker.apis.registry import advertised_versions
from trio_broker.broker.coordinator import GroupState
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.consumer_protocol import encode_assignment, encode_subscription
from trio_broker.protocol.errors import ErrorCode as E

G = "versions"
FETCH = request_class(ApiKey.OffsetFetch)
DELETE = request_class(ApiKey.OffsetDelete)


def versions(api_key: ApiKey) -> list[int]:
    r = advertised_versions()[api_key]
    return list(range(r.min, r.max + 1))


def test_group_apis_advertise_kafkas_whole_range():
    expected = {ApiKey.OffsetCommit: (0, 10), ApiKey.OffsetFetch: (0, 10),
                ApiKey.FindCoordinator: (0, 6), ApiKey.JoinGroup: (0, 9),
                ApiKey.Heartbeat: (0, 4), ApiKey.LeaveGroup: (0, 5), ApiKey.SyncGroup: (0, 5),
                ApiKey.DescribeGroups: (0, 6), ApiKey.ListGroups: (0, 5),
                ApiKey.DeleteGroups: (0, 2), ApiKey.OffsetDelete: (0, 0)}
    advertised = advertised_versions()
    assert {k: tuple(advertised[k]) for k in expected} == expected


async def _stable(running, group=G, client_id="c", *, version=5):
    client = running.client(client_id)
    first = await (await client.join(group, version=version)).wait()
    member_id = first.member_id
    if first.error_code == E.MEMBER_ID_REQUIRED:
        first = await (await client.join(group, member_id, version=version)).wait()
    assert first.error_code == 0
    sync = await (await client.sync(group, first.generation_id, member_id,
                                    {member_id: encode_assignment({"t": [0]})})).wait()
    assert sync.error_code == 0
    return client, member_id, first.generation_id


@pytest.mark.parametrize("version", versions(ApiKey.FindCoordinator))
async def test_find_coordinator(start_coordinator, mock_clock, version):
    running = await start_coordinator()
    client = running.client()
    node = (running.state.node_id, "127.0.0.1", 9092)
    if version >= 4:
        body = await client.call(ApiKey.FindCoordinator, version, key_type=1,
                                 coordinator_keys=["txn-a", "txn-b"])
        assert [(c.key, c.error_code, c.node_id, c.host, c.port) for c in body.coordinators] \
            == [("txn-a", 0, *node), ("txn-b", 0, *node)]
        share = await client.call(ApiKey.FindCoordinator, version, key_type=2,
                                  coordinator_keys=["s"])
        assert [(c.error_code, c.node_id) for c in share.coordinators] == [
            (E.INVALID_REQUEST, -1)]
        return
    body = await client.call(ApiKey.FindCoordinator, version, key=G, key_type=0)
    assert (body.error_code, body.node_id, body.host, body.port) == (0, *node)
    if version >= 1:
        assert body.error_message == "NONE"  # Kafka names the error even on success
        bad = await client.call(ApiKey.FindCoordinator, version, key=G, key_type=2)
        assert (bad.error_code, bad.node_id, bad.host, bad.port) == (E.INVALID_REQUEST, -1,
                                                                     "", -1)


@pytest.mark.parametrize("version", versions(ApiKey.JoinGroup))
async def test_join_group(start_coordinator, mock_clock, version):
    running = await start_coordinator()
    client = running.client("joiner")
    first = await (await client.join(G, version=version)).wait()
    if version >= 4:  # KIP-394: a dynamic member first learns its id
        assert (first.error_code, first.generation_id) == (E.MEMBER_ID_REQUIRED, -1)
        first = await (await client.join(G, first.member_id, version=version)).wait()
    assert first.error_code == 0
    assert first.member_id.startswith("joiner-")
    assert (first.generation_id, first.leader, first.protocol_name) == (
        1, first.member_id, "range")
    assert [m.member_id for m in first.members] == [first.member_id]
    if version >= 7:
        assert first.protocol_type == "consumer"
    if version >= 9:
        assert first.skip_assignment is False
    bad = await (await client.join(G, version=version, session_ms=10)).wait()
    assert bad.error_code == E.INVALID_SESSION_TIMEOUT
    assert bad.protocol_name == ("" if version < 7 else None)


@pytest.mark.parametrize("version", versions(ApiKey.SyncGroup))
async def test_sync_group(start_coordinator, mock_clock, version):
    running = await start_coordinator()
    client = running.client()
    member_id, pending = await client.join_known(G)
    gen = (await pending.wait()).generation_id
    assignment = encode_assignment({"t": [1]})
    if version >= 5:
        for kwargs in ({"protocol_type": None}, {"protocol_name": None},
                       {"protocol_name": "roundrobin"}, {"protocol_type": "connect"}):
            refused = await (await client.sync(G, gen, member_id, {member_id: assignment},
                                               version=version, **kwargs)).wait()
            assert refused.error_code == E.INCONSISTENT_GROUP_PROTOCOL, kwargs
        assert running.coordinator.groups[G].state is GroupState.COMPLETING_REBALANCE
    body = await (await client.sync(G, gen, member_id, {member_id: assignment},
                                    version=version)).wait()
    assert (body.error_code, body.assignment) == (0, assignment)
    if version >= 5:
        assert (body.protocol_type, body.protocol_name) == ("consumer", "range")
    again = await (await client.sync(G, gen, member_id, version=version)).wait()
    assert (again.error_code, again.assignment) == (0, assignment)
    stale = await (await client.sync(G, gen - 1, member_id, version=version)).wait()
    assert stale.error_code == E.ILLEGAL_GENERATION


@pytest.mark.parametrize("version", versions(ApiKey.Heartbeat))
async def test_heartbeat(start_coordinator, mock_clock, version):
    running = await start_coordinator()
    client, member_id, gen = await _stable(running)
    assert await client.heartbeat(G, gen, member_id, version=version) == 0
    assert await client.heartbeat(G, gen + 1, member_id, version=version) == \
        E.ILLEGAL_GENERATION
    assert await client.heartbeat("", gen, member_id, version=version) == E.INVALID_GROUP_ID


@pytest.mark.parametrize("version", versions(ApiKey.DescribeGroups))
async def test_describe_groups(start_coordinator, mock_clock, version):
    running = await start_coordinator()
    client, member_id, _ = await _stable(running)
    body = await client.call(ApiKey.DescribeGroups, version, groups=[G, "unknown"],
                             include_authorized_operations=True)
    known, unknown = body.groups
    assert (known.error_code, known.group_state, known.protocol_data) == (0, "Stable", "range")
    assert [m.member_id for m in known.members] == [member_id]
    if version >= 3:  # no authorizer: every group operation (READ, DELETE, DESCRIBE, configs)
        assert set(known.authorized_operations) == {3, 6, 8, 10, 11}
    if version >= 4:
        assert known.members[0].group_instance_id is None
    if version >= 6:
        assert (unknown.error_code, unknown.error_message, unknown.group_state) == (
            E.GROUP_ID_NOT_FOUND, "Group unknown not found.", "Dead")
    else:
        assert (unknown.error_code, unknown.group_state) == (0, "Dead")
    if version >= 3:
        plain = await client.call(ApiKey.DescribeGroups, version, groups=[G],
                                  include_authorized_operations=False)
        assert plain.groups[0].authorized_operations is None  # Kafka: "not requested"


@pytest.mark.parametrize("version", versions(ApiKey.ListGroups))
async def test_list_groups_and_filters(start_coordinator, mock_clock, version):
    running = await start_coordinator()
    await _stable(running, "stable-group")
    await running.client().commit("empty-group", {("t", 0): 1})
    client = running.client()
    body = await client.call(ApiKey.ListGroups, version, states_filter=[], types_filter=[])
    listed = {g.group_id: g for g in body.groups}
    assert set(listed) == {"stable-group", "empty-group"}
    if version >= 4:
        assert (listed["stable-group"].group_state, listed["empty-group"].group_state) == (
            "Stable", "Empty")
        only = await client.call(ApiKey.ListGroups, version, states_filter=[" stable"],
                                 types_filter=[])
        assert [g.group_id for g in only.groups] == ["stable-group"]
        none = await client.call(ApiKey.ListGroups, version, states_filter=["Dead"],
                                 types_filter=[])
        assert none.groups == []
    if version >= 5:
        assert {g.group_type for g in body.groups} == {"classic"}
        for types, expected in ((["CLASSIC"], 2), (["consumer"], 0), (["nonsense"], 0)):
            got = await client.call(ApiKey.ListGroups, version, states_filter=[],
                                    types_filter=types)
            assert len(got.groups) == expected, types


@pytest.mark.parametrize("version", versions(ApiKey.DeleteGroups))
async def test_delete_groups(start_coordinator, mock_clock, version):
    running = await start_coordinator()
    await _stable(running, "busy")
    client = running.client()
    await client.commit("idle", {("t", 0): 1})
    body = await client.call(ApiKey.DeleteGroups, version,
                             groups_names=["idle", "busy", "ghost", "idle"])
    assert [(r.group_id, r.error_code) for r in body.results] == [
        ("idle", 0), ("busy", E.NON_EMPTY_GROUP), ("ghost", E.GROUP_ID_NOT_FOUND)]


# --- OffsetCommit / OffsetFetch ---------------------------------------------------------------

@pytest.mark.parametrize("version", versions(ApiKey.OffsetCommit))
async def test_offset_commit_each_version(start_coordinator, mock_clock, version):
    running = await start_coordinator()
    client, member_id, gen = await _stable(running)
    member = {} if version == 0 else {"generation": gen, "member_id": member_id}
    result = await client.commit(G, {("t", 0): 40 + version, ("nope", 0): 1}, version=version,
                                 leader_epoch=5, metadata="m", **member)
    # v10 names topics by id: a topic that does not exist has no id (KafkaApis: UNKNOWN_TOPIC_ID)
    assert result == {("t", 0): 0, ("nope", 0): E.UNKNOWN_TOPIC_ID if version >= 10
                      else E.UNKNOWN_TOPIC_OR_PARTITION}
    stored = running.coordinator.groups[G].offsets[("t", 0)]
    assert (stored.offset, stored.metadata) == (40 + version, "m")
    assert stored.leader_epoch == (5 if version >= 6 else -1)
    if version >= 1:  # a simple commit to a group with members is refused
        simple = await client.commit(G, {("t", 0): 1}, version=version)
        assert simple == {("t", 0): E.UNKNOWN_MEMBER_ID}
        stale = await client.commit(G, {("t", 0): 1}, version=version, generation=gen + 1,
                                    member_id=member_id)
        assert stale == {("t", 0): E.ILLEGAL_GENERATION}
        # A generation for a group that does not exist: v9 names the problem.
        ghost = await client.commit("ghost", {("t", 0): 1}, version=version, generation=3,
                                    member_id="m")
        assert ghost == {("t", 0): E.GROUP_ID_NOT_FOUND if version >= 9
                         else E.ILLEGAL_GENERATION}


async def test_offset_commit_v0_is_stored_without_membership_checks(start_coordinator,
                                                                    mock_clock):
    """v0 offsets lived in ZooKeeper, outside the group: Kafka stored them whatever the
    group's state."""
    running = await start_coordinator()
    client, *_ = await _stable(running)
    assert await client.commit(G, {("t", 1): 9}, version=0) == {("t", 1): 0}
    assert running.coordinator.groups[G].state is GroupState.STABLE


async def test_offset_commit_v1_commit_timestamp_and_v2_retention(start_coordinator,
                                                                   mock_clock):
    running = await start_coordinator()
    client = running.client()
    assert await client.commit(G, {("t", 0): 1}, version=1, commit_timestamp=1234) == {
        ("t", 0): 0}
    assert running.coordinator.groups[G].offsets[("t", 0)].commit_timestamp_ms == 1234
    assert await client.commit(G, {("t", 1): 1}, version=2, retention_ms=60_000) == {
        ("t", 1): 0}
    om = running.coordinator.groups[G].offsets[("t", 1)]
    assert om.expire_timestamp_ms == om.commit_timestamp_ms + 60_000
    # v5 has no retention field: the broker's retention applies.
    await client.commit(G, {("t", 2): 1}, version=5)
    assert running.coordinator.groups[G].offsets[("t", 2)].expire_timestamp_ms == -1


async def test_simple_commit_with_a_member_id_to_an_empty_group(start_coordinator,
                                                                mock_clock):
    """Kafka checks ``generation < 0 and Empty`` first: a member id alone does not refuse it."""
    running = await start_coordinator()
    client = running.client()
    await client.commit(G, {("t", 0): 1})
    assert await client.commit(G, {("t", 0): 2}, member_id="someone") == {("t", 0): 0}


@pytest.mark.parametrize("version", versions(ApiKey.OffsetFetch))
async def test_offset_fetch_each_version(start_coordinator, mock_clock, version):
    running = await start_coordinator()
    client = running.client()
    assert await client.commit(G, {("t", 0): 7}, version=6, leader_epoch=3,
                               metadata="md") == {("t", 0): 0}
    topics = [FETCH.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])]
    if version >= 8:
        groups = request_class(ApiKey.OffsetFetch).OffsetFetchRequestGroup
        body = await client.call(ApiKey.OffsetFetch, version, require_stable=False, groups=[
            groups(group_id=G, topics=[groups.OffsetFetchRequestTopics(
                name="t", topic_id=client.topic_id("t") if version >= 10 else None,
                partition_indexes=[0, 1])]),
            groups(group_id=G, topics=None), groups(group_id="", topics=None)])
        first, everything, invalid = body.groups
        assert [(p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata,
                 p.error_code) for p in first.topics[0].partitions] == [
            (0, 7, 3, "md", 0), (1, -1, -1, "", 0)]
        assert [(client.topic_name(t, version), [p.committed_offset for p in t.partitions])
                for t in everything.topics] == [("t", [7])]
        assert (invalid.group_id, invalid.error_code, invalid.topics) == (
            "", E.INVALID_GROUP_ID, [])
        return
    body = await client.call(ApiKey.OffsetFetch, version, group_id=G, topics=topics,
                             require_stable=False)
    parts = [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
             for t in body.topics for p in t.partitions]
    # v0 read from ZooKeeper: a partition never committed is UNKNOWN_TOPIC_OR_PARTITION.
    missing = E.UNKNOWN_TOPIC_OR_PARTITION if version == 0 else 0
    assert parts == [(0, 7, "md", 0), (1, -1, "", missing)]
    epochs = [p.committed_leader_epoch for t in body.topics for p in t.partitions]
    assert epochs == ([3, -1] if version >= 5 else [-1, -1])  # the field exists from v5


async def test_offset_fetch_require_stable_waits_for_accepted_commits(start_coordinator,
                                                                     mock_clock):
    running = await start_coordinator()
    client = running.client()
    await client.commit(G, {("t", 0): 1})
    commit = await client.send_commit(G, {("t", 0): 2})
    groups = request_class(ApiKey.OffsetFetch).OffsetFetchRequestGroup
    stable = await client.send(ApiKey.OffsetFetch, 8, require_stable=True, groups=[
        groups(group_id=G, topics=None)])
    assert commit.deferred
    assert stable.deferred  # held behind the commit that is being written
    await commit.wait()
    body = await stable.wait()
    assert body.groups[0].topics[0].partitions[0].committed_offset == 2
    # Nothing pending: answered at once.
    at_once = await client.send(ApiKey.OffsetFetch, 7, group_id=G, topics=None,
                                require_stable=True)
    assert not at_once.deferred


async def test_committed_leader_epochs_survive_a_restart(start_coordinator, mock_clock):
    running = await start_coordinator()
    client = running.client()
    await client.commit(G, {("t", 0): 5, ("t", 1): 6}, version=8, leader_epoch=12)
    await client.commit(G, {("t", 2): 7}, version=8)
    await running.stop()
    running = await start_coordinator()
    offsets = running.coordinator.groups[G].offsets
    assert [offsets[("t", p)].leader_epoch for p in range(3)] == [12, 12, -1]


# --- OffsetDelete -----------------------------------------------------------------------------

def _delete_topics(spec: dict[str, list[int]]) -> list:
    return [DELETE.OffsetDeleteRequestTopic(name=t, partitions=[
        DELETE.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=p)
        for p in ps]) for t, ps in spec.items()]


async def _offset_delete(client, group, spec):
    body = await client.call(ApiKey.OffsetDelete, 0, group_id=group, topics=_delete_topics(spec))
    return body.error_code, {(t.name, p.partition_index): p.error_code
                             for t in body.topics for p in t.partitions}


async def test_offset_delete_rules(start_coordinator, mock_clock):
    running = await start_coordinator()
    client, member_id, gen = await _stable(running)  # subscribes to "t"
    await client.commit(G, {("t", 0): 1, ("u", 0): 2}, generation=gen, member_id=member_id)

    assert await _offset_delete(client, "ghost", {"u": [0]}) == (E.GROUP_ID_NOT_FOUND, {})
    assert await _offset_delete(client, "", {"u": [0]}) == (E.INVALID_GROUP_ID, {})
    # A Stable consumer group: topics it subscribes to are refused, the others deleted.
    error, results = await _offset_delete(client, G, {"t": [0], "u": [0], "nope": [0],
                                                      "x": [5]})
    assert error == 0
    assert results == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): 0,
                       ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
                       ("x", 5): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert set(running.coordinator.groups[G].offsets) == {("t", 0)}

    # A group of another protocol type with members: NON_EMPTY_GROUP.
    other = running.client("connect")
    join = await (await other.join("workers", protocol_type="connect", version=3)).wait()
    await (await other.sync("workers", join.generation_id, join.member_id, {})).wait()
    assert (await _offset_delete(other, "workers", {"u": [0]}))[0] == E.NON_EMPTY_GROUP

    # Once empty, every topic's offsets may go; the deletion is durable.
    assert await client.leave(G, member_id) == 0
    assert await _offset_delete(client, G, {"t": [0]}) == (0, {("t", 0): 0})
    await running.stop()
    running = await start_coordinator()
    assert G not in running.coordinator.groups or not running.coordinator.groups[G].offsets


async def test_offset_delete_of_a_consumer_group_with_unparsable_subscriptions(
        start_coordinator, mock_clock):
    """When the subscriptions cannot be read, Kafka treats the consumer group as subscribed."""
    running = await start_coordinator()
    client = running.client()
    member_id, pending = await client.join_known(G, protocols=[("range", b"\xff")])
    gen = (await pending.wait()).generation_id
    await (await client.sync(G, gen, member_id, {})).wait()
    await client.commit(G, {("u", 0): 2}, generation=gen, member_id=member_id)
    assert await _offset_delete(client, G, {"u": [0]}) == (
        0, {("u", 0): E.GROUP_SUBSCRIBED_TO_TOPIC})
    await trio.testing.wait_all_tasks_blocked()


async def test_subscribed_topics_follow_the_generation(start_coordinator, mock_clock):
    running = await start_coordinator()
    client = running.client()
    sub = encode_subscription(["t", "x"])
    _, pending = await client.join_known(G, protocols=[("range", sub)])
    await pending.wait()
    assert running.coordinator.groups[G].subscribed_topics == frozenset({"t", "x"})
