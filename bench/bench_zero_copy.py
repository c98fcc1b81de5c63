"""Zero-copy fetch: consume throughput and broker CPU per GB, this checkout against a base revision.

Run: ``.venv/bin/python bench/bench_zero_copy.py [--base main ...] [--mb 300] [--rounds 2]``.
Not part of the test suite. For each record size (10 KB, 100 KB, 1 MB) it starts ``trio-broker
serve`` from each base revision (checked out into a temporary git worktree, run with this
virtualenv and the base's package first on ``PYTHONPATH``) and from this checkout, in turn, in
the same run; each broker gets ``--mb`` MB of random records in one partition (produced
untimed, acks=1), then one confluent-kafka consumer reads them all from offset 0 with
``fetch.queue.backoff.ms=1``, and a raw client repeats one Fetch v11 of up to 1 MB from offset
0 until as many bytes came back (the same response every time, so the broker's work per GB does
not depend on how the consumer library sized its fetches). Printed per run: MB/s consumed and
the broker's CPU seconds (``/proc``) per GB, for both. First, the send path alone: this process
sends the same file bytes to a draining loopback reader through the broker's copy path and
through its ``sendfile`` path, alternately, and prints its CPU seconds per GB for each. Figures
go to docs/benchmarks.md ("Zero-copy fetch").
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import confluent_kafka
from bench_produce_consume import _cpu_s, create_topic, trio_broker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trio_broker.client.core.fetch import fetch_entry, fetch_request
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.messages import encode_request

ROOT = Path(__file__).resolve().parent.parent
SIZES = (10_000, 100_000, 1_000_000)
#: the broker's message.max.bytes: a 1 MB record with its batch overhead still fits
MAX_MESSAGE = 1_048_588


@contextmanager
def pythonpath(checkout: Path) -> Iterator[None]:
    """Brokers started inside run ``checkout``'s package (subprocesses inherit the path)."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(checkout)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def produce(bootstrap: str, topic: str, size: int, count: int) -> None:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
        "message.max.bytes": MAX_MESSAGE, "queue.buffering.max.kbytes": 1_048_576})
    values = [os.urandom(size) for _ in range(16)]
    for i in range(count):
        while True:
            try:
                producer.produce(topic, values[i % 16])
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("records were not delivered")


def consume(bootstrap: str, topic: str, count: int) -> float:
    """Seconds to consume ``count`` records from offset 0."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench-zero-copy",
        "enable.auto.commit": False, "fetch.queue.backoff.ms": 1,
        "fetch.message.max.bytes": MAX_MESSAGE})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 300
    try:
        while got < count and time.monotonic() < deadline:
            # poll(), not consume(n): consume holds records back until it has n of them
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got += 1
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    if got < count:
        raise RuntimeError(f"consumed {got} of {count} records")
    return elapsed


def fetch_loop(bootstrap: str, topic: str, gb: float) -> tuple[int, int]:
    """(bytes received, fetches): the same Fetch v11 of up to 1 MB from offset 0, one in flight,
    until ``gb`` GB came back. Every response is the same bytes, so the broker's CPU per GB does
    not depend on how a consumer library sizes its fetches."""
    host, port = bootstrap.rsplit(":", 1)
    body = fetch_request(11, [(topic, fetch_entry(0, 0, MAX_MESSAGE))], max_wait_ms=0)
    request = encode_request(ApiKey.Fetch, 11, 1, "bench", body)
    buf = bytearray(8 << 20)
    view = memoryview(buf)
    received = fetches = 0
    with socket.create_connection((host, int(port))) as sock:
        while received < gb * 1e9:
            sock.sendall(request)
            got = 0
            while got < 4:
                got += sock.recv_into(view[got:4])
            (size,) = struct.unpack_from(">i", buf)
            got = 0
            while got < size:
                got += sock.recv_into(view[:size - got])
            received += 4 + size
            fetches += 1
    return received, fetches


def one_run(size: int, mb: float) -> tuple[float, float, float]:
    """(MB/s, broker CPU s per GB) of consuming ``mb`` MB of ``size``-byte records with
    confluent-kafka, and the broker CPU s per GB of the same 1 MB fetch repeated (``mb`` MB)."""
    count = max(1, int(mb * 1e6 / size))
    with trio_broker([f"message.max.bytes={MAX_MESSAGE}"]) as (bootstrap, pid):
        topic = f"zc-{size}"
        create_topic(bootstrap, topic, mock=False)
        produce(bootstrap, topic, size, count)
        cpu = _cpu_s(pid)
        elapsed = consume(bootstrap, topic, count)
        cpu = _cpu_s(pid) - cpu
        raw_cpu = _cpu_s(pid)
        raw_bytes, _ = fetch_loop(bootstrap, topic, mb / 1000)
        raw_cpu = _cpu_s(pid) - raw_cpu
    total_mb = count * size / 1e6
    return total_mb / elapsed, cpu / (total_mb / 1000), raw_cpu / (raw_bytes / 1e9)


_DRAIN = r"""
import socket, sys
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
buf = bytearray(4 << 20)
while sock.recv_into(buf):
    pass
