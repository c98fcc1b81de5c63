"""Group-state reload with ``__consumer_offsets`` kept as Kafka's records: commit N offsets over
G groups through the group coordinator (each change fsynced to the coordinator's file, then
appended to the internal topic), stop, and time what a restart does: the coordinator's reload
of its files, the log manager's load of the topic's 50 partitions, and, for comparison, a
replay of the topic's records by decoding every one (what reloading from the topic, as Kafka
does, would cost in Python).

Run: ``.venv/bin/python bench/bench_internal_topics.py [--groups 10000] [--commits 100000]``
"""

from __future__ import annotations

import argparse
import struct
import tempfile
import time
from functools import partial
from pathlib import Path

import trio

from trio_broker.broker.config import BrokerConfig
from trio_broker.broker.coordinator import CommitRequest, GroupCoordinator, OffsetCommitEntry
from trio_broker.broker.coordinator.internal_topics import OFFSETS_TOPIC, InternalTopics
from trio_broker.broker.storage import LogManager, log_config_from
from trio_broker.protocol.records import decode_batches


def _storage(data: Path, *, topic: bool = True,
             ) -> tuple[BrokerConfig, LogManager, GroupCoordinator]:
    cfg = BrokerConfig(log_dirs=str(data))
    logs = LogManager(cfg.log_dir_list, log_config_from(cfg))
    logs.load()
    coordinator = GroupCoordinator(cfg, cfg.log_dir_list[0])
    if topic:
        coordinator.attach_internal_topics(InternalTopics(cfg, logs))
    return cfg, logs, coordinator


async def commit_all(data: Path, groups: int, commits: int, concurrency: int = 100, *,
                     topic: bool = True) -> float:
    _, logs, coordinator = _storage(data, topic=topic)
    per_group = commits // groups

    async def committer(first: int) -> None:
        for g in range(first, groups, concurrency):
            for i in range(per_group):
                done = trio.Event()
                coordinator.commit_offsets(
                    CommitRequest(group_id=f"group-{g}"),
                    [OffsetCommitEntry("orders", i % 6, i, "")],
                    lambda _reply, done=done: done.set())
                await done.wait()

    async with trio.open_nursery() as nursery:
        await nursery.start(coordinator.run)
        t0 = time.perf_counter()
        async with trio.open_nursery() as workers:
            for k in range(concurrency):
                workers.start_soon(committer, k)
        elapsed = time.perf_counter() - t0
        nursery.cancel_scope.cancel()
    coordinator.close()
    logs.close()
    return elapsed


async def reload_coordinator(coordinator: GroupCoordinator) -> int:
    async with trio.open_nursery() as nursery:
        await nursery.start(coordinator.run)
        nursery.cancel_scope.cancel()
    return len(coordinator.groups)


def replay_topic(logs: LogManager) -> tuple[int, int]:
    """Decode every record of the topic into the latest offset per key: (records, keys)."""
    latest: dict[bytes, int] = {}
    records = 0
    for p in range(logs.partition_count(OFFSETS_TOPIC) or 0):
        log = logs.get_log(OFFSETS_TOPIC, p)
        assert log is not None
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            data = log.read(offset, 1 << 20).records
            assert isinstance(data, bytes)
            for _, batch in decode_batches(data):
                for record in batch:
                    records += 1
                    if record.value is not None and record.key is not None:
                        latest[record.key] = struct.unpack_from(">q", record.value, 2)[0]
                    offset = record.offset + 1
    return records, len(latest)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--commits", type=int, default=100_000)
    args = parser.parse_args()
    reference = trio.run(partial(commit_all, Path(tempfile.mkdtemp()), args.groups,
                                 args.commits, topic=False))
    data = Path(tempfile.mkdtemp())
    elapsed = trio.run(commit_all, data, args.groups, args.commits)
    print(f"{args.commits:,} commits over {args.groups:,} groups: {elapsed:.1f} s "
          f"({args.commits / elapsed:,.0f} commits/s, each fsynced and appended to the topic; "
          f"file only, same run: {args.commits / reference:,.0f} commits/s)")

    t0 = time.perf_counter()
    _, logs, coordinator = _storage(data)
    t1 = time.perf_counter()
    coordinator.read_files()
    loaded = trio.run(reload_coordinator, coordinator)
    t2 = time.perf_counter()
    print(f"log manager load with {OFFSETS_TOPIC} (50 partitions): {(t1 - t0) * 1000:.0f} ms")
    print(f"coordinator reload from its files: {(t2 - t1) * 1000:.0f} ms ({loaded:,} groups)")
    t3 = time.perf_counter()
    records, keys = replay_topic(logs)
    t4 = time.perf_counter()
    print(f"decoding the topic's {records:,} records to {keys:,} live offsets: "
          f"{(t4 - t3) * 1000:.0f} ms")
    coordinator.close()
    logs.close()


if __name__ == "__main__":
    main()
