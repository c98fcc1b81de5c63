"""Client metrics (KIP-714) from real clients: a confluent-kafka producer subscribed with a
CLIENT_METRICS resource set by kafka-python's admin client, its metrics on /metrics with
Kafka's client labels, and gone once it closes; telemetry.subscribe.all without any admin
step."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

from .test_metrics import scrape

PRODUCER_PREFIX = "org_apache_kafka_producer_"
DEADLINE_S = 15


def _start(tmp_path: Path, **settings: object) -> ThreadedBroker:
    return ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                             "metrics_listener": "http://127.0.0.1:0", **settings}).start()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[ThreadedBroker]:
    b = _start(tmp_path)
    yield b
    b.stop()


def _client_series(broker: ThreadedBroker, client_id: str) -> dict:
    return {k: v for k, v in scrape(broker).items()
            if k[0].startswith(PRODUCER_PREFIX) and ("client_id", client_id) in k[1]}


def _until_pushed(broker: ThreadedBroker, producer: confluent_kafka.Producer,
                  client_id: str) -> dict:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        producer.poll(0.1)
        found = _client_series(broker, client_id)
        if found:
            return found
    raise AssertionError(f"no metrics of {client_id} on /metrics within {DEADLINE_S} s")


def _wait_terminating(broker: ThreadedBroker) -> None:
    """Wait for the terminating push a closing librdkafka sends."""
    state = broker.broker.state.telemetry
    deadline = time.monotonic() + DEADLINE_S
    while not any(i.terminating for i in list(state.instances.values())):
        assert time.monotonic() < deadline, "no terminating push"
        time.sleep(0.05)


def test_a_subscribed_producer_pushes_its_metrics_and_they_go_with_it(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        resource = ConfigResource(ConfigResourceType.CLIENT_METRICS, "apps", configs={
            "metrics": "org.apache.kafka.producer.", "interval.ms": "1000",
            "match": "client_id=telemetry-.*,client_software_name=confluent-kafka-python"})
        assert admin.alter_configs([resource], incremental=True) == {
            "client_metrics": {"apps": "OK"}}
        assert admin.list_config_resources(["CLIENT_METRICS"]) == {"client_metrics": ["apps"]}
        [described] = admin.describe_configs([ConfigResource(
            ConfigResourceType.CLIENT_METRICS, "apps")])["client_metrics"].values()
        assert {k: (v["value"], v["config_source"]) for k, v in described.items()} == {
            "metrics": ("org.apache.kafka.producer.", "DYNAMIC_CLIENT_METRICS_CONFIG"),
            "interval.ms": ("1000", "DYNAMIC_CLIENT_METRICS_CONFIG"),
            "match": ("client_id=telemetry-.*,client_software_name=confluent-kafka-python",
                      "DYNAMIC_CLIENT_METRICS_CONFIG")}
        refused = admin.alter_configs([ConfigResource(
            ConfigResourceType.CLIENT_METRICS, "apps", configs={"interval.ms": "10"})],
            incremental=True)
        assert "Invalid value 10 for interval.ms" in refused["client_metrics"]["apps"]
    finally:
        admin.close()
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers,
                                         "client.id": "telemetry-app"})
    producer.produce("telemetry-topic", b"v")
    assert producer.flush(10) == 0
    found = _until_pushed(broker, producer, "telemetry-app")
    [(_, labels)] = [k for k in found if k[0] == PRODUCER_PREFIX + "record_queue_time_avg"]
    labels = dict(labels)
    assert labels["client_software_name"] == "confluent-kafka-python"
    assert labels["client_software_version"].startswith(confluent_kafka.version()[0])
    assert len(labels["client_instance_id"]) == 36
    # per broker node: the data point's own attribute
    assert any(dict(k[1]).get("node_id") == "0" for k in found)
    instance = broker.broker.state.telemetry.instances
    del producer  # destroyed: librdkafka sends a terminating push
    _wait_terminating(broker)
    [gone] = [i for i in instance.values() if i.terminating]
    # a broker test hook instead of waiting: the scrape's expiry, one push interval later
    assert broker.call(broker.broker.state.telemetry.expire, gone.terminated_ms + 1000) == 1
    assert _client_series(broker, "telemetry-app") == {}


def test_subscribe_all_needs_no_admin_step(tmp_path):
    broker = _start(tmp_path, telemetry_subscribe_all=True,
                    telemetry_subscribe_all_interval_ms=1000)
    try:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers,
                                             "client.id": "every-metric"})
        producer.produce("any-topic", b"v")
        assert producer.flush(10) == 0
        assert _until_pushed(broker, producer, "every-metric")
        samples = scrape(broker)
        assert samples[("kafka_server_clientmetrics_instance_count", ())] == 1
    finally:
        broker.stop()


def test_series_are_capped_per_client_and_deltas_summed():
    import uuid

    from trio_broker.broker.server.telemetry_state import (
        SERIES_MAX_PER_CLIENT,
        ClientInstance,
        record,
    )

    instance = ClientInstance(uuid.uuid4(), 0)
    record(instance, [((f"m{i}", ()), "gauge", 1.0, False)
                      for i in range(SERIES_MAX_PER_CLIENT + 5)])
    assert (len(instance.series), instance.dropped_series) == (SERIES_MAX_PER_CLIENT, 5)
    record(instance, [(("m0", ()), "counter", 2.0, True), (("m0", ()), "counter", 3.0, True),
                      (("m1", ()), "gauge", 9.0, False)])
    assert instance.series[("m0", ())][1] == 6.0  # 1 + 2 + 3
    assert instance.series[("m1", ())][1] == 9.0  # replaced
    # a client that died without a terminating push: three intervals after it was last seen
    assert not instance.expired(3 * instance.push_interval_ms)
    assert instance.expired(3 * instance.push_interval_ms + 1)
