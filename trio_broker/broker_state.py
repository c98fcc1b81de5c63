"""The broker's shared state, as the API handlers see it (``ctx.broker``).

Why one object: handlers need the config, the logs, the group coordinator, the purgatories and
the advertised address; gathering them here keeps handler signatures small and lets tests build a
broker state without any sockets.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from .config import BrokerConfig
    from .metrics import BrokerMetrics


@attrs.define(eq=False)
class BrokerState:
    config: BrokerConfig
    metrics: BrokerMetrics
    #: (host, port) that Metadata and FindCoordinator advertise for this broker
    advertised_host: str = "127.0.0.1"
    advertised_port: int = 0
    cluster_id: str = "trio-broker-cluster"
    #: ``trio_broker.log.LogManager`` once storage is loaded
    logs: Any = None
    #: ``trio_broker.coordinator.GroupCoordinator`` once groups are available
    groups: Any = None
    #: allocator of idempotent producer ids
    producer_ids: Any = None
    #: delayed operations (fetch long-poll) keyed by what wakes them
    fetch_purgatory: Any = None
    #: a nursery for background work that outlives one request (parked operations)
    nursery: Any = None
    #: free-form slots other subsystems attach to
    extras: dict[str, Any] = attrs.field(factory=dict)

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @staticmethod
    def now_ms() -> int:
        """Wall-clock milliseconds, for record timestamps and retention."""
        return time.time_ns() // 1_000_000
