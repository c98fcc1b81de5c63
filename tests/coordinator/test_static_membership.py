"""Static membership (KIP-345, ``group.instance.id``) and LeaveGroup's batch form, driven
through the registered handlers on an autojump clock, checked against Kafka's classic group
coordinator rules (``GroupMetadataManager`` / ``ClassicGroup``)."""

from __future__ import annotations

import trio

from trio_broker.broker.coordinator import GroupState
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.consumer_protocol import encode_assignment, encode_subscription
from trio_broker.protocol.errors import ErrorCode as E

G = "static-group"
LEAVE = request_class(ApiKey.LeaveGroup)


async def _static_stable(running, instances=("i-a",), *, session_ms=10_000,
                         rebalance_ms=30_000, protocols=None):
    """Static members joined within the initial rebalance delay and synced (the first joiner
    leads): ({instance: (client, member id)}, generation)."""
    clients = {i: running.client(f"client-{i}") for i in instances}
    pendings = {i: await c.join(G, instance_id=i, session_ms=session_ms,
                                rebalance_ms=rebalance_ms, protocols=protocols)
                for i, c in clients.items()}
    joins = {i: await p.wait() for i, p in pendings.items()}
    [gen] = {j.generation_id for j in joins.values()}
    ids = {i: j.member_id for i, j in joins.items()}
    leader = joins[instances[0]].leader
    assert leader == ids[instances[0]]
    assignments = {mid: encode_assignment({"t": [n]}) for n, mid in enumerate(ids.values())}
    syncs = [await clients[i].sync(G, gen, ids[i], instance_id=i) for i in instances[1:]]
    await (await clients[instances[0]].sync(G, gen, leader, assignments,
                                            instance_id=instances[0])).wait()
    for s in syncs:
        assert (await s.wait()).error_code == 0
    assert running.coordinator.groups[G].state is GroupState.STABLE
    return {i: (clients[i], ids[i]) for i in instances}, gen


async def _start(start_coordinator):
    """A coordinator whose new groups wait 100 ms for more members, so joins gather."""
    return await start_coordinator(group_initial_rebalance_delay_ms=100)


async def test_static_member_joins_without_member_id_round_trip(start_coordinator,
                                                                autojump_clock):
    running = await _start(start_coordinator)
    join = await (await running.client("app").join(G, instance_id="host-1")).wait()
    assert join.error_code == 0
    assert join.member_id.startswith("host-1-")
    assert join.generation_id == 1
    [member] = join.members
    assert (member.member_id, member.group_instance_id) == (join.member_id, "host-1")
    described = (await running.client().call(ApiKey.DescribeGroups, 4, groups=[G],
                                              include_authorized_operations=False)).groups[0]
    assert [m.group_instance_id for m in described.members] == ["host-1"]


async def test_restarted_follower_keeps_generation_and_assignment(start_coordinator,
                                                                  autojump_clock):
    running = await _start(start_coordinator)
    members, gen = await _static_stable(running, ("i-a", "i-b"))
    _, old_b = members["i-b"]
    before = running.coordinator.groups[G].members[old_b].assignment

    restarted = running.client("client-i-b")
    join = await (await restarted.join(G, instance_id="i-b")).wait()
    assert join.error_code == 0
    assert join.member_id != old_b
    assert join.member_id.startswith("i-b-")
    assert join.generation_id == gen  # no rebalance
    assert join.members == []
    group = running.coordinator.groups[G]
    assert group.state is GroupState.STABLE
    sync = await (await restarted.sync(G, gen, join.member_id, instance_id="i-b")).wait()
    assert (sync.error_code, sync.assignment) == (0, before)

    # The old incarnation is fenced everywhere it names its instance id.
    assert await restarted.heartbeat(G, gen, old_b, version=3, instance_id="i-b") == \
        E.FENCED_INSTANCE_ID
    old_sync = await (await restarted.sync(G, gen, old_b, instance_id="i-b")).wait()
    assert old_sync.error_code == E.FENCED_INSTANCE_ID
    commit = await restarted.commit(G, {("t", 0): 5}, generation=gen, member_id=old_b,
                                    version=7, instance_id="i-b")
    assert commit == {("t", 0): E.FENCED_INSTANCE_ID}
    old_join = await (await restarted.join(G, old_b, instance_id="i-b")).wait()
    assert old_join.error_code == E.FENCED_INSTANCE_ID
    # ... and, without its instance id, it is simply not a member any more.
    assert await restarted.heartbeat(G, gen, old_b) == E.UNKNOWN_MEMBER_ID
    assert group.state is GroupState.STABLE
    assert group.generation_id == gen


