"""Share groups against a classic consumer group on the same data, in one run: the Trio
``ShareConsumer`` with one and with three members (implicit acknowledgement), the round trip
of one explicit acknowledgement, and the Trio ``Consumer`` in a classic group.

Run: ``.venv/bin/python bench/bench_share_consumer.py [--records 50000] [--rounds 2]
[--acks 300]``. Not part of the test suite. Each round: a fresh broker (``open_broker``, the
test defaults) in the same Trio loop, in a temporary directory; one topic of one partition
holding ``--records`` records of 100 bytes; then, each with a group of its own reading every
record from the earliest offset:

- ``share x1`` / ``share x3``: one / three ``ShareConsumer`` members, implicit acknowledgement;
  the time runs from entering the members' blocks (joining included) to leaving them (the last
  acknowledgements and the leave included), and the share-partition's start offset is checked
  to have reached the end (every record accepted), and for three members that each got some;
- ``ack round trip``: explicit mode, ``--acks`` records each accepted with ``acknowledge`` and
  sent at once with ``commit`` (one ShareAcknowledge, durable before it is answered): p50 / p99
  of ``acknowledge`` + ``commit``;
- ``classic``: ``open_consumer`` in a classic group (JoinGroup / SyncGroup, auto-commit), from
  entering its block to the last record received.

Figures go to docs/benchmarks.md ("Share groups").
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import Counter
from typing import Any

import trio

from trio_broker.broker.lifecycle import Broker, open_broker
from trio_broker.client import AcknowledgeType, ShareConsumer, open_consumer, open_producer
from trio_broker.testing import TEST_DEFAULTS


def _earliest(broker: Broker, group: str) -> None:
    broker.state.shares.group_configs.alter(
        group, [("share.auto.offset.reset", "earliest")], validate_only=False)


async def _share_members(broker: Broker, bootstrap: str, group: str, members: int,
                         records: int) -> tuple[float, Counter[int]]:
    _earliest(broker, group)
    got: Counter[int] = Counter()
    done = trio.Event()
    scopes: list[trio.CancelScope] = []

    async def member(i: int) -> None:
        async with ShareConsumer(bootstrap, group_id=group, topics=["t"],
                                 share_acknowledgement_mode="implicit") as consumer:
            with trio.CancelScope() as scope:
                scopes.append(scope)
                async for _ in consumer:
                    got[i] += 1
                    if sum(got.values()) >= records:
                        done.set()

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for i in range(members):
            nursery.start_soon(member, i)
        await done.wait()
        for scope in scopes:  # stop reading; each block still leaves, acknowledging the rest
            scope.cancel()
    return time.perf_counter() - started, got


async def _ack_round_trips(broker: Broker, bootstrap: str, acks: int) -> list[float]:
    _earliest(broker, "acks")
    times: list[float] = []
    async with ShareConsumer(bootstrap, group_id="acks", topics=["t"],
                             share_acknowledgement_mode="explicit") as consumer:
        async for record in consumer:
            started = time.perf_counter()
            await consumer.acknowledge(record, AcknowledgeType.ACCEPT)
            await consumer.commit()
            times.append(time.perf_counter() - started)
            if len(times) == acks:
                break
    return times


async def _classic(bootstrap: str, records: int) -> float:
    started = time.perf_counter()
    seen = 0
    async with open_consumer("t", bootstrap_servers=bootstrap, group_id="classic",
                             auto_offset_reset="earliest") as consumer:
        while seen < records:
            batch = await consumer.getmany(timeout_ms=5000, max_records=10000)
            if not batch:
                raise RuntimeError(f"the classic consumer stalled at {seen}")
            seen += sum(len(r) for r in batch.values())
    return time.perf_counter() - started


async def one_round(records: int, acks: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as data:
        async with open_broker(**{**TEST_DEFAULTS, "log_dirs": data}) as broker:
            bootstrap = broker.bootstrap_servers
            broker.state.logs.create_topic("t", 1, {})
            async with open_producer(bootstrap) as producer:
                for _ in range(records):
                    await producer.send_soon("t", b"x" * 100)
            out: dict[str, Any] = {}
            for members in (1, 3):
                group = f"share-x{members}"
                elapsed, got = await _share_members(broker, bootstrap, group, members, records)
                [sp] = [sp for (g, _, _), sp in broker.state.shares.partitions.items()
                        if g == group]
                assert sp.start_offset == records, (group, sp.start_offset, records)
                assert len(got) == members, got
                out[f"share x{members}"] = (elapsed, sorted(got.values()))
            out["ack round trip"] = await _ack_round_trips(broker, bootstrap, acks)
            out["classic"] = await _classic(bootstrap, records)
            return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--acks", type=int, default=300)
    args = parser.parse_args()
    n = args.records
    for round_no in range(1, args.rounds + 1):
        out = trio.run(one_round, n, args.acks)
        for name in ("share x1", "share x3"):
            elapsed, split = out[name]
            print(f"round {round_no} {name:9}: {n} records in {elapsed:.2f} s, "
                  f"{n / elapsed:,.0f} records/s (per member {split})")
        times = sorted(out["ack round trip"])
        p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
        print(f"round {round_no} ack round trip: {len(times)} acks, p50 "
              f"{statistics.median(times) * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms")
        classic = out["classic"]
        print(f"round {round_no} classic  : {n} records in {classic:.2f} s, "
              f"{n / classic:,.0f} records/s")


if __name__ == "__main__":
    main()
