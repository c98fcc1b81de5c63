"""What failed SASL/PLAIN logins cost a broker: attempts per second, CPU per attempt, and how
late the broker's event loop runs while they arrive.

Run from the checkout: ``PYTHONPATH=. .venv/bin/python bench/bench_plain_failures.py
[--concurrency 50] [--seconds 5]``. Not part of the test suite.

One process: a broker (SASL_PLAINTEXT on loopback, one user stored with Kafka's 4096
iterations, ``connection.failed.authentication.delay.ms=0`` so the delay does not hide the
cost) and, in the same Trio loop, ``--concurrency`` raw connections that each send SaslHandshake
PLAIN and a SaslAuthenticate with a wrong password, then reconnect, for ``--seconds``. A task
asking to wake every millisecond records how late it woke (the loop's stall) and the most
threads taken from Trio's default limiter (which storage work shares). A last phase logs in
with the right password the same way (a client that reconnects). Figures go to
docs/benchmarks.md ("Failed PLAIN logins").
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import trio

from tests.wire import RawClient
from trio_broker import open_broker
from trio_broker.broker.security import add_user
from trio_broker.protocol.api_keys import ApiKey


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def attempt(host: str, port: int, password: str) -> int:
    client = RawClient(await trio.open_tcp_stream(host, port))
    try:
        await client.request(ApiKey.SaslHandshake, 1, mechanism="PLAIN")
        answer = await client.request(ApiKey.SaslAuthenticate, 2,
                                      auth_bytes=f"\0alice\0{password}".encode())
        return int(answer.error_code)
    finally:
        await client.aclose()


async def phase(host: str, port: int, password: str, concurrency: int,
                seconds: float) -> dict[str, float]:
    lateness: list[float] = []
    borrowed = 0
    default = trio.to_thread.current_default_thread_limiter()
    done = 0
    stop_at = trio.current_time() + seconds

    async def ticker() -> None:
        nonlocal borrowed
        while True:
            borrowed = max(borrowed, default.borrowed_tokens)
            asked = trio.current_time() + 0.001
            await trio.sleep_until(asked)
            lateness.append(trio.current_time() - asked)

    async def worker() -> None:
        nonlocal done
        while trio.current_time() < stop_at:
            await attempt(host, port, password)
            done += 1

    cpu0, wall0 = cpu_s(), time.perf_counter()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        async with trio.open_nursery() as workers:
            for _ in range(concurrency):
                workers.start_soon(worker)
        nursery.cancel_scope.cancel()
    wall, cpu = time.perf_counter() - wall0, cpu_s() - cpu0
    lateness.sort()
    return {"attempts": done, "per_s": done / wall, "cpu_ms_per_attempt": 1000 * cpu / done,
            "cpu_cores": cpu / wall,
            "late_p50_ms": 1000 * lateness[len(lateness) // 2],
            "late_p99_ms": 1000 * lateness[int(len(lateness) * 0.99)],
            "late_max_ms": 1000 * lateness[-1], "threads": borrowed}


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as d:
        users = Path(d) / "users.json"
        add_user(users, "alice", "alice-secret")
        async with open_broker(listeners="SASL_PLAINTEXT://127.0.0.1:0", log_dirs=f"{d}/data",
                               sasl_credentials_file=str(users),
                               sasl_enabled_mechanisms="PLAIN",
                               connection_failed_authentication_delay_ms=0) as broker:
            for name, password in (("wrong password", "nope"), ("right password",
                                                                "alice-secret")):
                r = await phase(broker.host, broker.port, password, args.concurrency,
                                args.seconds)
                print(f"{name:15} {r['attempts']:6.0f} attempts  {r['per_s']:7.1f}/s  "
                      f"{r['cpu_ms_per_attempt']:6.2f} ms CPU each  {r['cpu_cores']:4.2f} cores  "
                      f"loop late p50 {r['late_p50_ms']:.2f} ms  p99 {r['late_p99_ms']:.2f} ms  "
                      f"max {r['late_max_ms']:.2f} ms  default-limiter threads max "
                      f"{r['threads']}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=5.0)
    trio.run(main, parser.parse_args())
