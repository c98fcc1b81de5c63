"""Online migration between the classic and the consumer group protocols
(``group.consumer.migration.policy``), step by step through the registered handlers: a classic
group upgraded by a joining consumer-protocol member, its classic members served by the
consumer group (JoinGroup, SyncGroup, Heartbeat, OffsetCommit), and the downgrade when the last
consumer-protocol member leaves. The same with real clients: test_migration_real_clients.py."""

from __future__ import annotations

from typing import Any

from tests.coordinator.kip848 import Member, topic_id
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.consumer_protocol import decode_assignment, encode_assignment
from trio_broker.protocol.errors import ErrorCode as E

G = "migrate"


class Classic:
    """A classic member (eager, as librdkafka's range assignor runs it) through the raw API."""

    def __init__(self, running: Any, name: str) -> None:
        self.client = running.client(name)
        self.member_id = ""
        self.generation = -1
        self.owned: set[int] = set()

    async def join(self) -> Any:
        """Join (or rejoin) and answer the held JoinGroup; the leader's duty is the caller's."""
        if not self.member_id:
            self.member_id, pending = await self.client.join_known(G)
        else:
            pending = await self.client.join(G, self.member_id)
        body = await pending.wait()
        if body.error_code == 0:
            self.generation = body.generation_id
        return body

    async def sync(self, assignments: dict[str, list[int]] | None = None) -> Any:
        encoded = {m: encode_assignment({"t": ps}) for m, ps in (assignments or {}).items()}
        body = await (await self.client.sync(G, self.generation, self.member_id,
                                             encoded)).wait()
        if body.error_code == 0:
            self.owned = set(decode_assignment(body.assignment).partitions.get("t", []))
        return body

    async def heartbeat(self) -> int:
        return await self.client.heartbeat(G, self.generation, self.member_id)

    async def rejoin_and_sync(self) -> None:
        self.owned = set()  # eager: everything is revoked before rejoining
        assert (await self.join()).error_code == 0
        assert (await self.sync()).error_code == 0


async def _stable_classic_pair(running: Any) -> tuple[Classic, Classic]:
    c1, c2 = Classic(running, "c1"), Classic(running, "c2")
    assert (await c1.join()).leader == c1.member_id
    await c1.sync({c1.member_id: [0, 1, 2, 3, 4, 5]})
    c2_member_id, c2_pending = await c2.client.join_known(G)
    c2.member_id = c2_member_id
    assert await c1.heartbeat() == E.REBALANCE_IN_PROGRESS
    c1_pending = await c1.client.join(G, c1.member_id)
    for member, pending in ((c1, c1_pending), (c2, c2_pending)):
        member.generation = (await pending.wait()).generation_id
    await c2.client.sync(G, c2.generation, c2.member_id)
    await c1.sync({c1.member_id: [0, 1, 2], c2.member_id: [3, 4, 5]})
    assert (await c2.sync()).error_code == 0
    assert (c1.owned, c2.owned) == ({0, 1, 2}, {3, 4, 5})
    return c1, c2


async def _describe(running: Any) -> Any:
    body = await running.client().call(ApiKey.ConsumerGroupDescribe, 1, group_ids=[G],
                                        include_authorized_operations=False)
    return body.groups[0]


