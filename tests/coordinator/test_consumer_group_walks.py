"""Seeded random walks through a consumer group (KIP-848): members join, heartbeat, revoke
late, leave, restart as static members, fall silent past their session or rebalance timeout,
topics appear, and hostile heartbeats are mixed in.

After every step: no partition is owned by two members, neither in the coordinator's books nor
in what the members themselves were told (a member owns what it was last assigned, and a slow
one keeps owning its old partitions until it revokes them); every answer carries a code Kafka
defines. At the end the survivors converge: every partition owned exactly once, group Stable.
Seeds fix the steps and are named in the test id (topic ids are random, so where a partition
lands may differ between runs; the checks hold for any placement).
"""

from __future__ import annotations

import random
import uuid

import pytest
import trio

from tests.coordinator.kip848 import Member, create_topic, heartbeat
from trio_broker.protocol.errors import ErrorCode

G = "walk"
STEPS = 300


class Walk:
    def __init__(self, running, rng: random.Random) -> None:
        self.running = running
        self.rng = rng
        self.members: list[Member] = []
        self.topics = 0
        for i in range(4):
            self.members.append(self._new(i))

    def _new(self, i: int) -> Member:
        kind = i % 4
        if kind == 3:  # a regex member, which picks up the topics created on the way
            return Member(self.running, G, regex="walk-.*", member_id=self._id("r"),
                          rebalance_ms=20_000)
        return Member(self.running, G, ["t", "u"] if kind else ["t"], member_id=self._id("m"),
                      instance_id=f"static-{i}" if kind == 1 else None, rebalance_ms=20_000)

    def _id(self, prefix: str) -> str:
        return f"{prefix}-{uuid.UUID(int=self.rng.getrandbits(128)).hex[:8]}"

    def _check(self, body) -> None:
        ErrorCode(body.error_code)

    async def step(self) -> None:
        rng = self.rng
        i = rng.randrange(len(self.members))
        m = self.members[i]
        roll = rng.random()
        if roll < 0.5:
            m.hold = rng.random() < 0.15
            body = await (m.join() if m.epoch <= 0 else m.beat())
            self._check(body)
            if body.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
                m.epoch, m.owned, m.hold = 0, set(), False  # lost: rejoin from scratch
            elif body.error_code == ErrorCode.FENCED_INSTANCE_ID:
                self.members[i] = self._new(i)
        elif roll < 0.58:
            self._check(await m.leave(-2 if m.instance_id and rng.random() < 0.5 else -1))
            m.epoch, m.owned, m.hold = 0, set(), False
        elif roll < 0.64 and m.instance_id:  # the process restarts: same instance, new id
            self.members[i] = Member(self.running, G, m.topics, member_id=self._id("s"),
                                     instance_id=m.instance_id, rebalance_ms=20_000)
            self.members[i].owned = set()
        elif roll < 0.72:
            await trio.sleep(rng.choice([2, 5, 25, 50]))
        elif roll < 0.75 and self.topics < 4:
            self.topics += 1
            await create_topic(self.running, f"walk-{self.topics}", rng.randint(1, 4))
        else:
            self._check(await heartbeat(
                self.running.client("hostile"), rng.choice([G, "", "other"]),
                rng.choice([m.member_id, "", "ghost"]), rng.choice([-3, -2, -1, 0, 1, 7, 99]),
                owned=rng.choice([None, []]), rebalance_timeout_ms=rng.choice([-1, 1000]),
                subscribed_topic_names=rng.choice([None, ["t"], []]),
                subscribed_topic_regex=rng.choice([None, "(", "walk-.*"]),
                instance_id=rng.choice([None, "static-1", "nobody"]),
                server_assignor=rng.choice([None, "range", "nope"])))

    def check_no_partition_twice(self) -> None:
        group = self.running.coordinator.consumer_groups.get(G)
        if group is None:
            return
        books: dict = {}
        for member in group.members.values():
            for a in (member.assigned, member.pending_revocation):
                for tid, parts in a.items():
                    for p in parts:
                        assert (tid, p) not in books, (tid, p)
                        books[(tid, p)] = member.member_id
        for m in self.members:
            live = group.members.get(m.member_id)
            if live is None or m.epoch <= 0:
                continue
            held = {(t, p) for a in (live.assigned, live.pending_revocation)
                    for t, ps in a.items() for p in ps}
            assert m.owned <= held, (m.member_id, m.owned - held)


@pytest.mark.parametrize("seed", range(6))
async def test_random_walks_never_own_a_partition_twice(start_coordinator, autojump_clock,
                                                        seed):
    running = await start_coordinator(topics={"t": 6, "u": 3})
    walk = Walk(running, random.Random(seed))
    for _ in range(STEPS):
        await walk.step()
        walk.check_no_partition_twice()
    # The survivors, polite from now on and heartbeating every 5 s, converge to an exact
    # cover once the members the walk abandoned have timed out (45 s sessions).
    for m in walk.members:
        m.hold = False
    for _ in range(14):
        await trio.sleep(5)
        for m in walk.members:
            body = await (m.join() if m.epoch <= 0 else m.beat())
            if body.error_code:
                m.epoch, m.owned = 0, set()
            walk.check_no_partition_twice()
    group = running.coordinator.consumer_groups[G]
    assert str(group.state) == "Stable"
    owned = [tp for m in walk.members for tp in m.owned]
    assert len(owned) == len(set(owned))
    wanted = set()
    for name in group.subscribed_topics():
        tid, count = running.coordinator.consumer.topics()[name]
        wanted |= {(tid, p) for p in range(count)}
    assert set(owned) == wanted
