"""Out-of-order, stale and malformed group requests: random walks through JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit and time, every version, with wrong member ids, foreign
instance ids, stale generations and bad protocols mixed in.

After every step the coordinator's state must be coherent (the invariants below), every answer
must carry one of Kafka's error codes, and no request may raise; at the end a shutdown answers
every held request. Seeds are fixed and named in the test id, so a failure replays exactly.
"""

from __future__ import annotations

import random

import pytest
import trio

from trio_broker.broker.coordinator import GroupState
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.consumer_protocol import encode_assignment, encode_subscription
from trio_broker.protocol.errors import ErrorCode

LEAVE = request_class(ApiKey.LeaveGroup)
GROUPS = ["g1", "g2", ""]
INSTANCES = [None, None, "i-0", "i-1", "i-9"]
STEPS = 250


def check_invariants(coordinator) -> None:
    for group_id, g in coordinator.groups.items():
        assert g.group_id == group_id
        members = g.members
        assert (g.leader_id is None) == (not members), (group_id, g.leader_id)
        if members:
            assert g.leader_id in members
            assert not g.is_in(GroupState.EMPTY, GroupState.DEAD), group_id
        for instance, member_id in g.static_members.items():
            assert members[member_id].group_instance_id == instance
        assert len(g.static_members) == sum(m.is_static for m in members.values())
        assert g.pending_sync <= set(members)
        assert not (g.pending_members & set(members))
        if g.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            assert g.protocol_name is not None
            assert all(g.protocol_name in m.protocol_names for m in members.values())
        if not g.is_in(GroupState.COMPLETING_REBALANCE):
            assert all(m.awaiting_sync is None for m in members.values()), group_id
        if not g.is_in(GroupState.PREPARING_REBALANCE):
            assert all(m.awaiting_join is None for m in members.values()), group_id


