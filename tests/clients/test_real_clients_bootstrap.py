"""Clients nobody here wrote bootstrap against ``trio-broker serve`` running as a process."""

from __future__ import annotations

import asyncio
import signal

import pytest

from tests.broker_process import BrokerProcess


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("served"), "num.partitions=2").start()
    yield broker
    assert broker.stop() == 0


def test_confluent_admin_lists_broker_at_advertised_address(served):
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": served.bootstrap_servers}).list_topics(timeout=5)
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {
        0: ("127.0.0.1", served.port)}
    assert md.controller_id == 0


def test_kafka_python_admin_reads_metadata(served):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=served.bootstrap_servers,
                             request_timeout_ms=5000)
    try:
        cluster = admin.describe_cluster()
        assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [
            (0, "127.0.0.1", served.port)]
        assert "boot-kp" not in admin.list_topics()
    finally:
        admin.close()


def test_aiokafka_client_bootstraps_and_reads_metadata(served):
    from aiokafka import AIOKafkaClient

    async def main():
        client = AIOKafkaClient(bootstrap_servers=served.bootstrap_servers)
        await client.bootstrap()
        try:
            brokers = client.cluster.brokers()
            assert [(b.nodeId, b.host, b.port) for b in brokers] == [
                (0, "127.0.0.1", served.port)]
            await client._metadata_update(client.cluster, ["boot-aio"])
            assert client.cluster.partitions_for_topic("boot-aio") == {0, 1}
        finally:
            await client.close()

    asyncio.run(main())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_stops_cleanly_on_signals(tmp_path, sig):
    broker = BrokerProcess(tmp_path).start()
    assert broker.stop(sig) == 0
    text = broker.log_text()
    assert "shutdown complete" in text
    assert "Traceback" not in text
