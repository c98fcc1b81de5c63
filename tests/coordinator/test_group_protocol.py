"""The classic group protocol, driven through the registered handlers on an autojump clock."""

from __future__ import annotations

import trio
import trio.testing

from trio_broker.broker.coordinator import GroupState
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from trio_broker.protocol.errors import ErrorCode as E

G = "group-a"


async def _stable_single(running, client_id="c1", **join_kwargs):
    """One member joined and synced: (client, member id, generation)."""
    client = running.client(client_id)
    member_id, pending = await client.join_known(G, **join_kwargs)
    join = await pending.wait()
    assert join.error_code == 0
    sync = await (await client.sync(G, join.generation_id, member_id,
                                    {member_id: encode_assignment({"t": [0]})})).wait()
    assert sync.error_code == 0
    return client, member_id, join.generation_id


async def test_join_requires_member_id_then_completes(start_coordinator, autojump_clock):
    running = await start_coordinator()
    client = running.client("app-1")
    first = await (await client.join(G)).wait()
    assert first.error_code == E.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("app-1-")
    assert first.generation_id == -1
    assert first.members == []

    pending = await client.join(G, first.member_id)
    join = await pending.wait()
    assert join.error_code == 0
    assert join.member_id == first.member_id
    assert join.leader == first.member_id
    assert join.generation_id == 1
    assert join.protocol_name == "range"
    assert [(m.member_id, decode_subscription(m.metadata).topics) for m in join.members] == [
        (first.member_id, ["t"])]
    assert running.coordinator.groups[G].state is GroupState.COMPLETING_REBALANCE


async def test_old_join_versions_skip_member_id_round_trip(start_coordinator, autojump_clock):
    running = await start_coordinator()
    for version in (0, 1, 2, 3):
        client = running.client(f"v{version}")
        join = await (await client.join(f"g{version}", version=version)).wait()
        assert join.error_code == 0, version
        assert join.member_id.startswith(f"v{version}-")
        assert join.generation_id == 1


async def test_sync_held_until_leader_assigns(start_coordinator, autojump_clock):
    running = await start_coordinator()
    a, b = running.client("a"), running.client("b")
    a_id, a_pending = await a.join_known(G)
    a_join = await a_pending.wait()
    await (await a.sync(G, a_join.generation_id, a_id, {a_id: b""})).wait()

    # b joins: a learns of the rebalance through its heartbeat, rejoins; both get generation 2.
    b_id, b_pending = await b.join_known(G)
    assert b_pending.deferred
    assert not b_pending.done
    assert await a.heartbeat(G, a_join.generation_id, a_id) == E.REBALANCE_IN_PROGRESS
    a_pending = await a.join(G, a_id)
    a_join, b_join = await a_pending.wait(), await b_pending.wait()
    assert a_join.generation_id == b_join.generation_id == 2
    assert a_join.leader == b_join.leader == a_id
    assert {m.member_id for m in a_join.members} == {a_id, b_id}
    assert b_join.members == []  # only the leader learns the members

    follower_sync = await b.sync(G, 2, b_id)
    await trio.testing.wait_all_tasks_blocked()
    assert follower_sync.deferred
    assert not follower_sync.done
    assert running.coordinator.groups[G].state is GroupState.COMPLETING_REBALANCE
    assignments = {a_id: encode_assignment({"t": [0, 1, 2]}),
                   b_id: encode_assignment({"t": [3, 4, 5]})}
    leader_sync = await (await a.sync(G, 2, a_id, assignments)).wait()
    follower = await follower_sync.wait()
    assert decode_assignment(leader_sync.assignment).partitions == {"t": [0, 1, 2]}
    assert decode_assignment(follower.assignment).partitions == {"t": [3, 4, 5]}
    assert running.coordinator.groups[G].state is GroupState.STABLE

    # In Stable, SyncGroup answers at once with the stored assignment.
    again = await (await b.sync(G, 2, b_id)).wait()
    assert again.assignment == assignments[b_id]


