"""librdkafka's in-process mock cluster: a Kafka protocol implementation that is not ours, with
several brokers listening on loopback (``test.mock.num.brokers``)."""

from __future__ import annotations

import logging

import confluent_kafka

_MOCK_LOGGER = logging.getLogger("librdkafka.mock")


class MockCluster:
    """A running librdkafka mock cluster."""

    def __init__(self, num_brokers: int) -> None:
        self._handle = confluent_kafka.Producer({
            "test.mock.num.brokers": num_brokers,
            "bootstrap.servers": "",
            "logger": _MOCK_LOGGER,
        })
        metadata = self._handle.list_topics(timeout=10)
        self.brokers = {b.id: (b.host, b.port) for b in metadata.brokers.values()}
        self.bootstrap_servers = ",".join(f"{h}:{p}" for h, p in self.brokers.values())

    def close(self) -> None:
        self._handle.flush(5)
        del self._handle
