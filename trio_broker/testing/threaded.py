"""``ThreadedBroker`` and ``ThreadedCluster``: a broker or a test cluster in a background
thread, for synchronous code.

Why a thread with its own Trio loop: synchronous clients (confluent-kafka, kafka-python) and
their tests block, so the broker or the cluster runs beside them. The cluster's controls are the
``Cluster`` methods of the same names, made blocking: each runs in the cluster's thread through
``trio.from_thread``, so any thread may call them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import trio

from ..broker.config import parse_http_listener
from ..broker.lifecycle import Broker, open_broker
from ..broker.storage.cleaner import CleanerStats
from .cluster import BrokerAddress, Cluster, open_cluster
from .fault_state import RequestRecord
from .loop_thread import LoopThread

#: what every test broker and cluster starts with unless a test says otherwise
TEST_DEFAULTS: dict[str, Any] = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "group_initial_rebalance_delay_ms": 0,
    "shutdown_timeout_ms": 1000,
}


class ThreadedBroker(LoopThread):
    """A broker in a background thread with its own Trio loop, for synchronous test code."""

    what = "broker"

    def __init__(self, **settings: Any) -> None:
        super().__init__("trio-broker")
        self.settings = settings
        self.broker: Broker | None = None

    @property
    def bootstrap_servers(self) -> str:
        assert self.broker is not None
        return self.broker.bootstrap_servers

    @property
    def schema_registry_url(self) -> str | None:
        """``http://127.0.0.1:port`` of the broker's Schema Registry, or None when it is off."""
        assert self.broker is not None
        return self.broker.schema_registry_url

    @property
    def rest_proxy_url(self) -> str:
        """``http(s)://host:port`` of the broker's REST proxy (``rest.proxy.listener``;
        docs/rest.md)."""
        assert self.broker is not None
        address = self.broker.rest_proxy_address
        if address is None:
            raise RuntimeError("this broker serves no REST proxy: start it with "
                               "rest_proxy_listener='http://127.0.0.1:0'")
        host, port = address
        scheme = parse_http_listener(self.broker.config.rest_proxy_listener,
                                     "rest.proxy.listener")[0]
        return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"

    def start(self, timeout_s: float = 30) -> ThreadedBroker:
        self._start_thread(timeout_s)
        return self

    async def _extra_settings(self) -> dict[str, Any]:
        """Settings decided in the broker's thread just before it starts (a subclass hook)."""
        return {}

    async def _run_beside(self, broker: Broker) -> None:
        """Runs while the broker is up; the broker stops when this returns (a subclass hook).

        It must call ``self._ready.set()`` once whatever it starts is ready.
        """
        self._ready.set()
        await broker._stop.wait()

    async def _main(self) -> None:
        settings = {**self.settings, **await self._extra_settings()}
        async with open_broker(**settings) as broker:
            self.broker = broker
            await self._run_beside(broker)

    def create_topic(self, name: str, partitions: int = 1,
                     configs: dict[str, str] | None = None) -> str:
        """Create ``name`` directly in the broker's logs (no client needed)."""
        assert self.broker is not None
        logs = self.broker.state.logs
        self.call(logs.create_topic, name, partitions, dict(configs or {}))
        return name

    def compact(self, topic: str) -> CleanerStats:
        """Compact every partition of ``topic`` now and return when done (``Broker.compact``)."""
        assert self.broker is not None
        stats: CleanerStats = trio.from_thread.run(self.broker.compact, topic,
                                                   trio_token=self._token)
        return stats

    def stop(self, timeout_s: float = 30) -> None:
        self._stop_thread(self.broker.stop if self.broker is not None else None, timeout_s)



class ThreadedCluster(LoopThread):
    """``ThreadedCluster(brokers=3, **overrides).start()``; ``stop()`` when done."""

    what = "cluster"

    def __init__(self, brokers: int = 3, *, auto_failover: bool = True, **settings: Any) -> None:
        super().__init__("trio-broker-cluster")
        self.brokers_count = brokers
        self.auto_failover = auto_failover
        self.settings = settings
        self.cluster: Cluster | None = None

    def start(self, timeout_s: float = 30) -> ThreadedCluster:
        self._start_thread(timeout_s)
        return self

    async def _main(self) -> None:
        async with open_cluster(self.brokers_count, auto_failover=self.auto_failover,
                                **self.settings) as cluster:
            self.cluster = cluster
            self._ready.set()
            await cluster._stop.wait()

    def _live(self) -> Cluster:
        if self.cluster is None:
            raise RuntimeError("the cluster is not running")
        return self.cluster

    @property
    def bootstrap_servers(self) -> str:
        return self._live().bootstrap_servers

    @property
    def brokers(self) -> list[BrokerAddress]:
        return self._live().brokers

    @property
    def schema_registry_url(self) -> str | None:
        """``http(s)://host:port`` of the cluster's Schema Registry, or None when it is off."""
        return self._live().schema_registry_url

    def stop_broker(self, node_id: int) -> None:
        trio.from_thread.run(self._live().stop_broker, node_id, trio_token=self._token)

    def start_broker(self, node_id: int) -> None:
        trio.from_thread.run(self._live().start_broker, node_id, trio_token=self._token)

    def move_leader(self, topic: str, partition: int, node_id: int) -> int:
        epoch: int = self.call(self._live().move_leader, topic, partition, node_id)
        return epoch

    def inject(self, api: str | int, errors: Iterable[str | int] = (), *,
               node_id: int | None = None, disconnect: bool = False, count: int = 1) -> None:
        errors = list(errors)
        self.call(lambda: self._live().inject(api, errors, node_id=node_id,
                                              disconnect=disconnect, count=count))

    def set_latency(self, node_id: int, ms: float) -> None:
        self.call(self._live().set_latency, node_id, ms)

    def clear_faults(self) -> None:
        self.call(self._live().clear_faults)

    def requests(self) -> list[RequestRecord]:
        records: list[RequestRecord] = self.call(self._live().requests)
        return records

    def create_topic(self, name: str, partitions: int = 1,
                     configs: dict[str, str] | None = None) -> str:
        """Create ``name`` directly in the cluster's storage (no client needed)."""
        logs = self._live().state.logs
        self.call(logs.create_topic, name, partitions, dict(configs or {}))
        return name

    def stop(self, timeout_s: float = 30) -> None:
        self._stop_thread(self.cluster.stop if self.cluster is not None else None, timeout_s)