async def test_member_left_out_by_leader_gets_empty_assignment(start_coordinator,
                                                               autojump_clock):
    running = await start_coordinator()
    a, b = running.client("a"), running.client("b")
    a_id, a_pending = await a.join_known(G)
    b_id, b_pending = await b.join_known(G)
    a_join = await a_pending.wait()
    if a_join.generation_id == 1:  # b joined after the first generation formed
        a_join = await (await a.join(G, a_id)).wait()
    b_join = await b_pending.wait()
    gen = b_join.generation_id
    leader = a if a_join.leader == a_id else b
    leader_id = a_join.leader
    follower, follower_id = (b, b_id) if leader is a else (a, a_id)
    f_sync = await follower.sync(G, gen, follower_id)
    await (await leader.sync(G, gen, leader_id, {leader_id: b"x"})).wait()
    assert (await f_sync.wait()).assignment == b""


async def test_heartbeat_answer_in_each_state(start_coordinator, autojump_clock):
    running = await start_coordinator()
    a, b = running.client("a"), running.client("b")
    assert await a.heartbeat("no-such-group", 0, "m") == E.UNKNOWN_MEMBER_ID

    a_id, a_pending = await a.join_known(G)
    a_join = await a_pending.wait()
    # CompletingRebalance: NONE (clients may heartbeat before their SyncGroup).
    assert running.coordinator.groups[G].state is GroupState.COMPLETING_REBALANCE
    assert await a.heartbeat(G, 1, a_id) == E.NONE
    assert await a.heartbeat(G, 0, a_id) == E.ILLEGAL_GENERATION
    await (await a.sync(G, 1, a_id, {a_id: b""})).wait()
    # Stable: NONE.
    assert await a.heartbeat(G, a_join.generation_id, a_id) == E.NONE
    assert await a.heartbeat(G, a_join.generation_id, "stranger") == E.UNKNOWN_MEMBER_ID
    # PreparingRebalance: REBALANCE_IN_PROGRESS.
    _, b_pending = await b.join_known(G)
    assert running.coordinator.groups[G].state is GroupState.PREPARING_REBALANCE
    assert await a.heartbeat(G, 1, a_id) == E.REBALANCE_IN_PROGRESS
    # Empty: everyone gone -> UNKNOWN_MEMBER_ID.
    assert await a.leave(G, a_id) == E.NONE
    b_join = await b_pending.wait()
    assert await b.leave(G, b_join.member_id) == E.NONE
    assert running.coordinator.groups[G].state is GroupState.EMPTY
    assert await a.heartbeat(G, b_join.generation_id, a_id) == E.UNKNOWN_MEMBER_ID


async def test_session_expiry_evicts_and_rebalances(start_coordinator, autojump_clock):
    running = await start_coordinator()
    a, b = running.client("a"), running.client("b")
    a_id, a_pending = await a.join_known(G, session_ms=6000)
    b_id, b_pending = await b.join_known(G, session_ms=20_000)
    a_join = await a_pending.wait()
    if a_join.generation_id == 1:
        a_join = await (await a.join(G, a_id, session_ms=6000)).wait()
    b_join = await b_pending.wait()
    gen = b_join.generation_id
    leader, leader_id = (a, a_id) if a_join.leader == a_id else (b, b_id)
    follower, follower_id = (b, b_id) if leader is a else (a, a_id)
    f_sync = await follower.sync(G, gen, follower_id)
    await (await leader.sync(G, gen, leader_id, {a_id: b"A", b_id: b"B"})).wait()
    await f_sync.wait()

    # b heartbeats every 2 s; a falls silent and is evicted after its 6 s session.
    start = trio.current_time()
    answer = E.NONE
    while answer == E.NONE:
        await trio.sleep(2)
        answer = await b.heartbeat(G, gen, b_id)
    assert answer == E.REBALANCE_IN_PROGRESS
    assert 6 <= trio.current_time() - start <= 8
    assert a_id not in running.coordinator.groups[G].members
    assert await a.heartbeat(G, gen, a_id) == E.UNKNOWN_MEMBER_ID

    rejoin = await (await b.join(G, b_id, session_ms=20_000)).wait()
    assert rejoin.generation_id == gen + 1
    assert rejoin.leader == b_id
    assert [m.member_id for m in rejoin.members] == [b_id]