class Walker:
    """Four consumers following the protocol (two static, two dynamic), with hostile requests
    mixed in: foreign or stale ids, generations and instance ids, bad protocols and timeouts,
    restarts that forget the member id, leaves, and time passing."""

    def __init__(self, running, rng: random.Random) -> None:
        self.running = running
        self.rng = rng
        self.clients = [running.client(f"c{i}") for i in range(4)]
        self.instances = ["i-0", "i-1", None, None]
        self.state = [{"member": "", "generation": -1, "members": []} for _ in range(4)]
        self.member_ids = ["", "bogus"]
        self.generations = [-1, 0, 1]
        self.pending = []

    def pick(self, seq):
        return self.rng.choice(seq)

    def answered(self, body, who: int | None = None) -> None:
        for code in _codes(body):
            ErrorCode(code)  # raises on a code Kafka does not define
        for name in ("member_id", "leader"):
            value = getattr(body, name, "")
            if value and value not in self.member_ids:
                self.member_ids.append(value)
        generation = getattr(body, "generation_id", -1)
        if generation not in self.generations:
            self.generations.append(generation)
        if who is None or not hasattr(body, "generation_id"):
            return
        st = self.state[who]
        if body.error_code in (0, ErrorCode.MEMBER_ID_REQUIRED):
            st["member"] = body.member_id
        if body.error_code == 0:
            st["generation"] = body.generation_id
            st["members"] = [m.member_id for m in body.members]
        elif body.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            st.update(member="", generation=-1, members=[])

    async def step(self) -> None:
        who = self.rng.randrange(4)
        if self.rng.random() < 0.7:
            await self._polite(who)
        else:
            await self._hostile(who)
        await trio.testing.wait_all_tasks_blocked()
        for p, owner in [(p, o) for p, o in self.pending if p.done]:
            self.pending.remove((p, owner))
            self.answered(p.body, owner)

    async def _polite(self, who: int) -> None:
        rng, client, st = self.rng, self.clients[who], self.state[who]
        instance = self.instances[who]
        sub = encode_subscription(["t"])
        roll = rng.random()
        if roll < 0.05:  # a restart: a new process with the same instance id
            st.update(member="", generation=-1, members=[])
            return
        if roll < 0.1 and st["member"]:
            await client.leave("g1", st["member"])
            st.update(member="", generation=-1, members=[])
            return
        if roll < 0.15:
            await trio.sleep(self.pick([0.5, 3, 12, 40]))
            return
        if st["generation"] < 0 or roll < 0.3:
            if any(o is who and p.header.api_key == ApiKey.JoinGroup for p, o in self.pending):
                return
            pending = await client.join("g1", st["member"], version=self.pick([4, 5, 7, 9]),
                                        instance_id=instance, session_ms=10_000,
                                        rebalance_ms=self.pick([5_000, 20_000]),
                                        protocols=[("range", sub)])
            self.pending.append((pending, who))
        elif roll < 0.55:
            assignments = {m: encode_assignment({"t": [n]})
                           for n, m in enumerate(st["members"])}
            pending = await client.sync("g1", st["generation"], st["member"], assignments,
                                        version=self.pick([3, 5]), instance_id=instance)
            self.pending.append((pending, who))
        elif roll < 0.8:
            code = await client.heartbeat("g1", st["generation"], st["member"], version=4,
                                          instance_id=instance)
            if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                st.update(member="", generation=-1, members=[])
            elif code in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.REBALANCE_IN_PROGRESS):
                st["generation"] = -1
        else:
            pending = await client.send_commit(
                "g1", {("t", rng.randint(0, 5)): rng.randint(0, 100)},
                generation=st["generation"], member_id=st["member"], version=8,
                instance_id=instance)
            self.pending.append((pending, None))

    async def _hostile(self, who: int) -> None:
        rng, client = self.rng, self.clients[who]
        group = self.pick(GROUPS)
        member = self.pick(self.member_ids)
        instance = self.pick(INSTANCES)
        generation = self.pick(self.generations)
        action = rng.choice(["join", "sync", "heartbeat", "leave", "leave3", "commit"])
        sub = encode_subscription(["t"]) if rng.random() < 0.8 else b"\xff\x00"
        if action == "join":
            protocols = self.pick([[("range", sub)], [("range", sub), ("roundrobin", sub)],
                                   [("sticky", sub)], []])
            pending = await client.join(
                group, member, version=rng.randint(0, 9), instance_id=instance,
                session_ms=self.pick([6000, 10_000, 1, 10_000_000]),
                rebalance_ms=self.pick([-1, 1000, 20_000]), protocols=protocols,
                protocol_type=self.pick(["consumer", "consumer", "connect", ""]))
            self.pending.append((pending, None))
        elif action == "sync":
            assignments = {m: encode_assignment({"t": [0]}) for m in self.member_ids[:3]}
            pending = await client.sync(
                group, generation, member, self.pick([{}, assignments]),
                version=rng.randint(0, 5), instance_id=instance,
                protocol_type=self.pick(["consumer", None, "connect"]),
                protocol_name=self.pick(["range", None, "roundrobin"]))
            self.pending.append((pending, None))
        elif action == "heartbeat":
            await client.heartbeat(group, generation, member, version=rng.randint(0, 4),
                                   instance_id=instance)
        elif action == "leave":
            await client.leave(group, member)
        elif action == "leave3":
            body = await client.call(ApiKey.LeaveGroup, rng.randint(3, 5), group_id=group,
                                     members=[LEAVE.MemberIdentity(
                                         member_id=self.pick(self.member_ids),
                                         group_instance_id=self.pick(INSTANCES))
                                         for _ in range(rng.randint(0, 3))])
            self.answered(body)
        else:
            pending = await client.send_commit(
                group, {("t", rng.randint(0, 5)): rng.randint(0, 100)}, generation=generation,
                member_id=member, version=rng.randint(0, 9), instance_id=instance)
            self.pending.append((pending, None))


def _codes(body) -> list[int]:
    codes = []
    if hasattr(body, "error_code"):
        codes.append(body.error_code)
    for m in getattr(body, "members", None) or []:
        if hasattr(m, "error_code"):
            codes.append(m.error_code)
    for t in getattr(body, "topics", None) or []:
        codes.extend(p.error_code for p in t.partitions)
    return codes


@pytest.mark.parametrize("seed", range(8))
async def test_random_walks_keep_the_coordinator_coherent(start_coordinator, autojump_clock,
                                                         seed):
    running = await start_coordinator(group_initial_rebalance_delay_ms=random.Random(seed)
                                      .choice([0, 0, 500]))
    walker = Walker(running, random.Random(seed))
    for _ in range(STEPS):
        await walker.step()
        check_invariants(running.coordinator)
    # A shutdown answers whatever is still held (joins, syncs, commits queued for the disk).
    await running.stop()
    assert [p for p, _ in walker.pending if not p.done] == []
