"""KIP-848 consumer groups through the registered handlers: epochs, target assignments,
incremental reconciliation, leaving, fencing and the timers, checked against Kafka's
``GroupMetadataManager`` / ``CurrentAssignmentBuilder`` rules."""

from __future__ import annotations

import uuid

import trio

from tests.coordinator.kip848 import Member, assignment_of, heartbeat, topic_id
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.errors import ErrorCode as E

G = "cg"


def _no_partition_twice(*members: Member) -> None:
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for m in members:
        for tp in m.owned:
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {m.member_id}"
            seen[tp] = m.member_id


async def _settle(*members: Member, rounds: int = 6) -> None:
    for _ in range(rounds):
        for m in members:
            body = await m.beat()
            assert body.error_code == 0, body
            _no_partition_twice(*members)


async def describe(running, *groups, version=1):
    return (await running.client().call(ApiKey.ConsumerGroupDescribe, version,
                                         group_ids=list(groups),
                                         include_authorized_operations=False)).groups


async def test_first_member_gets_every_partition_at_epoch_one(start_coordinator, mock_clock):
    running = await start_coordinator()
    a = Member(running, G, ["t"], member_id="a")
    body = await a.join()
    assert (body.error_code, body.member_id, body.member_epoch) == (0, "a", 1)
    assert body.heartbeat_interval_ms == 5000  # group.consumer.heartbeat.interval.ms
    t = topic_id(running, "t")
    assert a.owned == {(t, p) for p in range(6)}
    # A heartbeat that changes nothing carries no assignment.
    again = await a.beat()
    assert (again.member_epoch, again.assignment) == (1, None)
    [d] = await describe(running, G)
    assert (d.error_code, d.group_state, d.group_epoch, d.assignment_epoch,
            d.assignor_name) == (0, "Stable", 1, 1, "uniform")
    [m] = d.members
    assert (m.member_id, m.member_epoch, m.subscribed_topic_names, m.member_type) == (
        "a", 1, ["t"], 1)
    assert [(tp.topic_id, tp.topic_name, tp.partitions) for tp in m.assignment.topic_partitions] \
        == [(t, "t", [0, 1, 2, 3, 4, 5])]


async def test_second_member_gets_partitions_only_after_revocation(start_coordinator,
                                                                   mock_clock):
    running = await start_coordinator()
    a = Member(running, G, ["t"], member_id="a")
    await a.join()
    b = Member(running, G, ["t"], member_id="b")
    a.hold = True  # a has not revoked yet
    body = await b.join()
    assert body.member_epoch == 2
    # Everything b's target holds is still owned by a: b waits at epoch 2 with nothing.
    assert b.owned == set()
    [d] = await describe(running, G)
    assert d.group_state == "Reconciling"
    states = {m.member_id: m.member_epoch for m in d.members}
    assert states == {"a": 1, "b": 2}
    # a is told to keep three partitions (revoking the others) and stays at epoch 1 ...
    body = await a.beat()
    assert body.member_epoch == 1
    kept = assignment_of(body)
    assert kept is not None
    assert len(kept) == 3
    assert (await b.beat()).assignment is None  # ... and b still gets nothing
    _no_partition_twice(a, b)
    # a revokes: it moves to epoch 2, and b gets the released partitions.
    a.hold = False
    a.owned = kept
    assert (await a.beat()).member_epoch == 2
    body = await b.beat()
    assert body.member_epoch == 2
    assert len(b.owned) == 3
    assert not (b.owned & a.owned)
    [d] = await describe(running, G)
    assert d.group_state == "Stable"


async def test_three_members_cover_twelve_partitions_and_churn(start_coordinator, mock_clock):
    running = await start_coordinator(topics={"t12": 12})
    members = [Member(running, G, ["t12"], member_id=f"m{i}") for i in range(3)]
    for m in members:
        await m.join()
        _no_partition_twice(*members)
    await _settle(*members)
    t = topic_id(running, "t12")
    assert sorted(len(m.owned) for m in members) == [4, 4, 4]
    assert set().union(*(m.owned for m in members)) == {(t, p) for p in range(12)}
    fourth = Member(running, G, ["t12"], member_id="m3")
    members.append(fourth)
    await fourth.join()
    await _settle(*members)
    assert sorted(len(m.owned) for m in members) == [3, 3, 3, 3]
    # One leaves politely: the others take its partitions.
    assert (await members[0].leave()).member_epoch == -1
    rest = members[1:]
    await _settle(*rest)
    assert sorted(len(m.owned) for m in rest) == [4, 4, 4]
    assert set().union(*(m.owned for m in rest)) == {(t, p) for p in range(12)}


