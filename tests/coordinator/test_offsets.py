"""OffsetCommit / OffsetFetch semantics and durability, through the handlers."""

from __future__ import annotations

import os

from trio_broker.broker.coordinator import GroupState
from trio_broker.broker.coordinator.offset_log import FILE_NAME
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.errors import ErrorCode as E

G = "group-o"


async def test_simple_commit_creates_group_and_fetch_reads_it(start_coordinator, mock_clock):
    running = await start_coordinator()
    client = running.client()
    result = await client.commit(G, {("t", 0): 10, ("t", 1): 20, ("u", 0): 5}, metadata="m")
    assert set(result.values()) == {E.NONE}
    assert running.coordinator.groups[G].state is GroupState.EMPTY

    error, found = await client.fetch(G, [("t", 0), ("t", 2), ("never", 0)])
    assert error == E.NONE
    assert found == {("t", 0): (10, "m"), ("t", 2): (-1, ""), ("never", 0): (-1, "")}
    # Null topics: every committed partition of the group.
    _, everything = await client.fetch(G, None)
    assert everything == {("t", 0): (10, "m"), ("t", 1): (20, "m"), ("u", 0): (5, "m")}
    # Null metadata is stored as "", as Kafka does.
    await client.commit(G, {("t", 0): 11}, metadata=None)
    assert (await client.fetch(G, [("t", 0)]))[1] == {("t", 0): (11, "")}
    # An unknown group has nothing committed.
    assert await client.fetch("nobody", [("t", 0)]) == (E.NONE, {("t", 0): (-1, "")})
    listed = await client.call(ApiKey.ListGroups, 1)
    assert [(g.group_id, g.protocol_type) for g in listed.groups] == [(G, "")]


async def test_offset_fetch_v1_and_v2(start_coordinator, mock_clock):
    running = await start_coordinator()
    client = running.client()
    await client.commit(G, {("t", 0): 7})
    for version in (1, 2):
        error, found = await client.fetch(G, [("t", 0), ("t", 1)], version=version)
        assert (error, found) == (E.NONE, {("t", 0): (7, ""), ("t", 1): (-1, "")})
    # v1 has no top-level error: each partition carries it.
    body = await client.call(ApiKey.OffsetFetch, 1, group_id="", topics=[
        client_fetch_topic("t", [0])])
    assert [p.error_code for t in body.topics for p in t.partitions] == [E.INVALID_GROUP_ID]


def client_fetch_topic(name, partitions):
    from trio_broker.protocol.api_keys import request_class
    return request_class(ApiKey.OffsetFetch).OffsetFetchRequestTopic(
        name=name, partition_indexes=partitions)


async def test_commit_rules_by_group_state(start_coordinator, mock_clock):
    running = await start_coordinator()
    a, b = running.client("a"), running.client("b")
    a_id, a_pending = await a.join_known(G)
    a_join = await a_pending.wait()
    gen = a_join.generation_id
    # CompletingRebalance: REBALANCE_IN_PROGRESS even for the right member and generation.
    assert await a.commit(G, {("t", 0): 1}, generation=gen, member_id=a_id) == {
        ("t", 0): E.REBALANCE_IN_PROGRESS}
    await (await a.sync(G, gen, a_id, {a_id: b""})).wait()
    # Stable: the member's commit is accepted; a simple commit is refused.
    assert await a.commit(G, {("t", 0): 2}, generation=gen, member_id=a_id) == {
        ("t", 0): E.NONE}
    assert await b.commit(G, {("t", 0): 99}) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # PreparingRebalance: the current generation may still commit what it processed.
    await b.join_known(G)
    assert running.coordinator.groups[G].state is GroupState.PREPARING_REBALANCE
    assert await a.commit(G, {("t", 0): 3}, generation=gen, member_id=a_id) == {
        ("t", 0): E.NONE}
    assert (await a.fetch(G, [("t", 0)]))[1] == {("t", 0): (3, "")}


