"""Commit throughput of the group coordinator's fsynced offset log (in-process, real fsync),
and how long replaying a large offsets file takes at start-up.

Run: ``.venv/bin/python bench/bench_commits.py``
"""

from __future__ import annotations

import os
import tempfile
import time

import trio

from trio_broker.broker.config import BrokerConfig
from trio_broker.broker.coordinator import (
    CommitRequest,
    GroupCoordinator,
    OffsetCommitEntry,
    offset_log,
)

_fsyncs = 0
_real_fsync = os.fsync


def _counting_fsync(fd: int) -> None:
    global _fsyncs
    _fsyncs += 1
    _real_fsync(fd)


async def commit_rate(committers: int, per: int) -> None:
    cfg = BrokerConfig(log_dirs=tempfile.mkdtemp())
    coordinator = GroupCoordinator(cfg, cfg.log_dir_list[0])

    async def committer(i: int) -> None:
        for j in range(per):
            done = trio.Event()
            coordinator.commit_offsets(
                CommitRequest(group_id=f"g{i}"),
                [OffsetCommitEntry("t", p, j, "") for p in range(6)],
                lambda _reply, done=done: done.set())
            await done.wait()

    async with trio.open_nursery() as nursery:
        await nursery.start(coordinator.run)
        t0 = time.perf_counter()
        async with trio.open_nursery() as workers:
            for i in range(committers):
                workers.start_soon(committer, i)
        elapsed = time.perf_counter() - t0
        nursery.cancel_scope.cancel()
    coordinator.close()
    total = committers * per
    print(f"{committers:4} concurrent committers x {per}: {total / elapsed:9,.0f} commits/s "
          f"(6 partitions each), {_fsyncs} fsyncs, file {coordinator.offset_log.size_bytes} bytes")


def replay_time(records: int = 100_000) -> None:
    log = offset_log.OffsetLog(tempfile.mkdtemp())
    log.open()
    log.append([offset_log.encode_record(
        f"g{i % 100}", [(("t", p), offset_log.OffsetAndMetadata(i, "", 0)) for p in range(6)])
        for i in range(records)])
    log.close()
    t0 = time.perf_counter()
    offset_log.OffsetLog(log.directory).open()
    elapsed = time.perf_counter() - t0
    print(f"replay of {records:,} commit records ({log.size_bytes / 1e6:.1f} MB): "
          f"{elapsed * 1000:.0f} ms")


def main() -> None:
    global _fsyncs
    os.fsync = _counting_fsync  # counts fsyncs; each still reaches the disk
    for committers, per in ((1, 500), (10, 200), (100, 50)):
        _fsyncs = 0
        trio.run(commit_rate, committers, per)
    replay_time()


if __name__ == "__main__":
    main()