async def test_upgrade_serve_classic_members_and_downgrade(start_coordinator, mock_clock):
    running = await start_coordinator()
    coordinator = running.coordinator
    c1, c2 = await _stable_classic_pair(running)
    t = topic_id(running, "t")

    # A consumer-protocol member joins: the group becomes a consumer group at the classic
    # generation's epoch plus one, the classic members keeping what they own.
    b = Member(running, G, ["t"], member_id="b")
    assert (await b.join()).error_code == 0
    assert G in coordinator.consumer_groups
    assert G not in coordinator.groups
    assert b.epoch == c1.generation + 1
    assert b.owned == set()
    described = await _describe(running)
    kinds = {m.member_id: m.member_type for m in described.members}
    assert kinds == {c1.member_id: 0, c2.member_id: 0, "b": 1}
    assert described.group_state == "Reconciling"

    # The classic members are told to rejoin; each JoinGroup answers at once, without a
    # leader or a member list, and SyncGroup hands out what the server-side assignor decided.
    for member in (c1, c2):
        assert await member.heartbeat() == E.REBALANCE_IN_PROGRESS
        member.owned = set()
        body = await member.join()
        assert (body.error_code, body.generation_id, body.protocol_name, body.leader,
                body.members) == (0, b.epoch, "range", "", [])
        assert (await member.sync()).error_code == 0
        assert await member.heartbeat() == E.NONE
    await b.beat()
    owners = [c1.owned, c2.owned, {p for _, p in b.owned}]
    assert sorted(p for owned in owners for p in owned) == [0, 1, 2, 3, 4, 5]
    assert all(len(owned) == 2 for owned in owners), owners
    assert all(tid == t for tid, _ in b.owned)
    assert (await _describe(running)).group_state == "Stable"

    # A classic member commits with its generation (OffsetCommit v8): a stale one is
    # ILLEGAL_GENERATION, as Kafka answers classic members of a consumer group.
    commit = c1.client.commit
    partition = min(c1.owned)
    assert await commit(G, {("t", partition): 5}, generation=c1.generation,
                        member_id=c1.member_id, version=8) == {("t", partition): 0}
    stale = await commit(G, {("t", partition): 6}, generation=c1.generation - 1,
                         member_id=c1.member_id, version=8)
    assert stale == {("t", partition): E.ILLEGAL_GENERATION}

    # The last consumer-protocol member leaves: a classic group again, rebalancing, with the
    # offsets; the classic members rejoin and their leader assigns everything.
    assert (await b.leave()).error_code == 0
    assert G in coordinator.groups
    assert G not in coordinator.consumer_groups
    assert coordinator.groups[G].state.value == "PreparingRebalance"
    assert await c1.heartbeat() == E.REBALANCE_IN_PROGRESS
    c1_pending = await c1.client.join(G, c1.member_id)
    c2_pending = await c2.client.join(G, c2.member_id)
    joined = [await c1_pending.wait(), await c2_pending.wait()]
    assert [j.error_code for j in joined] == [0, 0]
    leader = next(j for j in joined if j.members)
    assert {m.member_id for m in leader.members} == {c1.member_id, c2.member_id}
    assert (await c1.client.fetch(G, [("t", partition)]))[1] == {("t", partition): (5, "")}


async def test_policy(start_coordinator, mock_clock):
    """``disabled`` keeps a group with members on its protocol; ``upgrade`` upgrades but never
    downgrades."""
    running = await start_coordinator(group_consumer_migration_policy="disabled")
    await _stable_classic_pair(running)
    b = Member(running, G, ["t"], member_id="b")
    body = await b.join()
    assert (body.error_code, body.error_message) == (E.GROUP_ID_NOT_FOUND,
                                                     f"Group {G} is not a consumer group.")
    await running.stop()

    running = await start_coordinator(group_consumer_migration_policy="upgrade")
    b = Member(running, G, ["t"], member_id="b")
    assert (await b.join()).error_code == 0
    assert (await b.leave()).error_code == 0
    group = running.coordinator.consumer_groups[G]
    assert len(group.members) == 2
    assert group.num_classic_members == 2


async def test_classic_members_survive_a_restart(start_coordinator, mock_clock):
    running = await start_coordinator()
    c1, _c2 = await _stable_classic_pair(running)
    assert (await Member(running, G, ["t"], member_id="b").join()).error_code == 0
    await running.stop()

    running = await start_coordinator()
    c1.client = running.client("c1")
    member = running.coordinator.consumer_groups[G].members[c1.member_id]
    assert member.classic is not None
    assert member.classic.protocol_name == "range"
    assert await c1.heartbeat() == E.REBALANCE_IN_PROGRESS
    await c1.rejoin_and_sync()
    assert len(c1.owned) == 2
