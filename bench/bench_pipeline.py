"""Pipeline benchmark: Metadata requests/s through the broker's full request path, next to a
bare Trio echo server answering the same bytes, plus start-up times.

Run: ``.venv/bin/python bench/bench_pipeline.py [--seconds 5] [--rounds 5]``. The load generator
is a separate process using blocking sockets, so it never shares a core's event loop with the
server. The request rates are measured in rounds, broker and echo server alternating, and each
figure is printed as the median with the spread of the rounds: the one-in-flight ratio moves by
more between runs than most changes move it.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import multiprocessing as mp
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.messages import decode_response, encode_request, make_request

REQUEST = encode_request(ApiKey.Metadata, 1, 1, "bench", make_request(ApiKey.Metadata, 1,
                                                                    topics=[]))
#: the topic ``--api produce`` writes to (created by a Metadata request first)
PRODUCE_TOPIC = "bench-requests"


def produce_frames() -> tuple[bytes, bytes]:
    """(Metadata v9 auto-creating ``PRODUCE_TOPIC``, Produce v7 acks=1 of one batch of one
    100-byte record to its partition 0): what ``--api produce`` sends."""
    from bench_first_produce import frames

    return frames(PRODUCE_TOPIC)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _read_frames(sock: socket.socket, buf: bytearray, n: int) -> bytes:
    """Read until ``n`` whole frames arrived; return the last one."""
    last = b""
    while n:
        while len(buf) >= 4:
            (size,) = struct.unpack_from(">i", buf)
            if len(buf) < 4 + size:
                break
            last = bytes(buf[4:4 + size])
            del buf[:4 + size]
            n -= 1
            if not n:
                return last
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("server closed")
        buf += chunk
    return last


def _load(port: int, depth: int, seconds: float, out: mp.Queue, request: bytes) -> None:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray()
    batch = request * depth
    done = 0
    start = time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        sock.sendall(batch)
        _read_frames(sock, buf, depth)
        done += depth
    took = time.perf_counter() - start
    sock.close()
    out.put((done, took))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(port: int, *, connections: int, depth: int, seconds: float,
            pid: int | None = None, request: bytes = REQUEST) -> tuple[float, float]:
    """(requests/s, server CPU microseconds per request; 0 without ``pid``)."""
    cpu0 = cpu_seconds(pid) if pid else 0.0
    out: mp.Queue = mp.Queue()
    procs = [mp.Process(target=_load, args=(port, depth, seconds, out, request))
             for _ in range(connections)]
    for p in procs:
        p.start()
    runs = [out.get() for _ in procs]
    for p in procs:
        p.join()
    cpu = cpu_seconds(pid) - cpu0 if pid else 0.0
    # timed by the load processes themselves, so their start-up is not counted in the rate
    total = sum(done for done, _ in runs)
    return total / max(took for _, took in runs), cpu / max(1, total) * 1e6


ECHO_SERVER = r'''
import struct, sys, trio
RESPONSE = bytes.fromhex(sys.argv[2])
async def handle(stream):
    buf = bytearray()
    try:
        while True:
            data = await stream.receive_some(65536)
            if not data:
                return
            buf += data
            out = bytearray()
            while len(buf) >= 4:
                (size,) = struct.unpack_from(">i", buf)
                if len(buf) < 4 + size:
                    break
                del buf[:4 + size]
                out += RESPONSE
            if out:
                await stream.send_all(out)
    except trio.BrokenResourceError:
        pass
async def main():
    async with trio.open_nursery() as n:
        await n.start(trio.serve_tcp, handle, int(sys.argv[1]))
        print("ready", flush=True)
trio.run(main)
'''


def _broker_response(port: int, request: bytes, setup: bytes = b"") -> bytes:
    """The broker's whole response frame to ``request`` (after ``setup``'s, if given)."""
    sock = socket.create_connection(("127.0.0.1", port))
    if setup:
        sock.sendall(setup)
        _read_frames(sock, bytearray(), 1)
    sock.sendall(request)
    frame = _read_frames(sock, bytearray(), 1)
    sock.close()
    return struct.pack(">i", len(frame)) + frame


def _wait_line(proc: subprocess.Popen, needle: str) -> float:
    assert proc.stdout is not None
    for line in proc.stdout:
        if needle in line:
            return time.perf_counter()
    raise RuntimeError(f"process exited before printing {needle!r}")


def start_broker(data: str, port: int, tree: Path | None = None,
                 ) -> tuple[subprocess.Popen, float]:
    """A ``trio-broker serve`` process (of the checkout ``tree``, else of this one's package)
    and the seconds it took to listen."""
    env = None if tree is None else dict(os.environ, PYTHONPATH=str(tree))
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "trio_broker", "serve", "--override",
         f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={data}",
         "--override", "log.level=WARNING"],
        stdout=subprocess.PIPE, text=True, cwd=tree, env=env)
    ready = _wait_line(proc, "listening on")
    return proc, ready - t0


def embedded_start_ms(repeats: int) -> list[float]:
    import trio

    from trio_broker import BrokerConfig, serve

    times: list[float] = []

    async def main() -> None:
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as d:
                async with trio.open_nursery() as n:
                    t0 = time.perf_counter()
                    config = BrokerConfig().evolve(listeners="PLAINTEXT://127.0.0.1:0",
                                                   log_dirs=d)
                    broker = await n.start(serve, config)
                    times.append((time.perf_counter() - t0) * 1000)
                    broker.stop()

    trio.run(main)
    return times


def first_produce_ms(repeats: int) -> list[float]:
    """``open_broker()`` to the first acknowledged produce, in one Trio program: Metadata v9
    for a new topic (auto-created), then Produce v7 (acks=1) of one record, raw frames over
    a Trio socket, so the figure is the broker's (no client library's start-up in it)."""
    import trio
    from bench_first_produce import frames, read_frame

    from trio_broker import open_broker

    metadata, produce = frames()
    times: list[float] = []

    async def exchange(stream: trio.SocketStream, frame: bytes) -> bytes:
        await stream.send_all(frame)
        return await read_frame(stream)

    async def main() -> None:
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as d:
                t0 = time.perf_counter()
                async with open_broker(log_dirs=d) as broker:
                    stream = await trio.open_tcp_stream(broker.host, broker.port)
                    await exchange(stream, metadata)
                    answer = await exchange(stream, produce)
                    times.append((time.perf_counter() - t0) * 1000)
                    await stream.aclose()
                _, body = decode_response(ApiKey.Produce, 7, answer[4:])
                [topic] = body.responses
                if topic.partition_responses[0].error_code:
                    raise RuntimeError(f"produce failed: {topic}")

    trio.run(main)
    return times


def mock_first_produce_ms(repeats: int) -> list[float]:
    """The same with librdkafka's in-process mock broker: a producer with
    ``test.mock.num.brokers=1`` created, one record produced and its delivery reported."""
    import confluent_kafka

    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        producer = confluent_kafka.Producer({"test.mock.num.brokers": 1, "acks": 1,
                                             "linger.ms": 0, "log_level": 0})
        producer.produce("first", b"x" * 100)
        if producer.flush(10):
            raise RuntimeError("the mock did not acknowledge")
        times.append((time.perf_counter() - t0) * 1000)
        del producer
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0,
                        help="per server and scenario, split into the rounds")
    parser.add_argument("--base", metavar="REV",
                        help="also measure the broker of git revision REV (checked out into a "
                             "temporary worktree), in the same rounds: a same-run comparison")
    parser.add_argument("--rounds", type=int, default=5,
                        help="rounds per scenario, broker and echo server alternating; the "
                             "median and (min-max) over them are printed")
    parser.add_argument("--requests-only", action="store_true",
                        help="skip the start-up figures; measure only the request rates")
    parser.add_argument("--api", choices=("metadata", "produce"), action="append",
                        help="the request measured: Metadata v1 naming no topic (default), "
                             "or Produce v7 acks=1 of one 100-byte record; may be repeated")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    if not args.requests_only:
        startup_figures()
    with base_checkout(args.base) as base:
        for api in args.api or ["metadata"]:
            request_rates(args.seconds, api, args.rounds, base)


@contextlib.contextmanager
def base_checkout(rev: str | None) -> Iterator[tuple[str, Path] | None]:
    """(rev, a temporary git worktree of ``rev``), removed afterwards; None without ``rev``."""
    if rev is None:
        yield None
        return
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="trio-broker-base-") as tmp:
        tree = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), rev], cwd=root,
                       check=True)
        try:
            yield rev, tree
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=root,
                           check=False)


def startup_figures() -> None:
    """Process start to listening, embedded start, and the first acknowledged produce."""
    # Timed as an installed broker starts, its bytecode cached: a checkout used with
    # PYTHONDONTWRITEBYTECODE=1 never writes it, and each start would compile ~130 modules.
    import trio_broker

    compileall.compile_dir(Path(trio_broker.__file__).parent, quiet=1)
    starts = []
    with tempfile.TemporaryDirectory() as data:
        for _ in range(5):
            proc, took = start_broker(data, _free_port())
            starts.append(took * 1000)
            proc.terminate()
            proc.wait()
    emb = embedded_start_ms(20)
    print(f"process start -> listening (bytecode cached): median "
          f"{statistics.median(starts):.0f} ms (min {min(starts):.0f}, max {max(starts):.0f}, n=5)")
    print(f"embedded nursery.start(serve): median {statistics.median(emb):.1f} ms "
          f"(min {min(emb):.1f}, n=20)")
    first, mock_first = first_produce_ms(20), mock_first_produce_ms(20)
    print(f"open_broker() -> first acknowledged produce: median "
          f"{statistics.median(first):.1f} ms (min {min(first):.1f}, n=20); librdkafka mock "
          f"(producer created -> delivery report): median {statistics.median(mock_first):.1f} ms "
          f"(min {min(mock_first):.1f}, n=20)")


def request_rates(seconds: float, api: str = "metadata", rounds: int = 5,
                  base: tuple[str, Path] | None = None) -> None:
    """Requests/s and CPU per request of the broker and the bare Trio echo server, same run:
    each scenario in ``rounds`` rounds of ``seconds / rounds``, the servers taking turns (the
    order rotating each round), so the spread between rounds is printed next to each figure:
    the median, then (min-max) over the rounds; a round's ratio is a broker's rate over the
    echo server's in that round. ``base`` (revision, its checkout): that revision's broker is
    measured in the same turns, so the two revisions see the same machine."""
    setup, request, title = b"", REQUEST, "Metadata v1 (no topics)"
    if api == "produce":
        (setup, request), title = produce_frames(), "Produce v7 acks=1, 1 record"
    scenarios = [("1 connection, 1 in flight", 1, 1), ("1 connection, 16 pipelined", 1, 16),
                 ("4 connections, 16 pipelined each", 4, 16)]
    each = seconds / rounds
    names = ["this code", *([f"base {base[0]}"] if base else []), "echo"]
    runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory() as data, tempfile.TemporaryDirectory() as base_data:
        try:
            servers, responses = [], []
            for tree, directory in [(None, data)] + ([(base[1], base_data)] if base else []):
                port = _free_port()
                proc, _ = start_broker(directory, port, tree)
                procs.append(proc)
                responses.append(_broker_response(port, request, setup))
                servers.append((port, proc.pid))
            eport = _free_port()  # the echo server answers with this code's answer
            echo = subprocess.Popen([sys.executable, "-c", ECHO_SERVER, str(eport),
                                     responses[0].hex()], stdout=subprocess.PIPE, text=True)
            procs.append(echo)
            _wait_line(echo, "ready")
            servers.append((eport, echo.pid))
            for scenario, conns, depth in scenarios:
                for round_ in range(rounds):
                    order = list(zip(names, servers, strict=True))
                    turn = round_ % len(order)
                    for name, (port, pid) in order[turn:] + order[:turn]:
                        runs.setdefault((scenario, name), []).append(measure(
                            port, connections=conns, depth=depth, seconds=each, pid=pid,
                            request=request))
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait()
    print(f"\n{title}: median (min-max) of {rounds} rounds of {each:g} s, the servers taking "
          "turns")
    print(f"{'':34} {'server':>12} {'req/s':>26} {'ratio to echo':>18} {'CPU us/req':>20}")
    for scenario, _, _ in scenarios:
        echo_runs = runs[scenario, "echo"]
        for i, name in enumerate(names):
            figures = runs[scenario, name]
            ratios = [b[0] / e[0] for b, e in zip(figures, echo_runs, strict=True)]
            print(f"{scenario if i == 0 else '':34} {name:>12} "
                  f"{spread([f[0] for f in figures], ',.0f'):>26} {spread(ratios, '.2f'):>18} "
                  f"{spread([f[1] for f in figures], '.1f'):>20}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def spread(values: list[float], fmt: str) -> str:
    """``median (min-max)``: a figure with the spread it was measured with."""
    return (f"{format(statistics.median(values), fmt)} "
            f"({format(min(values), fmt)}-{format(max(values), fmt)})")


if __name__ == "__main__":
    main()
