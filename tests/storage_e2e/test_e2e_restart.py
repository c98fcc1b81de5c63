"""Restarts: a clean stop keeps everything; a kill -9 mid-produce plus a torn tail loses no
acknowledged batch and is cut back to the last whole batch, with one log line saying so."""

from __future__ import annotations

import contextlib
import os
import random
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from trio_broker.client.blocking import (
    EARLIEST,
    LATEST,
    BlockingClient,
    KafkaConnectionError,
    TopicPartition,
)
from trio_broker.protocol.records import build_batch, decode_batches
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

PARTITIONS = 3


def _consume_all(bootstrap: str, topic: str, expected: int) -> list[tuple]:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
        "fetch.queue.backoff.ms": 1})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(PARTITIONS)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < expected and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=10_000, timeout=0.5):
            assert m.error() is None, m.error()
            got.append((m.partition(), m.offset(), m.key(), m.value(), m.headers(),
                        m.timestamp()[1]))
    consumer.close()
    return sorted(got)


def test_clean_restart_keeps_offsets_data_and_configs(tmp_path):
    settings = {**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data")}
    topic = "durable"
    broker = ThreadedBroker(**settings).start()
    try:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={
            "segment.bytes": "4096", "retention.ms": "86400000"})])[topic].result(10)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 2,
                                             "batch.num.messages": 50})
        for i in range(3000):
            producer.produce(topic, key=b"k%d" % i, value=b"value-%d" % i, partition=i % 3,
                             headers=[("n", b"%d" % i)], timestamp=1_700_000_000_000 + i)
        assert producer.flush(20) == 0
        before = _consume_all(bootstrap, topic, 3000)
        assert len(before) == 3000
        segments = broker.call(lambda: broker.broker.state.logs.get_log(topic, 0).num_segments)
        assert segments > 1  # the small segment.bytes rolled segments
    finally:
        broker.stop()
    assert (tmp_path / "data" / ".clean_shutdown").exists()

    broker = ThreadedBroker(**settings).start()
    try:
        bootstrap = broker.bootstrap_servers
        assert _consume_all(bootstrap, topic, 3000) == before
        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "x"})
        for p in range(PARTITIONS):
            assert consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(topic, p), timeout=5) == (0, 1000)
        consumer.close()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        configs = admin.describe_configs([resource])[resource].result(10)
        assert configs["segment.bytes"].value == "4096"
        assert configs["retention.ms"].value == "86400000"
        assert configs["retention.ms"].source == confluent_kafka.admin.ConfigSource.\
            DYNAMIC_TOPIC_CONFIG.value
        # appends continue at the old end
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
        offsets = []
        producer.produce(topic, value=b"after", partition=1,
                         on_delivery=lambda err, m: offsets.append((err, m.offset())))
        assert producer.flush(10) == 0
        assert offsets == [(None, 1000)]
    finally:
        broker.stop()


# --- kill -9 ---------------------------------------------------------------------------------

@contextlib.contextmanager
def _serve(data: Path, port: int, log_path: Path, *overrides: str) -> Iterator[subprocess.Popen]:
    argv = [sys.executable, "-m", "trio_broker", "serve",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={data}"]
    for item in overrides:
        argv += ["--override", item]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        line = b""
        # a selector, not select(): late in a long test session the pipe's fd may be >= 1024
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while b"listening on" not in line:
                left = deadline - time.monotonic()
                assert left > 0, "broker did not start in time"
                if selector.select(left):
                    line = proc.stdout.readline()
                    assert line or proc.poll() is None, f"broker exited: {log_path.read_text()}"
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stdout.close()


def _batch(n: int) -> bytes:
    return build_batch([(b"b%d" % n, b"batch %d record %d" % (n, r)) for r in range(10)],
                       base_timestamp_ms=1_700_000_000_000 + n)


def test_kill_9_mid_produce_then_torn_tail(tmp_path, free_port):
    data = tmp_path / "data"
    log_path = tmp_path / "broker.log"
    bootstrap = f"127.0.0.1:{free_port}"
    acked: list[tuple[int, int]] = []  # (base offset, batch number), acknowledged by acks=all
    enough = threading.Event()
    stopped: list[BaseException] = []

    tp = TopicPartition("crash", 0)

    def produce_until_killed(client: BlockingClient) -> None:
        client.topic("crash")
        try:
            for n in range(1_000_000):
                code, base, _ = client.produce({tp: _batch(n)}, acks=-1)[tp]
                assert code == 0
                acked.append((base, n))
                if n == 100:
                    enough.set()
        except KafkaConnectionError as exc:
            stopped.append(exc)
        finally:
            enough.set()

    with _serve(data, free_port, log_path, "log.flush.interval.messages=1") as proc:
        with BlockingClient(bootstrap, timeout_s=10) as client:
            client.create_topic("crash", 1, 1, {"segment.bytes": "20000"})
            producer = threading.Thread(target=produce_until_killed, args=(client,))
            producer.start()
            assert enough.wait(60)
            os.kill(proc.pid, signal.SIGKILL)  # mid-produce: the producer is still sending
            producer.join(30)
        proc.wait(10)
    assert stopped, "the producer should have lost its broker"
    assert len(acked) > 100
    assert not (data / ".clean_shutdown").exists()

    partition_dir = data / "crash-0"
    active = sorted(partition_dir.glob("*.log"))[-1]
    assert len(list(partition_dir.glob("*.log"))) > 1  # several segments, the tail one torn
    size_before = active.stat().st_size
    torn = _batch(10**6)
    garbage = torn[: len(torn) // 2] + random.Random(179).randbytes(100)  # torn write, junk
    with open(active, "ab") as f:
        f.write(garbage)

    with _serve(data, free_port, log_path), BlockingClient(bootstrap, timeout_s=10) as client:
        client.topic("crash")
        start = client.list_offsets({tp: EARLIEST})[tp]
        end = client.list_offsets({tp: LATEST})[tp]
        records = {}
        position = start
        while position < end:
            part = client.fetch_many({tp: position}, max_wait_ms=0)[0]
            assert part.error == 0
            for header, batch in decode_batches(part.records):
                for r in batch:
                    records[r.offset] = r.value
                position = header.next_offset
    log_text = log_path.read_text()
    assert active.stat().st_size == size_before  # cut back to the last whole batch
    truncations = [line for line in log_text.splitlines() if "Truncated" in line]
    assert len(truncations) == 1, log_text
    assert str(active) in truncations[0]
    assert f"Truncated {len(garbage)} bytes" in truncations[0]
    assert start == 0
    assert end >= acked[-1][0] + 10
    assert sorted(records) == list(range(end))  # contiguous, nothing torn is visible
    for base, n in acked:
        assert [records[base + r] for r in range(10)] == [
            b"batch %d record %d" % (n, r) for r in range(10)]