async def test_restarted_static_leader_before_and_after_join_v9(start_coordinator,
                                                                autojump_clock):
    running = await _start(start_coordinator)
    members, gen = await _static_stable(running, ("i-a", "i-b"))
    _, old_a = members["i-a"]
    assert running.coordinator.groups[G].leader_id == old_a

    # JoinGroup v5: the new leader is not told it leads (it would assign again).
    v5 = await (await running.client("client-i-a").join(G, instance_id="i-a")).wait()
    assert v5.generation_id == gen
    assert v5.leader == old_a
    assert v5.members == []
    assert running.coordinator.groups[G].leader_id == v5.member_id

    # JoinGroup v9: it learns it leads and gets the members, but must skip the assignment.
    v9 = await (await running.client("client-i-a").join(G, instance_id="i-a",
                                                        version=9)).wait()
    assert v9.generation_id == gen
    assert (v9.leader, v9.skip_assignment) == (v9.member_id, True)
    assert {(m.member_id, m.group_instance_id) for m in v9.members} == {
        (v9.member_id, "i-a"), (members["i-b"][1], "i-b")}
    assert running.coordinator.groups[G].state is GroupState.STABLE


async def test_restart_that_changes_the_chosen_protocol_rebalances(start_coordinator,
                                                                  autojump_clock):
    running = await _start(start_coordinator)
    sub = encode_subscription(["t"])
    both = [("range", sub), ("roundrobin", sub)]
    members, gen = await _static_stable(running, ("i-a", "i-b"), protocols=both)
    assert running.coordinator.groups[G].protocol_name == "range"
    client_a, _ = members["i-a"]
    client_b, b_id = members["i-b"]
    # a now prefers roundrobin: one vote each, the leader (a) breaks the tie -> rebalance.
    pending = await client_a.join(G, instance_id="i-a", protocols=list(reversed(both)))
    assert running.coordinator.groups[G].state is GroupState.PREPARING_REBALANCE
    b_join = await (await client_b.join(G, b_id, instance_id="i-b", protocols=both)).wait()
    a_join = await pending.wait()
    assert a_join.generation_id == b_join.generation_id == gen + 1
    assert a_join.protocol_name == "roundrobin"
    # A restart offering no protocol the others support is refused, as Kafka refuses it.
    odd = await (await client_a.join(G, instance_id="i-a",
                                     protocols=[("sticky", sub)])).wait()
    assert odd.error_code == E.INCONSISTENT_GROUP_PROTOCOL


async def test_static_member_replaced_while_its_join_is_held(start_coordinator, autojump_clock):
    running = await _start(start_coordinator)
    members, gen = await _static_stable(running, ("i-a", "i-b"))
    client_a, a_id = members["i-a"]
    client_b, b_id = members["i-b"]
    held = await client_a.join(G, a_id, instance_id="i-a")  # starts a rebalance, waits for b
    assert not held.done
    newcomer = await client_a.join(G, instance_id="i-a")
    fenced = await held.wait()
    assert (fenced.error_code, fenced.member_id) == (E.FENCED_INSTANCE_ID, a_id)
    rejoin_b = await client_b.join(G, b_id, instance_id="i-b")
    new_join, b_join = await newcomer.wait(), await rejoin_b.wait()
    assert new_join.generation_id == b_join.generation_id == gen + 1
    assert new_join.member_id != a_id


