"""The clients page in a real headless Chromium: a confluent-kafka producer's pushed metrics
(KIP-714) listed with its client id, software and instance id."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from playwright.sync_api import Page, expect

from trio_broker.testing import ThreadedBroker

from .conftest import console_broker, console_url, shoot


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedBroker]:
    """A console whose broker subscribes every client to all its metrics."""
    started = console_broker(Path(tmp_path_factory.mktemp("clients")),
                             telemetry_subscribe_all=True,
                             telemetry_subscribe_all_interval_ms=500)
    try:
        yield started
    finally:
        started.stop()


def test_the_clients_page_lists_a_producer_and_its_metrics(page: Page,
                                                           broker: ThreadedBroker) -> None:
    url = console_url(broker)
    page.goto(url + "/clients")
    expect(page.locator("#clients tbody")).to_contain_text("No client asked")
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers,
                                         "client.id": "page-producer"})
    producer.produce("page-topic", b"v")
    assert producer.flush(10) == 0
    state = broker.broker.state.telemetry
    deadline = time.monotonic() + 15
    while not any(i.series for i in list(state.instances.values())):
        assert time.monotonic() < deadline, "the producer pushed nothing"
        producer.poll(0.1)
    page.goto(url + "/clients")
    row = page.locator("#clients tbody tr", has_text="page-producer")
    expect(row).to_contain_text("confluent-kafka-python")
    expect(row).to_contain_text("every metric")
    [instance_id] = [str(k) for k, i in state.instances.items() if i.client_id == "page-producer"]
    expect(row).to_contain_text(instance_id)
    metrics = page.locator(f"table.client-metrics[data-instance='{instance_id}']")
    expect(metrics).to_contain_text("org_apache_kafka_producer_record_queue_time_avg")
    expect(page.locator("nav a.here")).to_have_text("Clients")
    shoot(page, "clients")
    del producer
