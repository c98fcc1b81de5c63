"""Produce test records with real clients and remember exactly what each got back."""

from __future__ import annotations

import functools
import random
import time
from dataclasses import dataclass, field

import confluent_kafka
from kafka import KafkaProducer


@dataclass(frozen=True)
class Sent:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int


@dataclass
class Produced:
    """Delivered records by (partition, offset)."""

    records: dict[tuple[int, int], Sent] = field(default_factory=dict)

    def rows(self, topic: str) -> list[dict]:
        return sorted(({"topic": topic, "partition": p, "offset": o, "key": s.key,
                        "value": s.value, "headers": list(s.headers),
                        "timestamp_ms": s.timestamp_ms}
                       for (p, o), s in self.records.items()),
                      key=lambda r: (r["partition"], r["offset"]))


def _record(rng: random.Random, i: int) -> tuple[bytes | None, bytes | None, list]:
    key = None if i % 10 == 3 else b"key-%d" % i
    value = rng.randbytes(rng.choice((0, 12, 50, 100, 400))) if i % 7 else b"v" * 100
    headers = [] if i % 3 else [("trace", b"%d" % i), ("empty", None)][: 1 + i % 2]
    return key, value, headers


def produce_confluent(bootstrap: str, topic: str, count: int, *, partitions: int,
                      compression: str, seed: int, produced: Produced,
                      timeout_s: float = 60) -> None:
    """librdkafka: snappy as a raw block, gzip, lz4, zstd or none."""
    rng = random.Random(seed)
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "compression.type": compression, "linger.ms": 5,
        "batch.num.messages": 2000, "enable.idempotence": False})
    failures: list[str] = []

    def delivered(headers: list, err: object, msg: confluent_kafka.Message) -> None:
        if err is not None:
            failures.append(str(err))
            return
        _, ts = msg.timestamp()
        # Delivery reports do not carry the headers back: keep the ones that were sent.
        produced.records[msg.partition(), msg.offset()] = Sent(
            msg.key(), msg.value(), tuple(headers), ts)

    for i in range(count):
        key, value, headers = _record(rng, seed * 1_000_000 + i)
        while True:
            try:
                producer.produce(topic, value=value, key=key, headers=headers or None,
                                 partition=i % partitions,
                                 on_delivery=functools.partial(delivered, headers))
                break
            except BufferError:
                producer.poll(0.05)
    remaining = producer.flush(timeout_s)
    assert remaining == 0
    assert not failures, failures[:3]


def produce_kafka_python(bootstrap: str, topic: str, count: int, *, partitions: int, seed: int,
                         produced: Produced, timeout_s: float = 60) -> None:
    """kafka-python: snappy in the xerial framing the Java client writes."""
    rng = random.Random(seed)
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type="snappy",
                             linger_ms=5, enable_idempotence=False)
    try:
        sends = []
        for i in range(count):
            key, value, headers = _record(rng, seed * 1_000_000 + i)
            headers = [(k, b"" if v is None else v) for k, v in headers]  # no null values here
            sends.append(((key, value, headers), producer.send(
                topic, value=value, key=key, headers=headers, partition=i % partitions)))
        producer.flush(timeout_s)
        deadline = time.monotonic() + timeout_s
        for (key, value, headers), future in sends:
            meta = future.get(timeout=max(0.1, deadline - time.monotonic()))
            produced.records[meta.partition, meta.offset] = Sent(
                key, value, tuple(headers), meta.timestamp)
    finally:
        producer.close()
