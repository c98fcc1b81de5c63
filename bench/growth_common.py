"""What the growth and scale benchmarks share: a free loopback port, the broker's command line,
a process's CPU seconds and the raw-Produce load of many connections."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def broker_argv(port: int, data: str) -> list[str]:
    """``trio-broker serve`` on loopback ``port`` with its log in ``data``."""
    return [sys.executable, "-m", "trio_broker", "serve",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={data}", "--override", "log.level=WARNING"]


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


#: one load process: ``clients`` connections, each sending a Produce request and waiting for
#: its answer, measured from ``start_at`` (wall clock) for ``seconds``; prints its request
#: count and every latency in ms
CLIENTS_LOAD = r"""
import json, sys, time, trio
from trio_broker.client.core.produce import produce_request
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.messages import encode_request
from trio_broker.protocol.records import build_batch
host, port, clients, start_at, seconds, topic = (sys.argv[1], int(sys.argv[2]),
    int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), sys.argv[6])
frame = encode_request(ApiKey.Produce, 7, 1, "scale", produce_request(
    7, [(topic, 0, build_batch([(None, bytes(100))]))], acks=1, timeout_ms=30000))
latencies = []
measuring = False
async def client():
    stream = await trio.open_tcp_stream(host, port)
    buf = bytearray()
    while True:
        t0 = time.perf_counter()
        await stream.send_all(frame)
        while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
            data = await stream.receive_some(65536)
            if not data:
                raise RuntimeError("the server closed the connection")
            buf += data
        del buf[:4 + int.from_bytes(buf[:4], "big")]
        if measuring:
            latencies.append((time.perf_counter() - t0) * 1000)
async def main():
    global measuring
    async with trio.open_nursery() as nursery:
        for _ in range(clients):
            nursery.start_soon(client)
        if time.time() > start_at:
            raise RuntimeError("connecting took longer than the start delay")
        await trio.sleep(start_at - time.time())
        measuring = True
        await trio.sleep(seconds)
        measuring = False
        nursery.cancel_scope.cancel()
trio.run(main)
print(json.dumps(latencies))
"""


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1)))]


def clients_load(bootstrap: str, clients: int, seconds: float, processes: int,
                 server_pid: int | None = None) -> tuple[float, float, float | None]:
    """(requests/s, p99 ms, the server's CPU µs per request when its pid is given) of
    ``clients`` connections spread over ``processes`` load processes measuring the same
    ``seconds``, one Produce v7 acks=1 of a 100 B record per request to topic ``clients``."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    start_at = time.time() + 2 + clients / 400
    shares = [clients // processes + (i < clients % processes) for i in range(processes)]
    procs = [subprocess.Popen([sys.executable, "-c", CLIENTS_LOAD, host, port, str(n),
                               repr(start_at), str(seconds), "clients"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for n in shares if n]
    time.sleep(max(0.0, start_at - time.time()))
    cpu_before = cpu_s(server_pid) if server_pid else 0.0
    time.sleep(seconds)
    cpu = cpu_s(server_pid) - cpu_before if server_pid else None
    latencies: list[float] = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        if proc.returncode:
            raise RuntimeError(err[-2000:])
        latencies += json.loads(out)
    latencies.sort()
    rate = len(latencies) / seconds
    per_request = None if cpu is None else cpu / max(1, len(latencies)) * 1e6
    return rate, percentile(latencies, 0.99), per_request