async def test_static_member_that_does_not_rejoin_is_kept_in_the_next_generation(
        start_coordinator, autojump_clock):
    running = await _start(start_coordinator)
    members, gen = await _static_stable(running, ("i-a", "i-b"), session_ms=30_000,
                                        rebalance_ms=5_000)
    client_a, a_id = members["i-a"]
    _, b_id = members["i-b"]
    start = trio.current_time()
    a_join = await (await client_a.join(G, a_id, instance_id="i-a", rebalance_ms=5_000,
                                        session_ms=30_000)).wait()
    # The join phase ended at the rebalance timeout, and b (static) was kept, not dropped.
    assert a_join.generation_id == gen + 1
    assert {m.member_id for m in a_join.members} == {a_id, b_id}
    assert trio.current_time() - start < 30
    # b never syncs: the sync phase drops it, as it would drop any member.
    await (await client_a.sync(G, gen + 1, a_id, {}, instance_id="i-a")).wait()
    await trio.sleep(31)
    assert b_id not in running.coordinator.groups[G].members
    assert "i-b" not in running.coordinator.groups[G].static_members


async def test_join_with_a_mismatched_instance_id(start_coordinator, autojump_clock):
    running = await _start(start_coordinator)
    members, _ = await _static_stable(running, ("i-a", "i-b"))
    client_a, a_id = members["i-a"]
    wrong = await (await client_a.join(G, a_id, instance_id="i-b")).wait()
    assert wrong.error_code == E.FENCED_INSTANCE_ID
    unknown = await (await client_a.join(G, a_id, instance_id="i-z")).wait()
    assert unknown.error_code == E.UNKNOWN_MEMBER_ID


async def test_leave_group_batch_per_member_errors(start_coordinator, autojump_clock):
    running = await _start(start_coordinator)
    members, _gen = await _static_stable(running, ("i-a", "i-b", "i-c"))
    admin = running.client("admin")
    identities = [
        LEAVE.MemberIdentity(member_id="", group_instance_id="i-b", reason="scale down"),
        LEAVE.MemberIdentity(member_id="", group_instance_id="i-nobody"),
        LEAVE.MemberIdentity(member_id="stale-id", group_instance_id="i-c"),
        LEAVE.MemberIdentity(member_id="not-a-member", group_instance_id=None),
    ]
    body = await admin.call(ApiKey.LeaveGroup, 5, group_id=G, members=identities)
    assert body.error_code == 0
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in body.members] == [
        ("", "i-b", 0), ("", "i-nobody", E.UNKNOWN_MEMBER_ID),
        ("stale-id", "i-c", E.FENCED_INSTANCE_ID), ("not-a-member", None, E.UNKNOWN_MEMBER_ID)]
    group = running.coordinator.groups[G]
    assert members["i-b"][1] not in group.members
    assert group.state is GroupState.PREPARING_REBALANCE

    unknown = await admin.call(ApiKey.LeaveGroup, 3, group_id="no-such-group", members=[
        LEAVE.MemberIdentity(member_id="m", group_instance_id=None)])
    assert unknown.error_code == 0
    assert [m.error_code for m in unknown.members] == [E.UNKNOWN_MEMBER_ID]
    invalid = await admin.call(ApiKey.LeaveGroup, 4, group_id="", members=[])
    assert (invalid.error_code, invalid.members) == (E.INVALID_GROUP_ID, [])


async def test_leave_v0_answers_with_the_members_error(start_coordinator, autojump_clock):
    running = await _start(start_coordinator)
    members, _ = await _static_stable(running, ("i-a",))
    client, a_id = members["i-a"]
    body = await client.call(ApiKey.LeaveGroup, 0, group_id=G, member_id="other")
    assert body.error_code == E.UNKNOWN_MEMBER_ID
    body = await client.call(ApiKey.LeaveGroup, 0, group_id=G, member_id=a_id)
    assert body.error_code == 0
    assert running.coordinator.groups[G].state is GroupState.EMPTY


async def test_pending_member_leaving_a_stable_group_rebalances(start_coordinator,
                                                                autojump_clock):
    """Kafka counts a pending member's leave as a member leaving: the group rebalances."""
    running = await _start(start_coordinator)
    await _static_stable(running, ("i-a",))
    newcomer = running.client("dyn")
    first = await (await newcomer.join(G)).wait()
    assert first.error_code == E.MEMBER_ID_REQUIRED
    assert await newcomer.leave(G, first.member_id) == 0
    assert running.coordinator.groups[G].state is GroupState.PREPARING_REBALANCE
