"""A broker with several listeners names itself, in every answer that names brokers, by the
endpoint of the listener the request arrived on (Kafka's rule, ``advertised.listeners``
defaulting to ``listeners`` per listener name): a client bootstrapped on the SASL port is never
sent to the PLAINTEXT one, whose SASL handshake it would fail forever."""

from __future__ import annotations

import logging
import ssl
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.security_files import TlsFiles, password
from tests.wire import RawClient
from trio_broker import open_broker
from trio_broker.broker.config import BrokerConfig, ConfigError
from trio_broker.broker.http.settings import console_listener, console_settings
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.testing import ThreadedBroker, open_cluster

TWO = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"


async def connect(host: str, port: int, *, sasl: bool = False,
                  tls: ssl.SSLContext | None = None) -> RawClient:
    """A raw connection, logged in with PLAIN as alice on a SASL listener."""
    stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
    if tls is not None:
        stream = trio.SSLStream(stream, tls, server_hostname=host)
        await stream.do_handshake()
    client = RawClient(stream)
    if sasl:
        handshake = await client.request(ApiKey.SaslHandshake, 1, mechanism="PLAIN")
        assert handshake.error_code == 0
        login = await client.request(ApiKey.SaslAuthenticate, 2,
                                     auth_bytes=f"\0alice\0{password('alice')}".encode())
        assert login.error_code == 0
    return client


async def endpoints_named(client: RawClient) -> list[tuple[str, int]]:
    """The (host, port) of every broker as each answer naming brokers gives them: Metadata on
    its refresh path (no topic) at a non-flexible and a flexible version, Metadata through its
    handler (all topics), FindCoordinator (one key, a batch) and DescribeCluster."""
    seen = []
    for version in (1, 12):
        refresh = await client.request(ApiKey.Metadata, version, topics=[],
                                       allow_auto_topic_creation=True,
                                       include_topic_authorized_operations=False)
        seen += [(b.host, b.port) for b in refresh.brokers]
    every = await client.request(ApiKey.Metadata, 12, topics=None,
                                 allow_auto_topic_creation=False,
                                 include_topic_authorized_operations=False)
    seen += [(b.host, b.port) for b in every.brokers]
    one = await client.request(ApiKey.FindCoordinator, 3, key="g", key_type=0)
    seen.append((one.host, one.port))
    batch = await client.request(ApiKey.FindCoordinator, 4, key_type=0, coordinator_keys=["g"])
    seen += [(c.host, c.port) for c in batch.coordinators]
    cluster = await client.request(ApiKey.DescribeCluster, 1,
                                   include_cluster_authorized_operations=False,
                                   endpoint_type=1)
    seen += [(b.host, b.port) for b in cluster.brokers]
    await client.aclose()
    return seen


def bound(broker: Any) -> dict[str, tuple[str, int]]:
    return {name: (host, port) for name, host, port in broker.listeners}


async def test_each_listener_advertises_its_own_port(tmp_path, users_file, caplog):
    caplog.set_level(logging.INFO, logger="trio_broker.broker")
    async with open_broker(listeners=TWO, log_dirs=str(tmp_path),
                           sasl_credentials_file=str(users_file)) as broker:
        ports = bound(broker)
        for name, (host, port) in ports.items():
            assert (f"listening on {name}://{host}:{port} (advertised {host}:{port})"
                    in caplog.messages)
        plain = await connect(*ports["PLAINTEXT"])
        assert set(await endpoints_named(plain)) == {ports["PLAINTEXT"]}
        sasl = await connect(*ports["SASL_PLAINTEXT"], sasl=True)
        assert set(await endpoints_named(sasl)) == {ports["SASL_PLAINTEXT"]}
        assert broker.bootstrap_servers == "{}:{}".format(*ports["PLAINTEXT"])
        assert broker.advertised_endpoint("sasl_plaintext") == ports["SASL_PLAINTEXT"]


async def test_three_listeners_with_ssl(tmp_path, users_file, tls_files: TlsFiles):
    async with open_broker(
            listeners=f"{TWO},SSL://127.0.0.1:0", log_dirs=str(tmp_path),
            sasl_credentials_file=str(users_file),
            ssl_certfile=str(tls_files.server_pem)) as broker:
        ports = bound(broker)
        tls = ssl.create_default_context()
        tls_files.ca.configure_trust(tls)
        for name, options in (("PLAINTEXT", {}), ("SASL_PLAINTEXT", {"sasl": True}),
                              ("SSL", {"tls": tls})):
            client = await connect(*ports[name], **options)
            assert set(await endpoints_named(client)) == {ports[name]}, name