async def test_rebalance_timeout_drops_members_that_do_not_rejoin(start_coordinator,
                                                                  autojump_clock):
    running = await start_coordinator()
    a, b, c = running.client("a"), running.client("b"), running.client("c")
    # Leader a and follower b, stable at some generation.
    a_id, a_pending = await a.join_known(G, rebalance_ms=20_000)
    a_join = await a_pending.wait()
    await (await a.sync(G, a_join.generation_id, a_id, {a_id: b""})).wait()
    b_id, b_pending = await b.join_known(G, rebalance_ms=20_000)
    a_join = await (await a.join(G, a_id, rebalance_ms=20_000)).wait()
    gen = a_join.generation_id
    b_sync = await b.sync(G, gen, b_id)
    await (await a.sync(G, gen, a_id, {})).wait()
    await b_sync.wait()
    await b_pending.wait()

    # c joins; a rejoins at once; b keeps heartbeating but never rejoins.
    start = trio.current_time()
    c_id, c_pending = await c.join_known(G, rebalance_ms=20_000)
    a_pending = await a.join(G, a_id, rebalance_ms=20_000)
    b_answers = []
    while not c_pending.done:
        await trio.sleep(3)
        b_answers.append(await b.heartbeat(G, gen, b_id))
    a_join, c_join = await a_pending.wait(), await c_pending.wait()
    assert 20 <= trio.current_time() - start <= 23
    assert set(b_answers[:-1]) == {E.REBALANCE_IN_PROGRESS}
    assert a_join.generation_id == c_join.generation_id == gen + 1
    assert {m.member_id for m in a_join.members} == {a_id, c_id}
    assert await b.heartbeat(G, gen, b_id) == E.UNKNOWN_MEMBER_ID


async def test_leader_keeps_its_role_and_a_new_one_is_chosen_when_it_leaves(start_coordinator,
                                                                          autojump_clock):
    running = await start_coordinator()
    a, b = running.client("a"), running.client("b")
    a_id, a_member = await a.join_known(G)
    await a_member.wait()
    await (await a.sync(G, 1, a_id, {})).wait()
    b_id, b_pending = await b.join_known(G)
    b_join = await b_pending.wait() if b_pending.done else None
    a_join = await (await a.join(G, a_id)).wait()
    b_join = b_join or await b_pending.wait()
    assert a_join.leader == b_join.leader == a_id

    # The leader leaves: b becomes leader of the next generation.
    assert await a.leave(G, a_id) == E.NONE
    b_join = await (await b.join(G, b_id)).wait()
    assert b_join.leader == b_id
    assert [m.member_id for m in b_join.members] == [b_id]


async def test_protocol_chosen_by_vote(start_coordinator, autojump_clock):
    running = await start_coordinator(group_initial_rebalance_delay_ms=1000)
    sub = encode_subscription(["t"])
    prefs = {"a": ["range", "roundrobin"], "b": ["roundrobin", "range"],
             "c": ["roundrobin", "sticky", "range"]}
    pendings = []
    for name, protocols in prefs.items():
        client = running.client(name)
        _, pending = await client.join_known(G, protocols=[(p, sub) for p in protocols])
        pendings.append(pending)
    joins = [await p.wait() for p in pendings]
    assert {j.generation_id for j in joins} == {1}
    assert {j.protocol_name for j in joins} == {"roundrobin"}
    # A member sharing no protocol with the group is refused.
    odd = await (await running.client("d").join(G, protocols=[("sticky", sub)])).wait()
    assert odd.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    summary = (await running.client().describe(G))[0]
    assert summary.group_state == "CompletingRebalance"