async def test_session_timeout_fences_a_silent_member(start_coordinator, autojump_clock):
    running = await start_coordinator(group_consumer_session_timeout_ms=45_000)
    a = Member(running, G, ["t"], member_id="a")
    b = Member(running, G, ["t"], member_id="b")
    await a.join()
    await b.join()
    await _settle(a, b)
    for _ in range(12):  # a keeps heartbeating every 5 s; b falls silent
        await trio.sleep(5)
        await a.beat()
    assert set(running.coordinator.consumer_groups[G].members) == {"a"}
    assert len(a.owned) == 6
    gone = await b.beat()
    assert gone.error_code == E.UNKNOWN_MEMBER_ID
    assert gone.error_message == f"Member b is not a member of group {G}."


async def test_rebalance_timeout_fences_a_member_that_never_revokes(start_coordinator,
                                                                    autojump_clock):
    running = await start_coordinator()
    a = Member(running, G, ["t"], member_id="a", rebalance_ms=10_000)
    await a.join()
    a.hold = True
    b = Member(running, G, ["t"], member_id="b")
    await b.join()
    for _ in range(4):  # a heartbeats on time but keeps its partitions past 10 s
        await trio.sleep(4)
        await a.beat()
        await b.beat()
    assert (await a.beat()).error_code == E.UNKNOWN_MEMBER_ID
    await b.beat()
    assert len(b.owned) == 6


async def test_member_epoch_checks(start_coordinator, mock_clock):
    running = await start_coordinator()
    a = Member(running, G, ["t"], member_id="a")
    await a.join()
    b = Member(running, G, ["t"], member_id="b")
    await b.join()
    await _settle(a, b)
    assert a.epoch == 2
    owned = sorted(a.owned, key=lambda x: x[1])
    future = await heartbeat(a.client, G, "a", 3, owned=owned)
    assert future.error_code == E.FENCED_MEMBER_EPOCH
    assert "greater member epoch (3)" in future.error_message
    # The previous epoch with a subset of the partitions: the bumped answer was lost.
    lost = await heartbeat(a.client, G, "a", 1, owned=owned[:1])
    assert (lost.error_code, lost.member_epoch) == (0, 2)
    # The previous epoch without partitions, or an older one, is fenced.
    assert (await heartbeat(a.client, G, "a", 1)).error_code == E.FENCED_MEMBER_EPOCH
    assert (await heartbeat(a.client, G, "a", 0, rebalance_timeout_ms=1000,
                            subscribed_topic_names=["t"], owned=[])).error_code == \
        E.FENCED_MEMBER_EPOCH
    # Other members are unaffected.
    assert (await b.beat()).error_code == 0
    assert running.coordinator.consumer_groups[G].group_epoch == 2


async def test_unknown_group_and_member(start_coordinator, mock_clock):
    running = await start_coordinator()
    client = running.client()
    body = await heartbeat(client, "nope", "x", 3, owned=[])
    assert (body.error_code, body.error_message) == (E.GROUP_ID_NOT_FOUND,
                                                     "Consumer group nope not found.")
    a = Member(running, G, ["t"], member_id="a")
    await a.join()
    assert (await heartbeat(client, G, "ghost", 1)).error_code == E.UNKNOWN_MEMBER_ID
    left = await heartbeat(client, G, "ghost", -1)
    assert left.error_code == E.UNKNOWN_MEMBER_ID
    assert (await heartbeat(client, "nope", "x", -1)).error_code == E.GROUP_ID_NOT_FOUND


async def test_subscription_change_revokes_unsubscribed_topics(start_coordinator, mock_clock):
    running = await start_coordinator()
    a = Member(running, G, ["t", "u"], member_id="a")
    await a.join()
    assert len(a.owned) == 7
    a.topics = ["u"]
    body = await a._send(full=True)
    # t's partitions must be revoked first: still epoch 1, only u-0 left assigned ...
    assert body.member_epoch == 1
    assert a.owned == {(topic_id(running, "u"), 0)}
    # ... and once the member no longer reports them it moves to the new epoch.
    assert (await a.beat()).member_epoch == 2