async def test_many_concurrent_commits_all_answered(start_coordinator, mock_clock):
    running = await start_coordinator()
    client = running.client()
    pendings = [await client.send_commit(G, {("t", i % 4): i}) for i in range(200)]
    assert all(p.deferred for p in pendings)
    bodies = [await p.wait() for p in pendings]
    assert {p.error_code for b in bodies for t in b.topics for p in t.partitions} == {E.NONE}
    # The last commit of each partition wins (commits are applied in arrival order).
    _, found = await client.fetch(G, None)
    assert found == {("t", i): (196 + i, "") for i in range(4)}


async def test_offsets_survive_clean_restart(start_coordinator, mock_clock):
    running = await start_coordinator()
    client = running.client()
    await client.commit(G, {("t", p): 100 + p for p in range(6)}, metadata="meta")
    await client.commit("other", {("x", 0): 1})
    await running.stop()

    running = await start_coordinator()
    client = running.client()
    _, found = await client.fetch(G, None)
    assert found == {("t", p): (100 + p, "meta") for p in range(6)}
    assert (await client.fetch("other", None))[1] == {("x", 0): (1, "")}
    described = (await client.describe(G))[0]
    assert (described.group_state, described.members) == ("Empty", [])


def _append(path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


async def test_offsets_survive_unclean_stop_with_torn_tail(start_coordinator, mock_clock):
    running = await start_coordinator()
    client = running.client()
    for i in range(5):
        await client.commit(G, {("t", 0): i, ("t", 1): 10 * i})
    path = running.coordinator.offset_log.path
    # Crash: no close(); the next record was half written when power went.
    running.scope.cancel()
    await running.stopped.wait()
    good_size = path.stat().st_size
    torn = b"\x00\x00\x01\x00\xde\xad\xbe\xef\x00\x00\x07group"  # 256-byte record, 8 present
    _append(path, torn)
    running.coordinator.close()  # only to release the handle; the bytes are already there

    running = await start_coordinator()
    assert running.coordinator.offset_log.truncated_bytes == len(torn)
    assert path.stat().st_size == good_size
    client = running.client()
    assert (await client.fetch(G, None))[1] == {("t", 0): (4, ""), ("t", 1): (40, "")}
    # Appends after recovery land on a clean tail and survive the next restart.
    await client.commit(G, {("t", 0): 5})
    await running.stop()
    running = await start_coordinator()
    assert running.coordinator.offset_log.truncated_bytes == 0
    assert (await running.client().fetch(G, None))[1] == {("t", 0): (5, ""), ("t", 1): (40, "")}


async def test_failed_write_is_not_acknowledged_and_leaves_no_garbage(
        start_coordinator, monkeypatch, mock_clock):
    running = await start_coordinator()
    client = running.client()
    await client.commit(G, {("t", 0): 1})
    real_fsync = os.fsync
    calls = 0

    def failing_fsync(fd):  # a disk error on the next fsync only: cannot be caused for real
        nonlocal calls
        calls += 1
        if calls == 1:
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    assert await client.commit(G, {("t", 0): 2}) == {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
    assert (await client.fetch(G, [("t", 0)]))[1] == {("t", 0): (1, "")}
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert await client.commit(G, {("t", 1): 3}) == {("t", 1): E.NONE}
    await running.stop()
    running = await start_coordinator()
    assert running.coordinator.offset_log.truncated_bytes == 0
    assert (await running.client().fetch(G, None))[1] == {("t", 0): (1, ""), ("t", 1): (3, "")}


async def test_compaction_bounds_the_file_and_keeps_the_state(start_coordinator, mock_clock):
    running = await start_coordinator(coordinator_kwargs={"compact_bytes": 4096})
    client = running.client()
    for i in range(300):
        await client.commit(G, {("t", i % 3): i})
    log = running.coordinator.offset_log
    assert log.size_bytes < 2 * 4096 + 200
    assert log.path.stat().st_size == log.size_bytes
    assert not (log.directory / "commits.log.tmp").exists()
    await running.stop()
    running = await start_coordinator()
    assert (await running.client().fetch(G, None))[1] == {
        ("t", 0): (297, ""), ("t", 1): (298, ""), ("t", 2): (299, "")}


async def test_retention_expires_offsets_of_empty_groups(start_coordinator, mock_clock):
    now = [1_000_000_000_000]
    running = await start_coordinator(offsets_retention_minutes=1,
                                      coordinator_kwargs={"wall_clock_ms": lambda: now[0]})
    coordinator = running.coordinator
    client = running.client()
    await client.commit("simple", {("t", 0): 1})
    # A group with a live member keeps its offsets however old they are.
    a_id, pending = await client.join_known(G)
    join = await pending.wait()
    await (await client.sync(G, join.generation_id, a_id, {a_id: b""})).wait()
    await client.commit(G, {("t", 0): 5}, generation=join.generation_id, member_id=a_id)

    now[0] += 59_000
    assert coordinator.expire_offsets() == 0
    now[0] += 2_000
    assert coordinator.expire_offsets() == 1  # "simple" expired; its group is gone
    assert "simple" not in coordinator.groups
    now[0] += 3_600_000
    assert coordinator.expire_offsets() == 0  # G is Stable
    assert await client.leave(G, a_id) == E.NONE  # Empty from now on
    now[0] += 59_000
    assert coordinator.expire_offsets() == 0
    now[0] += 2_000
    assert coordinator.expire_offsets() == 1
    assert G not in coordinator.groups
    # Expiry is durable (written by then, or by close() at the latest).
    await running.stop()
    running = await start_coordinator()
    assert running.coordinator.groups == {}


async def test_delete_group_removes_offsets_durably(start_coordinator, mock_clock):
    running = await start_coordinator()
    client = running.client()
    await client.commit(G, {("t", 0): 1})
    await client.commit("keep", {("t", 0): 2})
    body = await client.call(ApiKey.DeleteGroups, 1, groups_names=[G])
    assert [(r.group_id, r.error_code) for r in body.results] == [(G, E.NONE)]
    assert (await client.fetch(G, None))[1] == {}
    await running.stop()
    running = await start_coordinator()
    assert set(running.coordinator.groups) == {"keep"}


async def test_file_lives_under_first_log_dir(start_coordinator, tmp_path, mock_clock):
    running = await start_coordinator(log_dirs=f"{tmp_path / 'a'},{tmp_path / 'b'}")
    await running.client().commit(G, {("t", 0): 1})
    assert (tmp_path / "a" / "__consumer_offsets" / FILE_NAME).is_file()
    assert not (tmp_path / "b" / "__consumer_offsets").exists()


async def test_close_while_running_answers_everything_and_keeps_acknowledged(
        start_coordinator, mock_clock):
    # The broker's shutdown calls close() before cancelling run(): commits in every stage
    # (being fsynced, queued, arriving after close) must be answered, and every NONE kept.
    running = await start_coordinator(topics={"t": 100})
    client = running.client()
    pendings = [await client.send_commit(G, {("t", i): i}) for i in range(50)]
    running.coordinator.close()
    late = await client.commit(G, {("t", 99): 99})
    assert late == {("t", 99): E.COORDINATOR_NOT_AVAILABLE}
    bodies = [await p.wait() for p in pendings]
    answers = {(t.name, p.partition_index): p.error_code
               for b in bodies for t in b.topics for p in t.partitions}
    assert set(answers.values()) <= {E.NONE, E.COORDINATOR_NOT_AVAILABLE}
    await running.stop()
    running = await start_coordinator(topics={"t": 100})
    _, found = await running.client().fetch(G, None)
    assert {tp for tp, code in answers.items() if code == E.NONE} <= set(found)