async def test_initial_rebalance_delay_gathers_members(start_coordinator, autojump_clock):
    running = await start_coordinator(group_initial_rebalance_delay_ms=3000)
    start = trio.current_time()
    pendings = []
    for i in range(3):
        _, pending = await running.client(f"m{i}").join_known(G)
        pendings.append(pending)
        await trio.sleep(2)  # each arrival extends the wait by one delay
    joins = [await p.wait() for p in pendings]
    assert {j.generation_id for j in joins} == {1}
    assert len(next(j for j in joins if j.members).members) == 3
    assert trio.current_time() - start >= 9


async def test_leave_last_member_makes_group_empty(start_coordinator, autojump_clock):
    running = await start_coordinator()
    client, member_id, gen = await _stable_single(running)
    assert await client.leave(G, member_id) == E.NONE
    group = running.coordinator.groups[G]
    assert group.state is GroupState.EMPTY
    assert group.generation_id == gen + 1
    described = (await client.describe(G))[0]
    assert (described.group_state, described.members) == ("Empty", [])
    assert await client.leave(G, member_id) == E.UNKNOWN_MEMBER_ID


async def test_pending_member_id_expires_after_session_timeout(start_coordinator,
                                                               autojump_clock):
    running = await start_coordinator()
    client = running.client("slow")
    first = await (await client.join(G, session_ms=6000)).wait()
    assert first.error_code == E.MEMBER_ID_REQUIRED
    await trio.sleep(6.5)
    late = await (await client.join(G, first.member_id, session_ms=6000)).wait()
    assert late.error_code == E.UNKNOWN_MEMBER_ID


async def test_member_that_never_syncs_is_dropped_after_rebalance_timeout(start_coordinator,
                                                                         autojump_clock):
    running = await start_coordinator()
    client = running.client("lazy")
    member_id, pending = await client.join_known(G, session_ms=30_000, rebalance_ms=10_000)
    await pending.wait()
    await trio.sleep(10.5)  # no SyncGroup, no heartbeat needed to notice
    assert member_id not in running.coordinator.groups[G].members
    assert running.coordinator.groups[G].state is GroupState.EMPTY


async def _stable_pair(running, group=G):
    """Members a (leader) and b, Stable: (a, a_id, b, b_id, generation)."""
    a, b = running.client("a"), running.client("b")
    a_id, a_pending = await a.join_known(group)
    a_join = await a_pending.wait()
    await (await a.sync(group, a_join.generation_id, a_id, {a_id: b""})).wait()
    b_id, b_pending = await b.join_known(group)
    gen = (await (await a.join(group, a_id)).wait()).generation_id
    await b_pending.wait()
    b_sync = await b.sync(group, gen, b_id)
    await (await a.sync(group, gen, a_id, {a_id: b"A", b_id: b"B"})).wait()
    await b_sync.wait()
    return a, a_id, b, b_id, gen


async def test_group_max_size(start_coordinator, autojump_clock):
    """Kafka's acceptJoiningMember: members count in a formed generation, members already
    waiting count while rebalancing, so the last to rejoin an oversized group are turned away."""
    running = await start_coordinator(group_max_size=2)
    a, a_id, b, b_id, gen = await _stable_pair(running)
    c = running.client("c")
    assert (await (await c.join(G)).wait()).error_code == E.GROUP_MAX_SIZE_REACHED

    # Rebalancing with one member waiting: c may join, then b's rejoin is one too many.
    a_pending = await a.join(G, a_id)
    assert running.coordinator.groups[G].state is GroupState.PREPARING_REBALANCE
    c_id, c_pending = await c.join_known(G)
    refused = await (await b.join(G, b_id)).wait()
    assert refused.error_code == E.GROUP_MAX_SIZE_REACHED
    assert b_id not in running.coordinator.groups[G].members
    a_join, c_join = await a_pending.wait(), await c_pending.wait()
    assert a_join.generation_id == c_join.generation_id == gen + 1
    assert {m.member_id for m in a_join.members} == {a_id, c_id}


