"""Start-up and recovery time against log size: ``bench_growth.py --only recovery``.

For each size (``--gb``, default 1 2 5 10 20 GB), one partition of that many bytes is written by
the broker's own append API in this process (``LogManager`` + ``Log.append`` of one 1 MiB batch
of 1,000 records of 1,000 B, again and again; default segment.bytes 1 GiB), closed cleanly
(everything fsynced, the clean-shutdown marker and the recovery-point checkpoint written). Then,
each under ``flock`` of the bench lock when ``--lock`` is given (the writing is not):

* ``read``: the same run's reference, reading every segment file's bytes once sequentially
  (1 MiB ``readinto``), with the files' pages dropped from the page cache first;
* ``clean``: ``trio-broker serve`` started after that clean shutdown;
* ``kill -9``: the broker started, answering a fetch, killed with SIGKILL, then started again:
  an unclean start, which re-reads (CRC-32C of every batch) the segments from the one holding
  the recovery point, here the last segment (as Kafka's recovery from its checkpoint);
* ``no checkpoint``: kill -9 and the recovery-point checkpoint removed as well: every segment is
  re-read, the worst case.

Each start is timed from process start to its "listening" line and to the first Fetch answered
(a raw Fetch v11 of up to 1 MB from offset 0). Before each start and read the data files' pages
are dropped from the page cache (``posix_fadvise(DONTNEED)`` after ``os.sync``; no global drop).
The data is deleted after each size. The reference start is the same broker with an empty data
directory, in the same run (inside the same lock).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOPIC = "recovery"
BATCH_RECORDS = 1000
RECORD_BYTES = 1000


def write_log(data: Path, gb: float) -> float:
    """Write ``gb`` GB into one partition with the broker's append API; seconds taken."""
    from trio_broker.broker.storage import LogConfig, LogManager
    from trio_broker.protocol.batch import validate_batch
    from trio_broker.protocol.records import build_batch

    raw = build_batch([(b"k%06d" % i, os.urandom(RECORD_BYTES)) for i in range(BATCH_RECORDS)])
    header = validate_batch(bytearray(raw), max_message_bytes=len(raw) + 1)
    manager = LogManager([data], LogConfig())
    manager.load()
    manager.create_topic(TOPIC, 1, {})
    log = manager.get_log(TOPIC, 0)
    assert log is not None
    log.become_leader(0)
    started = time.perf_counter()
    for _ in range(int(gb * 1e9 / len(raw)) + 1):
        log.append(raw, header, now_ms=time.time_ns() // 1_000_000)
        if log.needs_flush():
            log.flush()  # as the broker's flusher: a rolled segment is fsynced
    manager.close()
    return time.perf_counter() - started


def _segments(data: Path) -> list[Path]:
    return sorted((data / f"{TOPIC}-0").glob("*.log"))


def drop_cache(data: Path) -> None:
    """Drop the page-cache pages of every file under ``data`` (written back first)."""
    os.sync()
    for path in data.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def read_once(data: Path) -> float:
    """Seconds to read every segment file once, sequentially, from a dropped cache."""
    drop_cache(data)
    buf = bytearray(1 << 20)
    started = time.perf_counter()
    for path in _segments(data):
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass
    return time.perf_counter() - started


def _fetch(port: int) -> None:
    from trio_broker.client.core.fetch import fetch_entry, fetch_request
    from trio_broker.protocol.api_keys import ApiKey
    from trio_broker.protocol.messages import encode_request

    body = fetch_request(11, [(TOPIC, fetch_entry(0, 0, 1_000_000))], max_wait_ms=0)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(encode_request(ApiKey.Fetch, 11, 1, "bench", body))
        head = b""
        while len(head) < 4:
            head += sock.recv(4 - len(head))
        (size,) = struct.unpack(">i", head)
        while size > 0:
            size -= len(sock.recv(min(size, 1 << 20)))


def timed_start(argv: list[str], port: int, *, fetch: bool = True,
                ) -> tuple[subprocess.Popen[str], float, float]:
    """(process, seconds to "listening", seconds to the first fetch answered)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "listening on" in line:
            break
    else:
        raise RuntimeError("the broker exited at start")
    listening = time.perf_counter() - started
    if fetch:
        _fetch(port)
    return proc, listening, time.perf_counter() - started


def _kill9(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(60)


def _term(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(600)


def _rereads(data: Path) -> int:
    """Bytes an unclean start re-reads: the segments from the one holding the checkpointed
    recovery point (here the log end, written by the clean shutdown before it)."""
    return _segments(data)[-1].stat().st_size


def measure(data: Path, port: int, broker_argv: list[str]) -> dict[str, float]:
    """The timed part for one size (the caller holds the bench lock)."""
    out: dict[str, float] = {}
    out["read"] = read_once(data)
    started = time.perf_counter()
    for path in _segments(data):  # the pages read just now are cached: the warm figure
        with open(path, "rb", buffering=0) as f:
            while f.read(1 << 20):
                pass
    out["read warm"] = time.perf_counter() - started
    drop_cache(data)
    proc, out["clean listening"], out["clean fetch"] = timed_start(broker_argv, port)
    _kill9(proc)  # unclean from here on
    drop_cache(data)
    proc, out["kill -9 listening"], out["kill -9 fetch"] = timed_start(broker_argv, port)
    _kill9(proc)
    for checkpoint in data.glob("recovery-point-offset-checkpoint"):
        checkpoint.unlink()
    drop_cache(data)
    proc, out["no checkpoint listening"], out["no checkpoint fetch"] = timed_start(
        broker_argv, port)
    _term(proc)
    return out


def run_size(gb: float, lock: str | None) -> dict[str, float]:
    """Write, measure (under ``lock`` if given, in a child holding it), delete."""
    data = Path(tempfile.mkdtemp(prefix="bench-recovery-", dir=os.environ.get("BENCH_DATA")))
    try:
        took = write_log(data, gb)
        size = sum(p.stat().st_size for p in _segments(data))
        print(f"{gb:g} GB: wrote {size / 1e9:.2f} GB in {len(_segments(data))} segment(s) "
              f"in {took:.1f} s ({size / 1e6 / took:.0f} MB/s, append API, no lock)", flush=True)
        rereads = _rereads(data)
        argv = [sys.executable, __file__, "--measure", str(data)]
        if lock:
            argv = ["flock", lock, *argv]
        child = subprocess.run(argv, check=True, capture_output=True, text=True)
        out = {k: float(v) for k, v in
               (line.split("=", 1) for line in child.stdout.splitlines() if "=" in line)}
        out["bytes"] = size
        out["rereads"] = rereads
        print(f"{size / 1e9:5.2f} GB: read once {out['read']:.2f} s "
              f"({size / 1e6 / out['read']:.0f} MB/s; warm {out['read warm']:.2f} s); start to "
              f"listening / first fetch: empty log dir {out['empty listening']:.2f} / "
              f"{out['empty fetch']:.2f} s, "
              f"clean {out['clean listening']:.2f} / {out['clean fetch']:.2f} s, kill -9 "
              f"(re-reads {rereads / 1e9:.2f} GB) {out['kill -9 listening']:.2f} / "
              f"{out['kill -9 fetch']:.2f} s, no checkpoint (re-reads all) "
              f"{out['no checkpoint listening']:.2f} / {out['no checkpoint fetch']:.2f} s   "
              f"(load {out['load']:.2f} {out['load5']:.2f} {out['load15']:.2f})", flush=True)
        return out
    finally:
        shutil.rmtree(data, ignore_errors=True)


def _measure_main(data: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from growth_common import broker_argv as _broker_argv
    from growth_common import free_port as _free_port

    port = _free_port()
    empty = tempfile.mkdtemp(prefix="bench-recovery-empty-")
    try:
        proc, listening, first_fetch = timed_start(_broker_argv(port, empty), port)
        _term(proc)
    finally:
        shutil.rmtree(empty, ignore_errors=True)
    out = measure(data, port, _broker_argv(port, str(data)))
    out.update({"empty listening": listening, "empty fetch": first_fetch})
    load = os.getloadavg()
    out.update({"load": load[0], "load5": load[1], "load15": load[2]})
    for key, value in out.items():
        print(f"{key}={value}")


if __name__ == "__main__" and sys.argv[1:2] == ["--measure"]:
    _measure_main(Path(sys.argv[2]))
