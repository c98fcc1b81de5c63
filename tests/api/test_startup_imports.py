"""What a broker imports to start, checked: the parts only some brokers or some requests need wait
for their first use (docs/benchmarks.md, start-up), and every deferred handler still loads."""

from __future__ import annotations

import inspect
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import confluent_kafka

from tests.broker_process import BrokerProcess, free_port
from trio_broker.broker.apis import registry
from trio_broker.broker.config import BrokerConfig
from trio_broker.broker.storage.meta_properties import ensure_meta_properties

#: imported by the first request, scrape or setting that needs them, not by a start
_APIS = "trio_broker.broker.apis."
_COORDINATOR = "trio_broker.broker.coordinator."
_SECURITY = "trio_broker.broker.security."
#: imported by the first request, scrape or setting that needs them, not by a start
DEFERRED = (*(_APIS + m for m in ("admin", "configs", "describe", "acls", "quotas",
                                  "cluster_admin", "scram", "telemetry", "delete_records",
                                  "consumer_groups", "sasl")),
            "trio_broker.broker.config.describe", "trio_broker.broker.network.metrics_http",
            _SECURITY + "sasl", _SECURITY + "credentials", _SECURITY + "tls", "cryptography",
            "re2", "importlib.metadata", "crc32c", "prometheus_client",
            # a consumer's, a group's and a transaction's handlers: their API's first request
            *(_APIS + m for m in ("fetch", "list_offsets", "offsets", "leader_epochs", "groups",
                                  "init_producer_id", "transactions")),
            # a test cluster's fault wrapper; the KIP-848 engine (the first consumer group)
            "trio_broker.testing.faults", "trio_broker.testing.fault_responses",
            *(_COORDINATOR + m for m in ("consumer_groups", "consumer_rebalance",
                                         "reconciliation", "assignors")),
            # share groups (KIP-932): their coordinator is made at its first use
            _COORDINATOR + "share",
            # codecs (the first batch compressed or decompressed), the parallel log opener
            "cramjam", "concurrent.futures",
            # the javaproperties package (the tests' reference for the broker's own reader) and
            # what its XML half pulls in; importlib.abc (the old-path finder does without)
            "javaproperties", "xml.sax", "urllib.request", "http.client", "email",
            "importlib.abc", "importlib.resources",
            # the web console, the Schema Registry and the REST proxy (their own keys), and the
            # web stack they serve with
            "trio_broker.broker.http", "trio_broker.broker.schema_registry",
            "trio_broker.broker.rest_proxy", "starlette", "hypercorn", "jinja2")

_START = textwrap.dedent("""
    import sys, tempfile
    import trio
    from trio_broker import open_broker

    async def main():
        with tempfile.TemporaryDirectory() as d:
            async with open_broker(log_dirs=d) as broker:
                assert broker.port
    trio.run(main)
    print(" ".join(sorted(m for m in sys.modules if m in set(sys.argv[1:]))))
""")


def test_a_start_imports_none_of_the_deferred_parts() -> None:
    done = subprocess.run([sys.executable, "-c", _START, *DEFERRED], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []


#: ``trio-broker serve`` in a process of its own; the deferred modules it loaded, once stopped
_SERVE = textwrap.dedent("""
    import atexit, sys
    from trio_broker.cli import main

    deferred = set(sys.argv[3:])
    atexit.register(lambda: print("loaded:", *sorted(m for m in sys.modules if m in deferred)))
    sys.exit(main(["serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{sys.argv[1]}",
                   "--override", f"log.dirs={sys.argv[2]}"]))
""")


def test_a_served_broker_process_imports_none_of_the_deferred_parts(tmp_path: Path) -> None:
    """The CLI's path (argument parsing, the config loader, ``serve``) on a stamped log dir (a
    restart: its meta.properties read), to "listening on" and a graceful stop."""
    ensure_meta_properties([tmp_path], BrokerConfig().node_id)
    proc = subprocess.Popen([sys.executable, "-c", _SERVE, str(free_port()), str(tmp_path),
                             *DEFERRED], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert "trio-broker listening on PLAINTEXT://127.0.0.1:" in first, first
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err
    assert out.splitlines()[-1] == "loaded:", out


def test_every_deferred_handler_loads_and_is_its_apis() -> None:
    deferred = {key: h for key, h in registry.HANDLERS.items()
                if isinstance(h, registry.OnFirstUse)}
    assert len(deferred) >= 20
    for key, entry in deferred.items():
        handler = entry.resolve()
        assert inspect.iscoroutinefunction(handler), entry
        assert handler.__module__.startswith("trio_broker.broker.apis."), entry
        assert entry.resolve() is handler
        assert int(entry.key) == key


def test_a_fresh_broker_process_answers_the_first_request_of_each_deferred_api(
        tmp_path: Path) -> None:
    """In a new ``trio-broker serve`` process every request below is its API's first, so each
    loads its handler then: an idempotent lz4 producer (InitProducerId, Produce), a classic
    group consumer (FindCoordinator, JoinGroup, SyncGroup, OffsetFetch, ListOffsets, Fetch,
    Heartbeat, OffsetCommit, LeaveGroup) and a consumer-protocol one (ConsumerGroupHeartbeat:
    the KIP-848 engine is made by its first group)."""
    broker = BrokerProcess(tmp_path, "group.consumer.heartbeat.interval.ms=500",
                           "group.consumer.min.heartbeat.interval.ms=500").start()
    try:
        topic = f"first-use-{uuid.uuid4().hex[:8]}"
        producer = confluent_kafka.Producer({
            "bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True,
            "compression.type": "lz4"})
        for i in range(3):
            producer.produce(topic, value=f"v{i}".encode())
        assert producer.flush(20) == 0
        for protocol in ("classic", "consumer"):
            config = {"bootstrap.servers": broker.bootstrap_servers,
                      "group.id": f"g-{protocol}", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "group.protocol": protocol}
            if protocol == "classic":
                config["session.timeout.ms"] = 6000
            consumer = confluent_kafka.Consumer(config)
            consumer.subscribe([topic])
            values: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(values) < 3 and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    values.append(msg.value())
            assert values == [b"v0", b"v1", b"v2"], protocol
            consumer.commit(asynchronous=False)
            committed = consumer.committed([confluent_kafka.TopicPartition(topic, 0)], 10)
            assert committed[0].offset == 3, protocol
            consumer.close()
    finally:
        assert broker.stop() == 0, broker.log_text()
