"""Crash-safety driver: produce with an idempotent producer, SIGKILL the broker, restart, verify.

Why this shape: the claim under test is "an acknowledged record is never lost, and never
duplicated for an idempotent producer", under the configured flush policy, whatever instant the
process dies at. One confluent-kafka producer (``enable.idempotence=true``, ``acks=all``) keeps
producing across every kill and restart, so batches in flight at the kill are retried into the
restarted broker and must be deduplicated from the producer state it recovered from disk. Each
cycle also commits consumer-group offsets just before the kill and checks them after the
restart. At the end every acknowledged (partition, offset, key, value) is looked up twice: via a
consumer, and by scanning the segment files batch by batch with CRC checks.

Used by ``tests/hostile/test_crash_safety.py`` (5 cycles) and ``bench/crash_soak.py`` (50).
"""

from __future__ import annotations

import collections
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import attrs

from tests.hostile.harness import BrokerProcess
from trio_broker.protocol.batch import read_batch_header
from trio_broker.protocol.records import decode_batches

TOPIC = "crash-soak"
GROUP = "crash-soak-group"


@attrs.define
class Report:
    cycles: int = 0
    produced: int = 0
    acknowledged: int = 0
    failed_deliveries: int = 0
    #: seconds from launch to "listening", per restart
    restart_s: list[float] = attrs.field(factory=list)
    #: records acknowledged during each cycle, before its kill
    acked_per_cycle: list[int] = attrs.field(factory=list)
    kill_after_s: list[float] = attrs.field(factory=list)
    truncations_logged: int = 0
    group_checks: int = 0
    problems: list[str] = attrs.field(factory=list)

    def summary(self) -> dict[str, Any]:
        rs = sorted(self.restart_s) or [0.0]
        return {
            "cycles": self.cycles, "produced": self.produced,
            "acknowledged": self.acknowledged, "failed_deliveries": self.failed_deliveries,
            "restart_s_median": round(rs[len(rs) // 2], 3), "restart_s_max": round(rs[-1], 3),
            "acked_per_cycle_min": min(self.acked_per_cycle, default=0),
            "truncations_logged": self.truncations_logged,
            "group_offset_checks": self.group_checks,
            "problems": self.problems[:20], "problem_count": len(self.problems),
        }


class _Producer:
    """A producer thread that keeps sending until stopped, recording every acknowledgement."""

    def __init__(self, bootstrap: str, value_bytes: int) -> None:
        import confluent_kafka

        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 2, "message.timeout.ms": 120_000, "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 200, "retry.backoff.ms": 20,
            "topic.metadata.refresh.interval.ms": 1000,
            "error_cb": self._error})
        self.value_bytes = value_bytes
        self.acked: list[tuple[int, int, bytes, bytes]] = []
        self.failed: list[str] = []
        self.fatal: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="crash-producer", daemon=True)

    def _error(self, err: Any) -> None:
        if err.fatal():
            self.fatal.append(str(err))

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed.append(str(err))
            return
        with self._lock:
            self.acked.append((msg.partition(), msg.offset(), msg.key(), msg.value()))

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        pad = b"." * self.value_bytes
        while not self._stop.is_set():
            key = f"k{self.sent:08d}".encode()
            try:
                self.producer.produce(TOPIC, key=key, value=key + pad,
                                      on_delivery=self._delivered)
                self.sent += 1
            except BufferError:
                self.producer.poll(0.05)
                continue
            if self.sent % 50 == 0:
                self.producer.poll(0.002)
        self.producer.poll(0)

    def stop(self, flush_timeout_s: float) -> int:
        self._stop.set()
        self._thread.join()
        return self.producer.flush(flush_timeout_s)


def _commit(bootstrap: str, offsets: dict[int, int]) -> None:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                                         "enable.auto.commit": False})
    try:
        tps = [confluent_kafka.TopicPartition(TOPIC, p, o) for p, o in sorted(offsets.items())]
        consumer.commit(offsets=tps, asynchronous=False)
    finally:
        consumer.close()