async def test_named_listeners_answer_their_advertised_entries(tmp_path):
    # INTERNAL has an entry, EXTERNAL one with port 0 (the port bound), REPLICATION none (its
    # bound address, advertised.listeners defaulting to listeners per name)
    async with open_broker(
            listeners="INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0,REPLICATION://127.0.0.1:0",
            advertised_listeners="EXTERNAL://localhost:0,INTERNAL://internal.test:19094",
            listener_security_protocol_map=(
                "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,REPLICATION:PLAINTEXT"),
            log_dirs=str(tmp_path)) as broker:
        ports = bound(broker)
        expected = {"INTERNAL": ("internal.test", 19094),
                    "EXTERNAL": ("localhost", ports["EXTERNAL"][1]),
                    "REPLICATION": ports["REPLICATION"]}
        assert broker.bootstrap_servers == "internal.test:19094"  # the first listener's
        for name, endpoint in expected.items():
            client = await connect(*ports[name])
            assert set(await endpoints_named(client)) == {endpoint}, name


async def test_the_console_connects_to_its_listeners_endpoint(tmp_path, users_file):
    # the console's client speaks the first advertised listener's protocol: it must be sent to
    # that listener's port, not to the first listener's
    async with open_broker(listeners=TWO, advertised_listeners="SASL_PLAINTEXT://127.0.0.1:0",
                           sasl_credentials_file=str(users_file),
                           log_dirs=str(tmp_path)) as broker:
        config = broker.config.evolve(http_listener="http://127.0.0.1:0")
        settings = console_settings(config, broker.state.advertised(console_listener(config)))
        assert settings.security_protocol == "SASL_PLAINTEXT"
        assert settings.bootstrap == "{}:{}".format(*bound(broker)["SASL_PLAINTEXT"])
        assert broker.bootstrap_servers == "{}:{}".format(*bound(broker)["PLAINTEXT"])


def test_an_advertised_listener_of_no_listener_is_refused():
    # Kafka's check: such an entry would never be answered with
    with pytest.raises(ConfigError, match="listener names must be equal to or a subset"):
        BrokerConfig().evolve(listeners="PLAINTEXT://127.0.0.1:9092",
                              advertised_listeners="SASL_PLAINTEXT://example.test:9093")


async def test_a_cluster_node_advertises_each_listener(tmp_path, users_file):
    async with open_cluster(2, listeners=TWO, sasl_credentials_file=str(users_file),
                            log_dirs=str(tmp_path)) as cluster:
        for name in ("PLAINTEXT", "SASL_PLAINTEXT"):
            servers = cluster.bootstrap_servers_for(name)
            nodes = [(host, int(port)) for host, _, port in
                     (s.rpartition(":") for s in servers.split(","))]
            assert len(set(nodes)) == 2
            for endpoint in nodes:
                client = await connect(*endpoint, sasl=name.startswith("SASL"))
                seen = await endpoints_named(client)
                assert set(seen) <= set(nodes), name
                # Metadata and DescribeCluster list both nodes by this listener's ports
                assert set(seen[:2]) == set(nodes), name
        assert cluster.bootstrap_servers == cluster.bootstrap_servers_for("PLAINTEXT")
        # a restarted node binds every listener's port again
        sasl_servers = cluster.bootstrap_servers_for("SASL_PLAINTEXT")
        await cluster.stop_broker(1)
        await cluster.start_broker(1)
        assert cluster.bootstrap_servers_for("SASL_PLAINTEXT") == sasl_servers
        host, _, port = sasl_servers.split(",")[1].rpartition(":")
        client = await connect(host, int(port), sasl=True)
        assert set((await endpoints_named(client))[:2]) == {
            (h, int(p)) for h, _, p in (s.rpartition(":") for s in sasl_servers.split(","))}


def test_confluent_kafka_produces_and_consumes_through_the_sasl_listener(tmp_path: Path,
                                                                         users_file: Path):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    broker = ThreadedBroker(listeners=TWO, log_dirs=str(tmp_path),
                            sasl_credentials_file=str(users_file),
                            group_initial_rebalance_delay_ms=0,
                            shutdown_timeout_ms=1000).start()
    try:
        assert broker.broker is not None
        host, port = bound(broker.broker)["SASL_PLAINTEXT"]
        conf = {"bootstrap.servers": f"{host}:{port}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "alice",
                "sasl.password": password("alice")}
        producer = confluent_kafka.Producer({**conf, "message.timeout.ms": 15000})
        delivered: list[Any] = []
        for i in range(10):
            producer.produce("over-sasl", b"v%d" % i,
                             on_delivery=lambda err, msg: delivered.append(err))
        assert producer.flush(20) == 0
        assert delivered == [None] * 10
        consumer = confluent_kafka.Consumer({**conf, "group.id": "g",
                                             "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe(["over-sasl"])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < 10 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    got.append(msg.value())
        finally:
            consumer.close()
        assert got == [b"v%d" % i for i in range(10)]
    finally:
        broker.stop()
