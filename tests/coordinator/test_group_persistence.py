"""Groups survive restarts: group metadata is replayed from ``groups.log`` so members carry on
in the same generation or epoch (Kafka's ``GroupMetadataManager.replay`` and ``onLoaded``)."""

from __future__ import annotations

import trio

from tests.coordinator.kip848 import Member
from trio_broker.broker.coordinator.group_log import FILE_NAME, GroupLog, encode_record
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.consumer_protocol import encode_assignment
from trio_broker.protocol.errors import ErrorCode as E

CG = "kip848-group"
G = "classic-group"


async def _consumer_pair(running):
    a = Member(running, CG, ["t"], member_id="a")
    b = Member(running, CG, ["t"], member_id="b", instance_id="host-b")
    await a.join()
    await b.join()
    for _ in range(3):
        await a.beat()
        await b.beat()
    return a, b


async def _crash(running):
    """Stop without the orderly close: only what was already fsynced is on disk."""
    running.scope.cancel()
    await running.stopped.wait()
    running.coordinator.store.log.close()
    running.coordinator.offset_log.close()


def _append(path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def _rebind(member, running):
    member.client = running.client(member.client.client_id)


async def test_consumer_group_comes_back_with_epochs_and_assignments(start_coordinator,
                                                                     mock_clock):
    running = await start_coordinator()
    a, b = await _consumer_pair(running)
    group = running.coordinator.consumer_groups[CG]
    before = (group.group_epoch, group.assignment_epoch, dict(group.members),
              dict(group.target_assignment))
    await _crash(running)

    running = await start_coordinator()
    group = running.coordinator.consumer_groups[CG]
    assert (group.group_epoch, group.assignment_epoch, dict(group.members),
            dict(group.target_assignment)) == before
    assert group.static_members == {"host-b": "b"}
    for m in (a, b):
        _rebind(m, running)
        body = await m.beat()
        assert (body.error_code, body.member_epoch, body.assignment) == (0, m.epoch, None)


async def test_loaded_members_session_timers_restart(start_coordinator, autojump_clock):
    running = await start_coordinator()
    a, _b = await _consumer_pair(running)
    await running.stop()
    running = await start_coordinator()
    _rebind(a, running)
    for _ in range(10):  # only a heartbeats after the restart
        await trio.sleep(5)
        assert (await a.beat()).error_code == 0
    assert set(running.coordinator.consumer_groups[CG].members) == {"a"}
    await a.beat()
    assert len(a.owned) == 6


async def _classic_stable(running):
    """Two members of one generation (the coordinator waits 100 ms for joiners)."""
    leader, follower = running.client("leader"), running.client("follower")
    lid, lp = await leader.join_known(G)
    fid, fp = await follower.join_known(G)
    ljoin, fjoin = await lp.wait(), await fp.wait()
    assert ljoin.leader == lid
    gen = ljoin.generation_id
    assert fjoin.generation_id == gen
    assignments = {lid: encode_assignment({"t": [0, 1, 2]}),
                   fid: encode_assignment({"t": [3, 4, 5]})}
    fsync = await follower.sync(G, gen, fid)
    lsync = await (await leader.sync(G, gen, lid, assignments)).wait()
    assert lsync.error_code == 0
    assert (await fsync.wait()).assignment == assignments[fid]
    return (leader, lid), (follower, fid), gen, assignments


async def test_classic_group_comes_back_stable_in_its_generation(start_coordinator,
                                                                 autojump_clock):
    running = await start_coordinator(group_initial_rebalance_delay_ms=100)
    (_leader, lid), (follower, fid), gen, assignments = await _classic_stable(running)
    await _crash(running)

    running = await start_coordinator(group_initial_rebalance_delay_ms=100)
    follower = running.client("follower")
    described = (await follower.describe(G))[0]
    assert described.group_state == "Stable"
    assert {m.member_id: m.member_assignment for m in described.members} == assignments
    assert await follower.heartbeat(G, gen, fid) == 0
    assert await running.client("leader").heartbeat(G, gen, lid) == 0
    sync = await (await follower.sync(G, gen, fid)).wait()
    assert (sync.error_code, sync.assignment) == (0, assignments[fid])
    # A member from a later, unwritten generation hears Kafka's error and rejoins.
    assert await follower.heartbeat(G, gen + 1, fid) == E.ILLEGAL_GENERATION


async def test_an_emptied_classic_group_comes_back_empty(start_coordinator, autojump_clock):
    running = await start_coordinator(group_initial_rebalance_delay_ms=100)
    (leader, lid), (follower, fid), gen, _ = await _classic_stable(running)
    assert await leader.leave(G, lid) == 0
    assert await follower.leave(G, fid) == 0
    await running.stop()
    running = await start_coordinator()
    group = running.coordinator.groups[G]
    assert (str(group.state), group.generation_id, group.members) == ("Empty", gen + 1, {})
    assert await running.client().heartbeat(G, gen, fid) == E.UNKNOWN_MEMBER_ID


async def test_deleted_groups_stay_deleted(start_coordinator, mock_clock):
    running = await start_coordinator()
    a, b = await _consumer_pair(running)
    await a.leave()
    await b.leave()
    body = await running.client().call(ApiKey.DeleteGroups, 2, groups_names=[CG])
    assert body.results[0].error_code == 0
    await running.stop()
    running = await start_coordinator()
    assert CG not in running.coordinator.consumer_groups


async def test_torn_tail_is_cut_and_compaction_keeps_the_state(start_coordinator, tmp_path,
                                                               mock_clock):
    running = await start_coordinator(coordinator_kwargs={"compact_bytes": 2048})
    a, b = await _consumer_pair(running)
    for _ in range(40):  # churn grows the file past the compaction threshold
        await b.leave()
        await b.join()
        for _ in range(3):
            await a.beat()
            await b.beat()
    path = running.coordinator.store.log.path
    assert path.name == FILE_NAME
    live = running.coordinator.consumer_groups[CG]
    expected = (live.group_epoch, dict(live.members))
    await _crash(running)
    size = path.stat().st_size
    assert size < 40 * 1024  # compacted along the way
    _append(path, encode_record((CG, "member", "z", {"half": 1}))[:-5])
    running = await start_coordinator()
    assert running.coordinator.store.log.truncated_bytes > 0
    assert path.stat().st_size == size
    group = running.coordinator.consumer_groups[CG]
    assert (group.group_epoch, dict(group.members)) == expected
    assert GroupLog(path.parent).path == path