def _committed(bootstrap: str, partitions: int) -> dict[int, int]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                                         "enable.auto.commit": False})
    try:
        got = consumer.committed([confluent_kafka.TopicPartition(TOPIC, p)
                                  for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in got if tp.offset >= 0}
    finally:
        consumer.close()


def _read_back(bootstrap: str, partitions: int) -> dict[int, list[tuple[int, bytes, bytes]]]:
    """Every record of the topic via a consumer: partition -> [(offset, key, value)]."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "crash-soak-reader",
        "enable.auto.commit": False, "fetch.wait.max.ms": 10, "fetch.queue.backoff.ms": 1,
        "enable.partition.eof": True})
    out: dict[int, list[tuple[int, bytes, bytes]]] = collections.defaultdict(list)
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, 0)
                         for p in range(partitions)])
        eof: set[int] = set()
        deadline = time.monotonic() + 120
        while len(eof) < partitions and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=0.5):
                if msg.error():
                    if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                        eof.add(msg.partition())
                    continue
                out[msg.partition()].append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def scan_segments(log_dir: Path, partitions: int) -> dict[int, list[tuple[int, bytes, bytes]]]:
    """Every record in the segment files, CRC-checked: partition -> [(offset, key, value)]."""
    out: dict[int, list[tuple[int, bytes, bytes]]] = {}
    for p in range(partitions):
        records: list[tuple[int, bytes, bytes]] = []
        for segment in sorted((log_dir / f"{TOPIC}-{p}").glob("*.log")):
            data = segment.read_bytes()
            end = 0
            # decode_batches verifies each batch's CRC-32C before decoding it
            for header, batch_records in decode_batches(data):
                records.extend((r.offset, r.key or b"", r.value or b"") for r in batch_records)
                end += header.size
            if end != len(data):
                # a torn tail after a *clean* stop would mean recovery did not run
                tail = data[end:]
                raise AssertionError(f"{segment}: {len(tail)} bytes after the last whole batch"
                                     f" ({read_batch_header(tail) if len(tail) >= 61 else '-'})")
        out[p] = records
    return out


def verify(acked: list[tuple[int, int, bytes, bytes]],
           stored: dict[int, list[tuple[int, bytes, bytes]]], source: str) -> list[str]:
    """Every acknowledged record exactly once, at its offset, offsets in order; no duplicate."""
    problems: list[str] = []
    by_offset: dict[tuple[int, int], tuple[bytes, bytes]] = {}
    seen_keys: collections.Counter[bytes] = collections.Counter()
    for p, records in stored.items():
        last = -1
        for offset, key, value in records:
            if offset <= last:
                problems.append(f"{source}: partition {p} offset {offset} after {last}")
            last = offset
            by_offset[(p, offset)] = (key, value)
            seen_keys[key] += 1
    for p, offset, key, value in acked:
        got = by_offset.get((p, offset))
        if got is None:
            problems.append(f"{source}: acknowledged {key!r} at {p}/{offset} is missing")
        elif got != (key, value):
            problems.append(f"{source}: {p}/{offset} holds {got[0]!r}, acknowledged {key!r}")
    dupes = [k for k, n in seen_keys.items() if n > 1]
    if dupes:
        problems.append(f"{source}: {len(dupes)} keys stored more than once, e.g. {dupes[:3]}")
    return problems


def run(work_dir: Path, *, cycles: int, flush_every_message: bool, partitions: int = 3,
        seed: int | None = None, value_bytes: int = 100, min_run_s: float = 0.3,
        max_run_s: float = 1.5, check_groups: bool = True) -> Report:
    """Run ``cycles`` kill/restart cycles; returns what was measured and any problem found."""
    rng = random.Random(seed)
    report = Report()
    overrides: dict[str, Any] = {"num.partitions": partitions, "log.segment.bytes": 256 * 1024,
                                 "group.initial.rebalance.delay.ms": 0}
    if flush_every_message:
        overrides["log.flush.interval.messages"] = 1
    broker = BrokerProcess(work_dir / "data", log_file=work_dir / "broker.log", **overrides)
    groups = check_groups
    report.restart_s.append(broker.start())
    producer = _Producer(broker.bootstrap_servers, value_bytes)
    producer.start()
    committed: dict[int, int] = {}
    try:
        for cycle in range(cycles):
            before = producer.acked_count()
            # Make sure this cycle acknowledges something before the kill.
            deadline = time.monotonic() + 30
            while producer.acked_count() == before and time.monotonic() < deadline:
                time.sleep(0.01)
            if groups:
                with producer._lock:
                    high = collections.Counter()
                    for p, offset, _, _ in producer.acked:
                        high[p] = max(high[p], offset + 1)
                committed = {p: high[p] + cycle for p in range(partitions)}
                _commit(broker.bootstrap_servers, committed)
            run_s = rng.uniform(min_run_s, max_run_s)
            time.sleep(run_s)
            report.kill_after_s.append(run_s)
            broker.kill(signal.SIGKILL)
            report.acked_per_cycle.append(producer.acked_count() - before)
            report.restart_s.append(broker.start())
            report.cycles += 1
            if groups:
                got = _committed(broker.bootstrap_servers, partitions)
                report.group_checks += 1
                if got != committed:
                    report.problems.append(f"cycle {cycle}: committed {committed}, read {got}")
            if producer.fatal:
                report.problems.append(f"cycle {cycle}: producer fatal error {producer.fatal}")
                break
        remaining = producer.stop(flush_timeout_s=120)
        if remaining:
            report.problems.append(f"{remaining} messages still undelivered at the end")
        report.produced = producer.sent
        report.acknowledged = len(producer.acked)
        report.failed_deliveries = len(producer.failed)
        consumed = _read_back(broker.bootstrap_servers, partitions)
        report.problems += verify(producer.acked, consumed, "consumer")
    finally:
        if broker.alive():
            broker.kill(signal.SIGTERM)
    report.problems += verify(producer.acked, scan_segments(work_dir / "data", partitions),
                              "segment files")
    report.truncations_logged = broker.log_text().count("Truncated ")
    if "Traceback" in broker.log_text():
        report.problems.append("the broker log holds a traceback")
    return report
