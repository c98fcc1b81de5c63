"""Kafka's stock KRaft ``server.properties`` starts the broker unchanged.

The key lines below are Kafka's own, in Kafka's order: Kafka 3.9's
``config/kraft/server.properties`` (apache/kafka, tag 3.9.0) and Kafka 4.x's
``config/server.properties`` (the 4.0 distribution). Only ``listeners``, ``advertised.listeners``
and ``log.dirs`` are overridden on the command line, as a user would; the broker then serves a
confluent-kafka producer and consumer, and its CONTROLLER listener is never bound.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer

KAFKA_39_KRAFT = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""

KAFKA_4_SERVER = """\
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Serve:
    """``trio-broker serve FILE --override ...`` as a subprocess, with its output kept."""

    def __init__(self, *args: str) -> None:
        self.output: list[str] = []
        self._ready = threading.Event()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "trio_broker", "serve", *args], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            if "trio-broker listening on" in line:
                self._ready.set()
        self._ready.set()

    def wait_ready(self, timeout_s: float = 30) -> None:
        assert self._ready.wait(timeout_s), "".join(self.output)
        assert self.proc.poll() is None, "".join(self.output)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


@pytest.mark.parametrize("stock", [KAFKA_39_KRAFT, KAFKA_4_SERVER], ids=["kafka-3.9", "kafka-4.x"])
def test_stock_server_properties_serve_clients(tmp_path, stock):
    path = tmp_path / "server.properties"
    path.write_text(stock)
    port, controller_port = _free_port(), _free_port()
    serve = _Serve(str(path),
                   "--override", f"listeners=PLAINTEXT://127.0.0.1:{port},"
                                 f"CONTROLLER://127.0.0.1:{controller_port}",
                   "--override", f"advertised.listeners=PLAINTEXT://127.0.0.1:{port},"
                                 f"CONTROLLER://127.0.0.1:{controller_port}",
                   "--override", f"log.dirs={tmp_path / 'data'}")
    try:
        serve.wait_ready()
        out = "".join(serve.output)
        assert f"listening on PLAINTEXT://127.0.0.1:{port}" in out
        assert "CONTROLLER" not in out.split("no effect here")[0]
        ignored = next(line for line in serve.output if "no effect here" in line)
        for key in ("controller.quorum", "inter.broker.listener.name", "socket.send.buffer.bytes",
                    "num.recovery.threads.per.data.dir", "offsets.topic.replication.factor",
                    "transaction.state.log.min.isr"):
            assert key in ignored
        with pytest.raises(ConnectionRefusedError):
            # the controller listener is accepted, never bound: clients never see it
            socket.create_connection(("127.0.0.1", controller_port), 2).close()

        bootstrap = f"127.0.0.1:{port}"
        topic = f"stock-{uuid.uuid4().hex[:8]}"
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        for i in range(20):
            producer.produce(topic, key=b"k", value=f"v{i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < 20 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        consumer.commit(asynchronous=False)
        consumer.close()
        assert values == [f"v{i}".encode() for i in range(20)]
    finally:
        assert serve.stop() == 0, "".join(serve.output)
