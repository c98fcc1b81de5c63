"""Where ``open_broker()`` -> the first acknowledged produce spends its time, phase by phase.

Run: ``.venv/bin/python bench/bench_first_produce.py [--repeats 30] [--dir /dev/shm]
[--base REV]``. Each repeat starts an embedded broker on an empty log dir, connects, sends
Metadata v9 for a new topic (auto-created) and Produce v7 (acks=1) of one record as raw frames
(``bench_pipeline.first_produce_ms`` measures the same exchange), and records the phases, every
fsync this process makes (its path and duration) and every hand-off to a worker thread
(``trio.to_thread.run_sync``). ``--dir`` puts the log dirs elsewhere (``/dev/shm``: fsyncs cost
nothing); ``--base`` also runs a checkout of another revision (``git archive``) in a process of its
own, one repeat of each in turn; ``--verbose`` prints the last repeat's timeline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this tree's package, not the one installed
PHASES = ("start", "connect", "metadata", "produce", "total")


def frames(topic: str = "first") -> tuple[bytes, bytes]:
    """Metadata v9 auto-creating ``topic``, and Produce v7 (acks=1) of one 100-byte record to
    its partition 0."""
    from trio_broker.protocol.api_keys import ApiKey, request_class
    from trio_broker.protocol.messages import encode_request, make_request
    from trio_broker.protocol.records import build_batch

    md, pr = request_class(ApiKey.Metadata), request_class(ApiKey.Produce)
    metadata = encode_request(ApiKey.Metadata, 9, 1, "bench", make_request(
        ApiKey.Metadata, 9, topics=[md.MetadataRequestTopic(name=topic)],
        allow_auto_topic_creation=True, include_topic_authorized_operations=False))
    part = pr.TopicProduceData.PartitionProduceData(
        index=0, records=build_batch([(None, b"x" * 100, ())]))
    produce = encode_request(ApiKey.Produce, 7, 2, "bench", make_request(
        ApiKey.Produce, 7, transactional_id=None, acks=1, timeout_ms=5000,
        topic_data=[pr.TopicProduceData(name=topic, partition_data=[part])]))
    return metadata, produce


async def read_frame(stream: Any) -> bytes:
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
        chunk = await stream.receive_some(65536)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        buf += chunk
    return buf


def measure(repeats: int, directory: str | None, verbose: bool) -> dict[str, list[float]]:
    """The phases (ms), fsync count and time, and thread hand-offs of each repeat."""
    import trio

    from trio_broker import open_broker

    events: list[tuple[str, str, float, float]] = []
    real_fsync, real_run_sync = os.fsync, trio.to_thread.run_sync

    def fsync(fd: int) -> None:
        t0 = time.perf_counter()
        try:
            real_fsync(fd)
        finally:
            path = os.readlink(f"/proc/self/fd/{fd}")
            events.append(("fsync", path, t0, time.perf_counter()))

    async def run_sync(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await real_run_sync(fn, *args, **kwargs)
        finally:
            events.append(("thread", getattr(fn, "__qualname__", repr(fn)), t0,
                           time.perf_counter()))

    os.fsync = fsync  # type: ignore[assignment]
    trio.to_thread.run_sync = run_sync  # type: ignore[assignment]
    metadata, produce = frames()
    out: dict[str, list[float]] = {k: [] for k in (*PHASES, "fsyncs", "fsync_ms", "threads")}

    async def main() -> None:
        for i in range(repeats):
            with tempfile.TemporaryDirectory(dir=directory) as d:
                events.clear()
                t0 = time.perf_counter()
                async with open_broker(log_dirs=d) as broker:
                    t1 = time.perf_counter()
                    stream = await trio.open_tcp_stream(broker.host, broker.port)
                    t2 = time.perf_counter()
                    await stream.send_all(metadata)
                    await read_frame(stream)
                    t3 = time.perf_counter()
                    await stream.send_all(produce)
                    await read_frame(stream)
                    t4 = time.perf_counter()
                    await stream.aclose()
                for name, value in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0),
                                       strict=True):
                    out[name].append(value * 1000)
                seen = [e for e in events if e[2] <= t4]
                fsyncs = [e for e in seen if e[0] == "fsync"]
                out["fsyncs"].append(len(fsyncs))
                out["fsync_ms"].append(sum(e[3] - e[2] for e in fsyncs) * 1000)
                out["threads"].append(sum(1 for e in seen if e[0] == "thread"))
                if verbose and i == repeats - 1:
                    print("  phases (ms): " + ", ".join(
                        f"{k} {out[k][-1]:.2f}" for k in PHASES))
                    for kind, what, a, b in sorted(seen, key=lambda e: e[2]):
                        what = what.removeprefix(d + "/")
                        print(f"  {(a - t0) * 1000:7.2f} -> {(b - t0) * 1000:7.2f} ms  "
                              f"{kind:6} {what}")

    trio.run(main)
    os.fsync, trio.to_thread.run_sync = real_fsync, real_run_sync  # type: ignore[assignment]
    return out


def summary(result: dict[str, list[float]]) -> str:
    return ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in result.items()) + \
        f" (total min {min(result['total']):.2f}, n={len(result['total'])})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--dir", default=None, help="where the log dirs go (default: the "
                        "system's temporary directory)")
    parser.add_argument("--base", help="also measure this revision, alternately")
    parser.add_argument("--rounds", type=int, default=3,
                        help="with --base: repeats x rounds of each, one of each in turn")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:  # one repeat per line read, for --base
        for _ in sys.stdin:
            print(json.dumps(measure(1, args.dir, False)), flush=True)
        return
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; medians in ms")
    if not args.base:
        print(summary(measure(args.repeats, args.dir, args.verbose)))
        return
    with tempfile.TemporaryDirectory() as base_tree:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.base],
                                 capture_output=True, check=False)
        if archive.returncode:
            parser.error(f"--base {args.base}: {archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", base_tree], input=archive.stdout, check=True)
        # the base runs this script's measuring code against its own package
        Path(base_tree, "bench", Path(__file__).name).write_text(Path(__file__).read_text())
        trees = {args.base: Path(base_tree), "this tree": REPO}
        workers = {}
        for name, tree in trees.items():
            argv = [sys.executable, str(tree / "bench" / Path(__file__).name), "--worker"] + (
                ["--dir", args.dir] if args.dir else [])
            workers[name] = subprocess.Popen(argv, cwd=tree, stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, text=True)
        results: dict[str, dict[str, list[float]]] = {}
        try:
            # one repeat of each in turn (which goes first alternates): the machine's changing
            # load falls on both alike
            for i in range(args.repeats * args.rounds + 2):
                for name in (list(workers) if i % 2 else list(workers)[::-1]):
                    worker = workers[name]
                    assert worker.stdin is not None
                    assert worker.stdout is not None
                    worker.stdin.write("\n")
                    worker.stdin.flush()
                    one = json.loads(worker.stdout.readline())
                    if i < 2:
                        continue  # warming up (imports, the first worker thread)
                    mine = results.setdefault(name, {k: [] for k in one})
                    for k, v in one.items():
                        mine[k] += v
        finally:
            for worker in workers.values():
                assert worker.stdin is not None
                worker.stdin.close()
                worker.wait()
        for name, result in results.items():
            print(f"{name}: {summary(result)}")
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
