"""Consumers of three real client libraries, each in its own thread, sharing one record book.

Each worker polls, records what it consumed, then commits synchronously (commit after
processing), so a record is either committed by the worker that processed it or redelivered to
the partition's next owner: at least once, none skipped.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

SESSION_MS = 6000
HEARTBEAT_MS = 1000


class RecordBook:
    """What every worker consumed: (worker, partition, offset, value), thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entries: list[tuple[str, int, int, bytes]] = []
        self.values: set[bytes] = set()

    def add(self, worker: str, partition: int, offset: int, value: bytes) -> None:
        with self._lock:
            self.entries.append((worker, partition, offset, value))
            self.values.add(value)

    def count(self) -> int:
        with self._lock:
            return len(self.values)


class Worker(threading.Thread):
    """One consumer in a thread; ``stop()`` closes it (LeaveGroup) and joins the thread."""

    kind = "?"

    def __init__(self, name: str, bootstrap: str, group: str, topic: str,
                 book: RecordBook) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.book = book
        self.stopping = threading.Event()
        self.assignment: frozenset[int] = frozenset()
        self.commit_failures = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.consume()
        except BaseException as exc:  # reported by the test through .error
            self.error = exc

    def consume(self) -> None:
        raise NotImplementedError

    def stop(self, timeout_s: float = 30) -> None:
        self.stopping.set()
        self.join(timeout_s)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise AssertionError(f"{self.name} failed") from self.error


class ConfluentWorker(Worker):
    kind = "confluent-kafka"

    def consume(self) -> None:
        import confluent_kafka

        c = confluent_kafka.Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group,
            "client.id": self.name, "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "fetch.queue.backoff.ms": 1,
            "fetch.wait.max.ms": 100})
        c.subscribe([self.topic])
        try:
            while not self.stopping.is_set():
                msgs = c.consume(num_messages=1000, timeout=0.1)
                self.assignment = frozenset(p.partition for p in c.assignment())
                good = [m for m in msgs if m.error() is None]
                for m in good:
                    self.book.add(self.name, m.partition(), m.offset(), m.value())
                if good:
                    try:
                        c.commit(asynchronous=False)
                    except confluent_kafka.KafkaException:
                        self.commit_failures += 1  # rebalanced away: the next owner re-reads
        finally:
            c.close()


class KafkaPythonWorker(Worker):
    kind = "kafka-python"

    def consume(self) -> None:
        import kafka
        from kafka.errors import CommitFailedError, KafkaError

        c = kafka.KafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.name,
            session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
            enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=100)
        c.subscribe([self.topic])
        try:
            while not self.stopping.is_set():
                batches = c.poll(timeout_ms=100, max_records=2000)
                self.assignment = frozenset(p.partition for p in c.assignment())
                for records in batches.values():
                    for r in records:
                        self.book.add(self.name, r.partition, r.offset, r.value)
                if batches:
                    try:
                        c.commit()
                    except (CommitFailedError, KafkaError):
                        self.commit_failures += 1
        finally:
            c.close()


class AiokafkaWorker(Worker):
    kind = "aiokafka"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.ready = threading.Event()
        self.thawed = threading.Event()

    def consume(self) -> None:
        asyncio.run(self._consume())

    async def _consume(self) -> None:
        import aiokafka
        from aiokafka.errors import CommitFailedError, KafkaError

        self.loop = asyncio.get_running_loop()
        self.ready.set()
        c = aiokafka.AIOKafkaConsumer(
            self.topic, bootstrap_servers=self.bootstrap, group_id=self.group,
            client_id=self.name, session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS, enable_auto_commit=False,
            auto_offset_reset="earliest", fetch_max_wait_ms=100)
        await c.start()
        try:
            while not self.stopping.is_set():
                batches = await c.getmany(timeout_ms=100, max_records=2000)
                self.assignment = frozenset(p.partition for p in c.assignment())
                for records in batches.values():
                    for r in records:
                        self.book.add(self.name, r.partition, r.offset, r.value)
                if batches:
                    try:
                        await c.commit()
                    except (CommitFailedError, KafkaError):
                        self.commit_failures += 1
        finally:
            await c.stop()

    def freeze(self, seconds: float) -> None:
        """Block this consumer's event loop: no heartbeats, as if the process hung, for
        ``seconds`` or until it is stopped."""
        assert self.ready.wait(10)
        assert self.loop is not None
        self.loop.call_soon_threadsafe(self.thawed.wait, seconds)

    def stop(self, timeout_s: float = 30) -> None:
        self.stopping.set()
        self.thawed.set()  # a hung member being stopped has been shown hanging long enough
        super().stop(timeout_s)


WORKERS: dict[str, Callable[..., Worker]] = {
    "confluent": ConfluentWorker, "kafka-python": KafkaPythonWorker, "aiokafka": AiokafkaWorker}


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str,
             interval_s: float = 0.05) -> float:
    """Poll ``predicate`` until true; returns the seconds it took (fails after ``timeout_s``)."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout_s:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)
    return time.monotonic() - start
