"""librdkafka's in-process mock cluster: a Kafka protocol implementation that is not ours, with
several brokers listening on loopback (``test.mock.num.brokers``)."""

from __future__ import annotations

import logging

import confluent_kafka

from trio_broker.client.blocking import BlockingClient

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

    def spread_topic(self, prefix: str) -> str:
        """A new topic (auto-created, 4 partitions) whose leaders are on more than one broker.

        The mock picks each partition's leader at random, so a 4-partition topic has all of
        them on one of 3 brokers about one time in 27; up to 10 names are tried.
        """
        with BlockingClient(self.bootstrap_servers, timeout_s=10) as client:
            for n in range(10):
                name = f"{prefix}-{n}"
                info = client.topic(name, allow_auto_create=True)
                if len({p.leader for p in info.partitions.values()}) > 1:
                    return name
        raise AssertionError("the mock put every partition of 10 topics on one broker")

    def close(self) -> None:
        self._handle.flush(5)
        del self._handle
