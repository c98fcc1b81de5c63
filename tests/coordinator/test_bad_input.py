"""Each kind of bad group request gets Kafka's error code, and the group is left intact."""

from __future__ import annotations

import pytest

from trio_broker.broker.coordinator import GroupState
from trio_broker.protocol.consumer_protocol import encode_subscription
from trio_broker.protocol.errors import ErrorCode as E

G = "group-b"


async def _stable(running, client_id="ok"):
    client = running.client(client_id)
    member_id, pending = await client.join_known(G)
    join = await pending.wait()
    await (await client.sync(G, join.generation_id, member_id, {member_id: b""})).wait()
    return client, member_id, join.generation_id


async def test_empty_group_id(start_coordinator, mock_clock):
    running = await start_coordinator()
    client = running.client()
    assert (await (await client.join("")).wait()).error_code == E.INVALID_GROUP_ID
    assert (await (await client.sync("", 1, "m")).wait()).error_code == E.INVALID_GROUP_ID
    assert await client.heartbeat("", 1, "m") == E.INVALID_GROUP_ID
    assert await client.leave("", "m") == E.INVALID_GROUP_ID
    assert await client.commit("", {("t", 0): 1}) == {("t", 0): E.INVALID_GROUP_ID}
    assert (await client.fetch("", [("t", 0)]))[0] == E.INVALID_GROUP_ID
    assert running.coordinator.groups == {}


@pytest.mark.parametrize("session_ms", [5999, 1_800_001, 0, -1])
async def test_session_timeout_out_of_bounds(start_coordinator, mock_clock, session_ms):
    running = await start_coordinator()
    join = await (await running.client().join(G, session_ms=session_ms)).wait()
    assert join.error_code == E.INVALID_SESSION_TIMEOUT
    assert G not in running.coordinator.groups


async def test_session_timeout_bounds_follow_config(start_coordinator, mock_clock):
    running = await start_coordinator(group_min_session_timeout_ms=1000,
                                      group_max_session_timeout_ms=2000)
    client = running.client()
    assert (await (await client.join(G, session_ms=2001)).wait()).error_code == \
        E.INVALID_SESSION_TIMEOUT
    assert (await (await client.join(G, session_ms=1000)).wait()).error_code == \
        E.MEMBER_ID_REQUIRED


async def test_unknown_member_id(start_coordinator, mock_clock):
    running = await start_coordinator()
    client = running.client()
    # A member id for a group that does not exist, then for one that does.
    assert (await (await client.join(G, "ghost")).wait()).error_code == E.UNKNOWN_MEMBER_ID
    _, member_id, gen = await _stable(running)
    assert (await (await client.join(G, "ghost")).wait()).error_code == E.UNKNOWN_MEMBER_ID
    assert (await (await client.sync(G, gen, "ghost")).wait()).error_code == \
        E.UNKNOWN_MEMBER_ID
    assert await client.heartbeat(G, gen, "ghost") == E.UNKNOWN_MEMBER_ID
    assert await client.leave(G, "ghost") == E.UNKNOWN_MEMBER_ID
    assert await client.commit(G, {("t", 0): 5}, generation=gen, member_id="ghost") == {
        ("t", 0): E.UNKNOWN_MEMBER_ID}
    assert running.coordinator.groups[G].state is GroupState.STABLE
    assert list(running.coordinator.groups[G].members) == [member_id]


async def test_stale_generation(start_coordinator, mock_clock):
    running = await start_coordinator()
    client, member_id, gen = await _stable(running)
    for stale in (gen - 1, gen + 1):
        assert await client.heartbeat(G, stale, member_id) == E.ILLEGAL_GENERATION
        assert (await (await client.sync(G, stale, member_id)).wait()).error_code == \
            E.ILLEGAL_GENERATION
        assert await client.commit(G, {("t", 0): 5}, generation=stale,
                                   member_id=member_id) == {("t", 0): E.ILLEGAL_GENERATION}
    # A member commit to a group that does not exist cannot match any generation.
    assert await client.commit("other", {("t", 0): 5}, generation=3, member_id="m") == {
        ("t", 0): E.ILLEGAL_GENERATION}
    assert running.coordinator.groups[G].state is GroupState.STABLE


async def test_empty_protocol_list_or_type(start_coordinator, mock_clock):
    running = await start_coordinator()
    client = running.client()
    assert (await (await client.join(G, protocols=[])).wait()).error_code == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert (await (await client.join(G, protocol_type="")).wait()).error_code == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert G not in running.coordinator.groups


async def test_protocol_type_or_names_not_shared(start_coordinator, mock_clock):
    running = await start_coordinator()
    await _stable(running)
    other = running.client("other")
    sub = encode_subscription(["t"])
    assert (await (await other.join(G, protocol_type="connect")).wait()).error_code == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert (await (await other.join(G, protocols=[("sticky", sub)])).wait()).error_code == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert running.coordinator.groups[G].state is GroupState.STABLE


async def test_offset_metadata_too_large(start_coordinator, mock_clock):
    running = await start_coordinator(offset_metadata_max_bytes=10)
    client = running.client()
    result = await client.commit(G, {("t", 0): 5}, metadata="x" * 11)
    assert result == {("t", 0): E.OFFSET_METADATA_TOO_LARGE}
    assert await client.commit(G, {("t", 1): 5}, metadata="x" * 10) == {("t", 1): E.NONE}
    _, found = await client.fetch(G, [("t", 0), ("t", 1)])
    assert found == {("t", 0): (-1, ""), ("t", 1): (5, "x" * 10)}
