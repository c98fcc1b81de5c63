"""KIP-848 consumer groups: bad input gets Kafka's codes and messages without touching the
group, static members, regular-expression subscriptions, offsets with member epochs, and the
rule that a group id speaks one protocol at a time."""

from __future__ import annotations

import pytest

from tests.coordinator.kip848 import Member, create_topic, heartbeat, topic_id
from trio_broker.broker.security.patterns import MAX_PATTERN_LENGTH
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.errors import ErrorCode as E

G = "cg-rules"
FETCH = request_class(ApiKey.OffsetFetch)


async def _stable_pair(running):
    a = Member(running, G, ["t"], member_id="a")
    b = Member(running, G, ["t"], member_id="b")
    await a.join()
    await b.join()
    for _ in range(3):
        await a.beat()
        await b.beat()
    return a, b


def _join_fields(**overrides):
    fields = {"rebalance_timeout_ms": 30_000, "subscribed_topic_names": ["t"], "owned": []}
    fields.update(overrides)
    return fields


BAD = [
    ("blank member id at v1", "", 0, _join_fields(), E.INVALID_REQUEST,
     "MemberId can't be empty."),
    ("blank member id leaving", "  ", -1, {}, E.INVALID_REQUEST, "MemberId can't be empty."),
    ("blank instance id", "x", 0, _join_fields(instance_id=" "), E.INVALID_REQUEST,
     "InstanceId can't be empty."),
    ("blank rack id", "x", 0, _join_fields(rack_id=""), E.INVALID_REQUEST,
     "RackId can't be empty."),
    ("join without rebalance timeout", "x", 0, _join_fields(rebalance_timeout_ms=-1),
     E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."),
    ("join owning partitions", "x", 0, _join_fields(owned=None), E.INVALID_REQUEST,
     "TopicPartitions must be empty when (re-)joining."),
    ("join without subscription", "x", 0, _join_fields(subscribed_topic_names=None),
     E.INVALID_REQUEST, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null "
     "when (re-)joining."),
    ("static leave without instance", "x", -2, {}, E.INVALID_REQUEST,
     "InstanceId can't be null."),
    ("epoch below -2", "x", -3, {}, E.INVALID_REQUEST, "MemberEpoch is invalid."),
    ("unknown assignor", "x", 0, _join_fields(server_assignor="sticky"),
     E.UNSUPPORTED_ASSIGNOR, "ServerAssignor sticky is not supported. Supported assignors: "
     "uniform, range."),
    ("invalid regex", "x", 0, _join_fields(subscribed_topic_names=None,
                                          subscribed_topic_regex="(unclosed"),
     E.INVALID_REGULAR_EXPRESSION, None),
    ("lookahead regex (not RE2)", "x", 0, _join_fields(subscribed_topic_names=None,
                                                      subscribed_topic_regex="(?=t).*"),
     E.INVALID_REGULAR_EXPRESSION, None),
    ("over-long regex", "x", 0, _join_fields(subscribed_topic_names=None,
                                            subscribed_topic_regex="t" * (MAX_PATTERN_LENGTH + 1)),
     E.INVALID_REGULAR_EXPRESSION, None),
    ("epoch from the future", "a", 99, {"owned": []}, E.FENCED_MEMBER_EPOCH, None),
    ("unknown member", "ghost", 2, {"owned": []}, E.UNKNOWN_MEMBER_ID,
     "Member ghost is not a member of group cg-rules."),
]


@pytest.mark.parametrize(("member_id", "epoch", "fields", "code", "message"),
                         [b[1:] for b in BAD], ids=[b[0] for b in BAD])
async def test_bad_heartbeats_leave_the_group_alone(start_coordinator, mock_clock, member_id,
                                                    epoch, fields, code, message):
    running = await start_coordinator()
    a, b = await _stable_pair(running)
    group = running.coordinator.consumer_groups[G]
    before = (group.group_epoch, group.assignment_epoch, dict(group.members))
    body = await heartbeat(running.client("bad"), G, member_id, epoch, **fields)
    assert body.error_code == code
    if message is not None:
        assert body.error_message == message
    else:
        assert body.error_message
    assert (group.group_epoch, group.assignment_epoch, dict(group.members)) == before
    for m in (a, b):
        assert (await m.beat()).error_code == 0


async def test_invalid_regex_message_names_the_expression(start_coordinator, mock_clock):
    running = await start_coordinator()
    body = await heartbeat(running.client(), G, "x", 0, **_join_fields(
        subscribed_topic_names=None, subscribed_topic_regex="t[z-a]"))
    assert body.error_code == E.INVALID_REGULAR_EXPRESSION
    assert body.error_message.startswith(
        "SubscribedTopicRegex `t[z-a]` is not a valid regular expression: ")
    assert G not in running.coordinator.consumer_groups  # the group was never created


async def test_regex_subscription_picks_up_a_topic_created_later(start_coordinator,
                                                                  mock_clock):
    running = await start_coordinator(topics={"logs-a": 2, "other": 3})
    a = Member(running, G, regex="logs-.*", member_id="a")
    await a.join()
    logs_a = topic_id(running, "logs-a")
    assert a.owned == {(logs_a, 0), (logs_a, 1)}
    epoch = a.epoch
    logs_b = await create_topic(running, "logs-b", 3)
    body = await a.beat()
    assert body.member_epoch == epoch + 1
    assert a.owned == {(logs_a, 0), (logs_a, 1)} | {(logs_b, p) for p in range(3)}
    # A topic that does not match changes nothing.
    await create_topic(running, "not-logs", 1)
    assert (await a.beat()).member_epoch == epoch + 1
    [d] = (await running.client().call(ApiKey.ConsumerGroupDescribe, 1, group_ids=[G],
                                        include_authorized_operations=False)).groups
    assert d.members[0].subscribed_topic_regex == "logs-.*"


async def test_regex_matches_whole_names(start_coordinator, mock_clock):
    running = await start_coordinator(topics={"t": 1, "tt": 1, "xt": 1})
    a = Member(running, G, regex="t+", member_id="a")
    await a.join()
    assert {tid for tid, _ in a.owned} == {topic_id(running, "t"), topic_id(running, "tt")}


@pytest.mark.timeout(60)  # a backtracking matcher would hang here, not fail
async def test_a_catastrophic_regex_resolves_at_once(start_coordinator, mock_clock):
    # Python's ``re`` takes 2**40 steps for ``(a|a)+`` against the first name; RE2 is linear.
    running = await start_coordinator(topics={"a" * 40 + "-": 1, "a" * 40: 1})
    a = Member(running, G, regex="(a|a)+", member_id="a")
    await a.join()
    assert {tid for tid, _ in a.owned} == {topic_id(running, "a" * 40)}


async def test_static_member_restart_keeps_partitions(start_coordinator, mock_clock):
    running = await start_coordinator()
    a = Member(running, G, ["t"], member_id="a1", instance_id="host-a")
    b = Member(running, G, ["t"], member_id="b", instance_id="host-b")
    await a.join()
    await b.join()
    for _ in range(3):
        await a.beat()
        await b.beat()
    before, epoch = set(a.owned), running.coordinator.consumer_groups[G].group_epoch
    # While the first incarnation is active, its instance id cannot be taken.
    clash = Member(running, G, ["t"], member_id="a2", instance_id="host-a")
    body = await clash.join()
    assert body.error_code == E.UNRELEASED_INSTANCE_ID
    # It leaves for a restart (-2): it keeps its place and partitions.
    assert (await a.leave(-2)).member_epoch == -2
    body = await clash.join()
    assert (body.error_code, body.member_id) == (0, "a2")
    assert clash.owned == before
    assert running.coordinator.consumer_groups[G].group_epoch == epoch  # no rebalance
    assert (await b.beat()).assignment is None  # b noticed nothing
    # The old member id is fenced by the new one.
    old = await heartbeat(a.client, G, "a1", 1, instance_id="host-a")
    assert old.error_code == E.FENCED_INSTANCE_ID
    unknown = await heartbeat(a.client, G, "zz", 1, instance_id="host-z")
    assert (unknown.error_code, unknown.error_message) == (E.UNKNOWN_MEMBER_ID,
                                                           "Instance id host-z is unknown.")


async def test_offsets_with_member_epochs(start_coordinator, mock_clock):
    running = await start_coordinator()
    a, _ = await _stable_pair(running)
    client = running.client()
    ok = await client.commit(G, {("t", 0): 10}, generation=a.epoch, member_id="a", version=9)
    assert ok == {("t", 0): 0}
    stale = await client.commit(G, {("t", 0): 11}, generation=a.epoch - 1, member_id="a",
                                version=9)
    assert stale == {("t", 0): E.STALE_MEMBER_EPOCH}
    old_version = await client.commit(G, {("t", 0): 11}, generation=a.epoch, member_id="a",
                                      version=8)
    assert old_version == {("t", 0): E.UNSUPPORTED_VERSION}
    assert await client.commit(G, {("t", 0): 12}, generation=a.epoch, member_id="zz",
                               version=9) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # An admin commit (-1) while members are in: UNKNOWN_MEMBER_ID, as Kafka.
    assert await client.commit(G, {("t", 0): 13}, version=9) == {("t", 0): E.UNKNOWN_MEMBER_ID}

    def fetch(member_id, epoch):
        return client.call(ApiKey.OffsetFetch, 9, require_stable=False, groups=[
            FETCH.OffsetFetchRequestGroup(group_id=G, member_id=member_id, member_epoch=epoch,
                                          topics=None)])

    good = (await fetch("a", a.epoch)).groups[0]
    assert good.error_code == 0
    assert [(p.partition_index, p.committed_offset) for t in good.topics
            for p in t.partitions] == [(0, 10)]
    assert (await fetch("a", a.epoch + 1)).groups[0].error_code == E.STALE_MEMBER_EPOCH
    assert (await fetch("zz", 1)).groups[0].error_code == E.UNKNOWN_MEMBER_ID
    assert (await fetch(None, -1)).groups[0].error_code == 0  # an admin fetch


async def test_one_protocol_per_group_id(start_coordinator, mock_clock):
    running = await start_coordinator()
    a, _ = await _stable_pair(running)
    classic = running.client("classic")
    # A member of another protocol type cannot join; a consumer-protocol member's id is
    # unknown to the classic requests (classic members of the consumer embedded protocol are
    # served by the group: tests/coordinator/test_online_migration.py).
    join = await (await classic.join(G, protocol_type="connect")).wait()
    assert join.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert await classic.heartbeat(G, 1, "a") == E.UNKNOWN_MEMBER_ID
    # DescribeGroups speaks of classic groups only.
    old = (await classic.describe(G))[0]
    assert (old.error_code, old.group_state) == (0, "Dead")
    new = (await classic.call(ApiKey.DescribeGroups, 6, groups=[G],
                              include_authorized_operations=False)).groups[0]
    assert (new.error_code, new.error_message) == (E.GROUP_ID_NOT_FOUND,
                                                   f"Group {G} is not a classic group.")
    listed = await classic.call(ApiKey.ListGroups, 5, states_filter=[], types_filter=[])
    assert [(g.group_id, g.group_type, g.protocol_type, g.group_state)
            for g in listed.groups] == [(G, "consumer", "consumer", "Stable")]
    only_classic = await classic.call(ApiKey.ListGroups, 5, states_filter=[],
                                      types_filter=["Classic"])
    assert only_classic.groups == []
    # Empty again, the group id may go back to the classic protocol, offsets kept.
    await classic.commit(G, {("t", 1): 7}, generation=a.epoch, member_id="a", version=9)
    for m in (a, _):
        await m.leave()
    deleted = await classic.call(ApiKey.DeleteGroups, 2, groups_names=["nope"])
    assert deleted.results[0].error_code == E.GROUP_ID_NOT_FOUND
    _member_id, pending = await classic.join_known(G)
    assert (await pending.wait()).error_code == 0
    assert G not in running.coordinator.consumer_groups
    assert (await classic.fetch(G, [("t", 1)]))[1] == {("t", 1): (7, "")}


async def test_heartbeat_to_a_classic_group(start_coordinator, mock_clock):
    running = await start_coordinator()
    classic = running.client("classic")
    # A group of another protocol type (Kafka Connect's) cannot be upgraded online.
    _member_id, pending = await classic.join_known(G, protocol_type="connect")
    assert (await pending.wait()).error_code == 0
    body = await heartbeat(running.client(), G, "x", 0, **_join_fields())
    assert body.error_code == E.GROUP_ID_NOT_FOUND
    body = await heartbeat(running.client(), G, "x", 1, owned=[])
    assert (body.error_code, body.error_message) == (E.GROUP_ID_NOT_FOUND,
                                                     f"Group {G} is not a consumer group.")
    d = (await running.client().call(ApiKey.ConsumerGroupDescribe, 0, group_ids=[G],
                                      include_authorized_operations=False)).groups[0]
    assert (d.error_code, d.error_message) == (E.GROUP_ID_NOT_FOUND,
                                               f"Group {G} is not a consumer group.")
    # An empty classic group (offsets only) becomes a consumer group, offsets kept.
    await classic.commit("offsets-only", {("t", 2): 3})
    a = Member(running, "offsets-only", ["t"], member_id="a")
    assert (await a.join()).error_code == 0
    assert "offsets-only" not in running.coordinator.groups
    assert (await classic.fetch("offsets-only", [("t", 2)]))[1] == {("t", 2): (3, "")}


async def test_delete_groups(start_coordinator, mock_clock):
    running = await start_coordinator()
    a, b = await _stable_pair(running)
    client = running.client()
    body = await client.call(ApiKey.DeleteGroups, 2, groups_names=[G])
    assert body.results[0].error_code == E.NON_EMPTY_GROUP
    await a.leave()
    await b.leave()
    body = await client.call(ApiKey.DeleteGroups, 2, groups_names=[G])
    assert body.results[0].error_code == 0
    assert G not in running.coordinator.consumer_groups