async def test_held_join_does_not_hold_the_handler(start_coordinator, autojump_clock):
    running = await start_coordinator()
    await _stable_single(running, "a")
    _, pending = await running.client("b").join_known(G)
    # The handler returned DEFERRED at once; the response is still outstanding.
    assert pending.deferred
    assert not pending.done


async def test_describe_list_and_delete(start_coordinator, autojump_clock):
    running = await start_coordinator()
    client, member_id, _ = await _stable_single(running, "describer")
    described = (await client.describe(G, "unknown-group"))
    stable, unknown = described
    assert (stable.error_code, stable.group_state, stable.protocol_type,
            stable.protocol_data) == (0, "Stable", "consumer", "range")
    [member] = stable.members
    assert (member.member_id, member.client_id, member.client_host) == (
        member_id, "describer", "/127.0.0.1")
    assert decode_assignment(member.member_assignment).partitions == {"t": [0]}
    assert decode_subscription(member.member_metadata).topics == ["t"]
    assert (unknown.error_code, unknown.group_state, unknown.members) == (0, "Dead", [])

    listed = await client.call(ApiKey.ListGroups, 1)
    assert [(g.group_id, g.protocol_type) for g in listed.groups] == [(G, "consumer")]

    deleted = await client.call(ApiKey.DeleteGroups, 1, groups_names=[G, "nope"])
    assert {r.group_id: r.error_code for r in deleted.results} == {
        G: E.NON_EMPTY_GROUP, "nope": E.GROUP_ID_NOT_FOUND}
    assert await client.leave(G, member_id) == E.NONE
    deleted = await client.call(ApiKey.DeleteGroups, 1, groups_names=[G])
    assert [(r.group_id, r.error_code) for r in deleted.results] == [(G, 0)]
    assert (await client.call(ApiKey.ListGroups, 1)).groups == []


async def test_find_coordinator_answers_with_this_broker(start_coordinator, autojump_clock):
    running = await start_coordinator()
    for version, fields in ((0, {"key": G}), (1, {"key": G, "key_type": 0}),
                            (1, {"key": "txn", "key_type": 1})):
        body = await running.client().call(ApiKey.FindCoordinator, version, **fields)
        assert (body.error_code, body.node_id, body.host, body.port) == (
            0, running.state.node_id, "127.0.0.1", 9092)


async def test_shutdown_answers_held_requests(start_coordinator, autojump_clock):
    running = await start_coordinator()
    # Group G: b's JoinGroup is held because a has not rejoined yet.
    await _stable_single(running, "a")
    b = running.client("b")
    _, b_join = await b.join_known(G)
    # Group "other": the follower's SyncGroup is held until the leader's.
    leader, follower = running.client("leader"), running.client("follower")
    leader_id, leader_join = await leader.join_known("other")
    follower_id, follower_join = await follower.join_known("other")
    if (await leader_join.wait()).generation_id == 1:
        leader_join = await leader.join("other", leader_id)
    gen = (await follower_join.wait()).generation_id
    assert (await leader_join.wait()).leader == leader_id
    follower_sync = await follower.sync("other", gen, follower_id)
    await trio.testing.wait_all_tasks_blocked()
    assert not b_join.done
    assert not follower_sync.done

    running.coordinator.begin_shutdown()
    assert (await b_join.wait()).error_code == E.COORDINATOR_NOT_AVAILABLE
    assert (await follower_sync.wait()).error_code == E.COORDINATOR_NOT_AVAILABLE
    assert await follower.heartbeat("other", gen, follower_id) == E.COORDINATOR_NOT_AVAILABLE
