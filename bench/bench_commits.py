"""Commit throughput of the group coordinator's fsynced offset log (in-process, real fsync).

Run: .venv/bin/python bench/bench_commits.py
"""
import sys, time, tempfile, os
import trio
from trio_broker.config import BrokerConfig
from trio_broker.coordinator import GroupCoordinator, OffsetCommitEntry
from trio_broker.coordinator import offset_log

fsyncs = 0
real = os.fsync
def counting(fd):
    global fsyncs; fsyncs += 1; real(fd)
os.fsync = counting

async def main(committers, per):
    d = tempfile.mkdtemp()
    cfg = BrokerConfig(log_dirs=d)
    c = GroupCoordinator(cfg, cfg.log_dir_list[0])
    async with trio.open_nursery() as n:
        await n.start(c.run)
        t0 = time.perf_counter()
        async def committer(i):
            for j in range(per):
                done = trio.Event()
                c.commit_offsets(group_id=f"g{i}", generation_id=-1, member_id="", retention_time_ms=-1,
                                 offsets=[OffsetCommitEntry("t", p, j, "") for p in range(6)],
                                 respond=lambda r: done.set())
                await done.wait()
        async with trio.open_nursery() as n2:
            for i in range(committers):
                n2.start_soon(committer, i)
        dt = time.perf_counter() - t0
        n.cancel_scope.cancel()
    c.close()
    total = committers * per
    print(f"{committers} concurrent committers x {per}: {total/dt:,.0f} commits/s "
          f"(6 partitions each), {fsyncs} fsyncs, file {c.offset_log.size_bytes} bytes")
for committers, per in ((1, 500), (10, 200), (100, 50)):
    fsyncs = 0
    trio.run(main, committers, per)
t0=time.perf_counter()
log=offset_log.OffsetLog(tempfile.mkdtemp()); log.open()
recs=[offset_log.encode_record(f"g{i%100}", [(("t",p), offset_log.OffsetAndMetadata(i,"",0)) for p in range(6)]) for i in range(100000)]
log.append(recs); log.close()
t0=time.perf_counter(); st=offset_log.OffsetLog(log.directory).open(); dt=time.perf_counter()-t0
print(f"replay of 100,000 commit records ({log.size_bytes/1e6:.1f} MB): {dt*1000:.0f} ms")