async def test_range_assignor_on_request(start_coordinator, mock_clock):
    running = await start_coordinator(topics={"r1": 4, "r2": 4})
    a = Member(running, G, ["r1", "r2"], member_id="a", assignor="range")
    b = Member(running, G, ["r1", "r2"], member_id="b", assignor="range")
    await a.join()
    await b.join()
    await _settle(a, b)
    r1, r2 = topic_id(running, "r1"), topic_id(running, "r2")
    # Co-partitioned ranges: the same partition numbers of both topics.
    assert a.owned == {(r1, 0), (r1, 1), (r2, 0), (r2, 1)}
    assert b.owned == {(r1, 2), (r1, 3), (r2, 2), (r2, 3)}
    [d] = await describe(running, G)
    assert d.assignor_name == "range"


async def test_leave_group_empties_and_keeps_epochs(start_coordinator, mock_clock):
    running = await start_coordinator()
    a = Member(running, G, ["t"], member_id="a")
    await a.join()
    assert (await a.leave()).member_epoch == -1
    [d] = await describe(running, G)
    assert (d.group_state, d.group_epoch, d.members) == ("Empty", 2, [])
    # The same id may join again from scratch.
    body = await a.join()
    assert (body.error_code, body.member_epoch) == (0, 3)


async def test_consumer_protocol_can_be_disabled(start_coordinator, mock_clock):
    running = await start_coordinator(group_coordinator_rebalance_protocols="classic")
    body = await heartbeat(running.client(), G, "a", 0, rebalance_timeout_ms=1000,
                           subscribed_topic_names=["t"], owned=[])
    assert body.error_code == E.UNSUPPORTED_VERSION


async def test_group_max_size(start_coordinator, mock_clock):
    running = await start_coordinator(group_consumer_max_size=1)
    a = Member(running, G, ["t"], member_id="a")
    await a.join()
    b = Member(running, G, ["t"], member_id="b")
    body = await b.join()
    assert body.error_code == E.GROUP_MAX_SIZE_REACHED
    assert body.error_message == "The consumer group has reached its maximum capacity of 1 " \
        "members."
    assert (await a.beat()).error_code == 0


async def test_v0_member_id_may_come_from_the_coordinator(start_coordinator, mock_clock):
    running = await start_coordinator()
    body = await heartbeat(running.client(), G, "", 0, version=0, rebalance_timeout_ms=1000,
                           subscribed_topic_names=["t"], owned=[])
    assert body.error_code == 0
    assert uuid.UUID(body.member_id)
    # v1 requires the member to bring its own id.
    body = await heartbeat(running.client(), G, "", 0, version=1, rebalance_timeout_ms=1000,
                           subscribed_topic_names=["t"], owned=[])
    assert (body.error_code, body.error_message) == (E.INVALID_REQUEST,
                                                     "MemberId can't be empty.")


async def test_a_groups_own_session_timeout_and_heartbeat_interval(start_coordinator,
                                                                   autojump_clock):
    """The GROUP config resource's consumer.* keys act on that group alone: its members are
    told its heartbeat interval and expire after its session timeout; another group keeps the
    broker's."""
    running = await start_coordinator(group_consumer_session_timeout_ms=45_000,
                                      group_consumer_heartbeat_interval_ms=5_000)
    iac = request_class(ApiKey.IncrementalAlterConfigs)
    answer = await running.client("admin").call(
        ApiKey.IncrementalAlterConfigs, 1, validate_only=False, resources=[
            iac.AlterConfigsResource(resource_type=32, resource_name=G, configs=[
                iac.AlterConfigsResource.AlterableConfig(
                    name="consumer.session.timeout.ms", config_operation=0, value="60000"),
                iac.AlterConfigsResource.AlterableConfig(
                    name="consumer.heartbeat.interval.ms", config_operation=0, value="8000")])])
    assert answer.responses[0].error_code == 0, answer
    own = Member(running, G, ["t"], member_id="own")
    default = Member(running, "cg-broker-default", ["t"], member_id="default")
    assert (await own.join()).heartbeat_interval_ms == 8000
    assert (await default.join()).heartbeat_interval_ms == 5000
    await trio.sleep(50)  # both silent: past the broker's 45 s, within the group's 60 s
    assert set(running.coordinator.consumer_groups["cg-broker-default"].members) == set()
    assert set(running.coordinator.consumer_groups[G].members) == {"own"}
    await trio.sleep(15)
    assert set(running.coordinator.consumer_groups[G].members) == set()
