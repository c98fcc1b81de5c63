"""``ThreadedCluster``: a test cluster in a background thread, for synchronous code.

Why a thread with its own Trio loop: synchronous clients (confluent-kafka, kafka-python) and
their tests block, so the cluster runs beside them, as ``ThreadedBroker`` runs one broker. Its
controls are the ``Cluster`` methods of the same names, made blocking: each runs in the
cluster's thread through ``trio.from_thread``, so any thread may call them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import trio

from ..apis.fault_state import RequestRecord
from ..loop_thread import LoopThread
from .runtime import BrokerAddress, Cluster, open_cluster


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
