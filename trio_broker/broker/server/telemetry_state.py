"""Client instances that asked for a telemetry subscription (KIP-714), as the broker state holds
them; the API handlers are in ``telemetry.py``.

Why kept at all: Kafka throttles a client that asks again before its push interval and checks a
push against what the client was told, so each instance's last request times and subscription id
are remembered, bounded like Kafka's client-instance cache (16384 instances); one not heard of
for three push intervals is forgotten.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict

from ...protocol.crc import crc32c

#: Kafka's ClientMetricsConfigs.DEFAULT_INTERVAL_MS: how often a client asks again
PUSH_INTERVAL_MS = 5 * 60 * 1000
CACHE_MAX_SIZE = 16384


class ClientInstance:
    """What the broker remembers of one client instance (Kafka's ``ClientMetricsInstance``).

    A plain class (as ``TelemetryState``): every broker imports this module, few hear from a
    client that pushes telemetry, and an attrs class costs its compilation at each start."""

    __slots__ = ("last_get_ms", "last_push_ms", "last_seen_ms", "subscription_id", "terminating")

    def __init__(self, subscription_id: int, last_seen_ms: int) -> None:
        self.subscription_id = subscription_id
        #: when the broker last heard of it (it is forgotten three push intervals later)
        self.last_seen_ms = last_seen_ms
        self.last_get_ms = 0
        self.last_push_ms = 0
        self.terminating = False

    def __repr__(self) -> str:
        return (f"ClientInstance(subscription_id={self.subscription_id}, "
                f"last_seen_ms={self.last_seen_ms}, last_get_ms={self.last_get_ms}, "
                f"last_push_ms={self.last_push_ms}, terminating={self.terminating})")


class TelemetryState:
    """Client instances that asked for a subscription, oldest first."""

    def __init__(self) -> None:
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()

    def instance(self, client_id: uuid.UUID, now_ms: int) -> ClientInstance:
        """The instance's record, made (or made again, once expired) as needed."""
        found = self.instances.get(client_id)
        if found is None or now_ms - found.last_seen_ms > 3 * PUSH_INTERVAL_MS:
            found = ClientInstance(subscription_id(client_id), now_ms)
            self.instances[client_id] = found
            while len(self.instances) > CACHE_MAX_SIZE:
                self.instances.popitem(last=False)
        found.last_seen_ms = now_ms
        self.instances.move_to_end(client_id)
        return found


def subscription_id(client_id: uuid.UUID) -> int:
    """Kafka's id of the (empty) subscription: CRC-32C of the metric names and push interval,
    xor the instance id's Java hash, as a signed 32-bit int."""
    crc = crc32c(f"[]{PUSH_INTERVAL_MS}".encode())
    high, low = client_id.int >> 64, client_id.int & (2**64 - 1)
    h = high ^ low
    java_hash = ((h >> 32) ^ h) & 0xFFFFFFFF
    value = crc ^ java_hash
    return value - 2**32 if value >= 2**31 else value