"""


def send_path_cpu(mb_per_send: float, gb: float) -> dict[str, float]:
    """CPU seconds per GB of this process sending one file's bytes to a loopback socket whose
    reader (another process) only drains: the broker's copy path (``pread``, joined behind a
    header, ``send_all``) against its ``sendfile`` path (``send_parts``), alternately."""
    import trio

    from trio_broker.broker.network.send_file import send_parts
    from trio_broker.broker.storage import FileRegion

    size = int(mb_per_send * 1e6)
    sends = max(1, int(gb * 1e9 / size))
    out: dict[str, list[float]] = {"copy": [], "sendfile": []}

    async def run(path: Path, listening: socket.socket) -> None:
        conn, _ = await trio.socket.from_stdlib_socket(listening).accept()
        stream = trio.SocketStream(conn)
        fd = os.open(path, os.O_RDONLY)
        header = bytes(60)
        try:
            for _ in range(3):
                for mode in ("copy", "sendfile"):
                    cpu = time.process_time()
                    for _ in range(sends):
                        if mode == "copy":
                            await stream.send_all(b"".join([header, os.pread(fd, size, 0)]))
                        else:
                            region = FileRegion.of(fd, 0, size)
                            try:
                                await send_parts(stream, [header, region, b""])
                            finally:
                                region.close()
                    out[mode].append((time.process_time() - cpu) / (sends * size / 1e9))
        finally:
            os.close(fd)
            await stream.aclose()

    with tempfile.TemporaryDirectory() as tmp, socket.create_server(("127.0.0.1", 0)) as lsock:
        path = Path(tmp) / "segment.log"
        path.write_bytes(os.urandom(size))
        drain = subprocess.Popen([sys.executable, "-c", _DRAIN, str(lsock.getsockname()[1])])
        try:
            trio.run(run, path, lsock)
        finally:
            drain.wait(30)
    return {mode: statistics.median(values) for mode, values in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", action="append",
                        help="a revision to compare against (repeatable; default main)")
    parser.add_argument("--mb", type=float, default=300.0, help="MB consumed per run")
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds of the broker runs (0: only the send path)")
    args = parser.parse_args()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                          capture_output=True, check=True).stdout.strip()
    bases = args.base or ["main"]
    print(f"consume {args.mb:.0f} MB per run, {' and '.join(bases)} vs head {head}, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for mb_per_send in (0.03, 0.1, 0.15, 0.2, 0.3, 1.0):
        cpu = send_path_cpu(mb_per_send, 1.0)
        print(f"send path, {mb_per_send:g} MB per response, 1 GB, CPU s per GB of this process:"
              f" copy {cpu['copy']:.3f}, sendfile {cpu['sendfile']:.3f} (load "
              f"{os.getloadavg()[0]:.1f})", flush=True)
    if args.rounds == 0:
        return
    results: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="trio-broker-base-") as tmp:
        trees: list[tuple[str, Path]] = []
        try:
            for i, base in enumerate(bases):
                tree = Path(tmp) / f"base{i}"
                subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), base],
                               cwd=ROOT, check=True)
                trees.append((base, tree))
            for round_ in range(1, args.rounds + 1):
                for size in SIZES:
                    for label, checkout in [*trees, ("head", ROOT)]:
                        with pythonpath(checkout):
                            mb_s, cpu_gb, raw_gb = one_run(size, args.mb)
                        results.setdefault((label, size), []).append((mb_s, cpu_gb, raw_gb))
                        print(f"round {round_} {label:>8} {size:>9,} B records: {mb_s:7.1f} "
                              f"MB/s, broker {cpu_gb:5.2f} CPU s/GB; 1 MB fetch loop: "
                              f"{raw_gb:5.2f} CPU s/GB (load {os.getloadavg()[0]:.1f})",
                              flush=True)
        finally:
            for _, tree in trees:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT,
                               check=False)
    print("\nmedians: record size, then per revision: consumer MB/s, broker CPU s per GB "
          "consumed, broker CPU s per GB in the 1 MB fetch loop")
    for size in SIZES:
        cells = []
        for label in [*bases, "head"]:
            runs = results[label, size]
            cells.append(f"{label}: {statistics.median(r[0] for r in runs):7.1f} MB/s "
                         f"{statistics.median(r[1] for r in runs):5.2f} s/GB "
                         f"{statistics.median(r[2] for r in runs):5.2f} s/GB")
        print(f"{size:>9,} B | " + " | ".join(cells))

if __name__ == "__main__":
    main()
