"""The log cleaner's throughput, and what cleaning costs the other clients of the broker.

A broker (in this process, as an embedded broker runs) holds a compacted partition of
``--mb`` MB (``--keys`` distinct keys, 1 KB values, batches of 100, written straight to the log).
A confluent-kafka producer sends ``--rate`` records/s (acks=1, linger.ms=0) to another topic
throughout; latency is send to delivery report. A task on the broker's event loop sleeps 1 ms
in a loop and records how late it wakes (the loop's stalls).

Phases: ``idle`` (``--phase`` seconds, no cleaning), then ``cleaning`` (``Broker.compact`` of the
big partition, in the cleaner's worker thread). Reported: cleaner MB/s (bytes read / duration,
both passes), and per phase the produce latency p50/p99/max and the loop's longest stall.

    .venv/bin/python bench/bench_cleaner.py              # 1 GB
    .venv/bin/python bench/bench_cleaner.py --mb 200     # quicker
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import confluent_kafka
import trio

from trio_broker.protocol.batch import validate_batch
from trio_broker.protocol.records import build_batch
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker


def fill(broker: ThreadedBroker, topic: str, mb: int, keys: int) -> int:
    assert broker.broker is not None
    log = broker.broker.state.logs.get_log(topic, 0)
    assert log is not None
    value = b"v" * 1000
    written = 0
    n = 0
    now = int(time.time() * 1000)
    while written < mb * 1024 * 1024:
        items = [(b"key-%07d" % ((n + i) % keys), value) for i in range(100)]
        n += 100
        buf = bytearray(build_batch(items, base_timestamp_ms=now))
        log.append(buf, validate_batch(buf, max_message_bytes=10_000_000), now_ms=now)
        written += len(buf)
    return written


class Stalls:
    def __init__(self) -> None:
        self.worst = 0.0
        self.stop = False

    async def run(self) -> None:
        while not self.stop:
            start = time.perf_counter()
            await trio.sleep(0.001)
            self.worst = max(self.worst, time.perf_counter() - start - 0.001)


def produce_phase(bootstrap: str, rate: int, until: threading.Event | float) -> list[float]:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                                         "acks": 1})
    latencies: list[float] = []

    def report(sent: float) -> object:
        return lambda err, _msg: latencies.append(time.perf_counter() - sent) if not err else None

    start = time.perf_counter()
    i = 0
    while True:
        if isinstance(until, threading.Event):
            if until.is_set():
                break
        elif time.perf_counter() - start > until:
            break
        producer.produce("probe", b"x" * 100, on_delivery=report(time.perf_counter()))
        producer.poll(0)
        i += 1
        time.sleep(max(0.0, start + i / rate - time.perf_counter()))
    producer.flush(30)
    return latencies


def summary(name: str, latencies: list[float], stall: float) -> str:
    ms = sorted(x * 1000 for x in latencies)
    p99 = ms[int(len(ms) * 0.99) - 1] if ms else float("nan")
    return (f"{name:9} n={len(ms):6}  p50={statistics.median(ms):6.2f} ms  p99={p99:6.2f} ms  "
            f"max={ms[-1]:7.2f} ms  loop stall max={stall * 1000:6.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument("--phase", type=float, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(Path(tmp) / "data"),
                                   "log.cleaner.enable": False}).start()
        try:
            broker.create_topic("big", configs={"cleanup.policy": "compact",
                                                "segment.bytes": str(16 * 1024 * 1024)})
            broker.create_topic("probe")
            t0 = time.perf_counter()
            size = fill(broker, "big", args.mb, args.keys)
            print(f"filled {size / 2**20:.0f} MB in {time.perf_counter() - t0:.1f} s")
            stalls = Stalls()
            broker.call(trio.lowlevel.spawn_system_task, stalls.run)
            bootstrap = broker.bootstrap_servers
            produce_phase(bootstrap, args.rate, 2.0)  # warm-up
            stalls.worst = 0.0
            idle = produce_phase(bootstrap, args.rate, args.phase)
            idle_stall = stalls.worst
            stalls.worst = 0.0
            done = threading.Event()
            result: dict[str, object] = {}

            def clean() -> None:
                start = time.perf_counter()
                result["stats"] = broker.compact("big")
                result["secs"] = time.perf_counter() - start
                done.set()

            cleaner = threading.Thread(target=clean)
            cleaner.start()
            busy = produce_phase(bootstrap, args.rate, done)
            cleaner.join()
            stats = result["stats"]
            secs = float(result["secs"])  # type: ignore[arg-type]
            print(f"cleaned {size / 2**20:.0f} MB in {secs:.1f} s: "
                  f"{stats.bytes_read / 2**20 / secs:.1f} MB/s read (both passes), "  # type: ignore[attr-defined]
                  f"{size / 2**20 / secs:.1f} MB/s of partition, "
                  f"{stats.bytes_written / 2**20:.0f} MB written")  # type: ignore[attr-defined]
            print(summary("idle", idle, idle_stall))
            print(summary("cleaning", busy, stalls.worst))
            stalls.stop = True
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
