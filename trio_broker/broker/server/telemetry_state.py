"""Client instances of KIP-714 telemetry as the broker state holds them: what each was told,
when it last asked and pushed, and the metrics it pushed; the API handlers are in
``apis/telemetry.py``, the scrape in ``metrics/collectors/telemetry.py``.

Why kept at all: Kafka throttles a client that asks again before its push interval and checks a
push against what the client was told, so each instance's subscription and last request times
are remembered, bounded like Kafka's client-instance cache (16384 instances).

Why bounded twice more, for the metrics it pushed: each instance keeps at most
``SERIES_MAX_PER_CLIENT`` series (a client with thousands of partitions would otherwise fill
the scrape), and an instance goes away with its series when the client does: one push interval
after its terminating push (a closing client sends one) or after the connection it last spoke
on closed (a client killed; one that only reconnects pushes again within the interval and is
kept), or three push intervals after it was last heard of, Kafka's own expiry.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict

from ...protocol.crc import crc32c

#: Kafka's ClientMetricsConfigs.INTERVAL_MS_DEFAULT: the push interval without a subscription
PUSH_INTERVAL_MS = 5 * 60 * 1000
CACHE_MAX_SIZE = 16384
#: series kept per client instance; later new series are dropped (and counted)
SERIES_MAX_PER_CLIENT = 2000
#: an instance not heard of for this many push intervals is forgotten
EXPIRY_INTERVALS = 3
#: connections whose client software (ApiVersions v3+) is remembered
SOFTWARE_MAX_CONNECTIONS = 16384

#: a series: (Prometheus name, (label, value) pairs)
SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


class ClientInstance:
    """What the broker remembers of one client instance (Kafka's ``ClientMetricsInstance``).

    A plain class (as ``TelemetryState``): every broker imports this module, few hear from a
    client that pushes telemetry, and an attrs class costs its compilation at each start."""

    __slots__ = ("client_id", "connection_id", "disconnected_ms", "dropped_series", "last_error",
                 "last_get_ms", "last_push_ms", "last_seen_ms", "push_interval_ms",
                 "requested_metrics", "series", "software_name", "software_version", "source",
                 "subscription_id", "subscriptions_version", "terminated_ms", "terminating")

    def __init__(self, instance_id: uuid.UUID, last_seen_ms: int, *,
                 requested_metrics: tuple[str, ...] = (), push_interval_ms: int = PUSH_INTERVAL_MS,
                 subscriptions_version: int = 0) -> None:
        self.requested_metrics = requested_metrics
        self.push_interval_ms = push_interval_ms
        self.subscription_id = subscription_id(instance_id, requested_metrics, push_interval_ms)
        #: the subscriptions' version this instance's subscription was made from
        self.subscriptions_version = subscriptions_version
        #: when the broker last heard of it
        self.last_seen_ms = last_seen_ms
        self.last_get_ms = 0
        self.last_push_ms = 0
        self.terminating = False
        self.terminated_ms = 0
        #: the error of the last request (Kafka lets a client ask again at once after some)
        self.last_error = 0
        #: labels: the request header's client id, ApiVersions' software name and version
        self.client_id = ""
        self.software_name = ""
        self.software_version = ""
        #: (address, port) the client last spoke from, and on which connection
        self.source = ("", 0)
        self.connection_id = ""
        #: when that connection closed (0: open)
        self.disconnected_ms = 0
        #: series -> [kind, value]
        self.series: dict[SeriesKey, list[str | float]] = {}
        self.dropped_series = 0

    def expired(self, now_ms: int) -> bool:
        if self.terminating:
            return now_ms - self.terminated_ms >= self.push_interval_ms
        if self.disconnected_ms:
            return now_ms - self.disconnected_ms >= self.push_interval_ms
        return now_ms - self.last_seen_ms > EXPIRY_INTERVALS * self.push_interval_ms

    def __repr__(self) -> str:
        return (f"ClientInstance(subscription_id={self.subscription_id}, "
                f"requested_metrics={self.requested_metrics}, "
                f"push_interval_ms={self.push_interval_ms}, last_seen_ms={self.last_seen_ms}, "
                f"last_get_ms={self.last_get_ms}, last_push_ms={self.last_push_ms}, "
                f"terminating={self.terminating}, series={len(self.series)})")


class TelemetryState:
    """Client instances that asked for a subscription, least recently heard of first."""

    def __init__(self) -> None:
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        #: connection id -> (software name, software version), as ApiVersions v3+ named them
        self.software: OrderedDict[str, tuple[str, str]] = OrderedDict()
        #: connection id -> the instances that spoke on it (one entry per instance and
        #: connection, dropped when the connection closes)
        self.on_connection: dict[str, list[ClientInstance]] = {}

    def heard_on(self, instance: ClientInstance, connection_id: str) -> None:
        """``instance`` spoke on ``connection_id`` (its series live while that stays open)."""
        if instance.connection_id != connection_id:
            instance.connection_id = connection_id
            self.on_connection.setdefault(connection_id, []).append(instance)
        instance.disconnected_ms = 0

    def connection_closed(self, connection_id: str, now_ms: int) -> None:
        """The socket server's word that a connection closed: forget its client software, and
        start the grace of the instances that last spoke on it."""
        self.software.pop(connection_id, None)
        for instance in self.on_connection.pop(connection_id, ()):
            if instance.connection_id == connection_id and not instance.disconnected_ms:
                instance.disconnected_ms = now_ms

    def software_of(self, connection_id: str) -> tuple[str, str]:
        return self.software.get(connection_id, ("", ""))

    def remember_software(self, connection_id: str, name: str, version: str) -> None:
        self.software[connection_id] = (name, version)
        while len(self.software) > SOFTWARE_MAX_CONNECTIONS:
            self.software.popitem(last=False)

    def get(self, instance_id: uuid.UUID, now_ms: int) -> ClientInstance | None:
        """The live record of ``instance_id``, marked as heard of now; None if there is none."""
        found = self.instances.get(instance_id)
        if found is None:
            return None
        if found.expired(now_ms):
            del self.instances[instance_id]
            return None
        found.last_seen_ms = now_ms
        self.instances.move_to_end(instance_id)
        return found

    def put(self, instance_id: uuid.UUID, instance: ClientInstance) -> ClientInstance:
        self.instances[instance_id] = instance
        self.instances.move_to_end(instance_id)
        while len(self.instances) > CACHE_MAX_SIZE:
            self.instances.popitem(last=False)
        return instance

    def expire(self, now_ms: int) -> int:
        """Forget the instances whose client went away (and their series); how many. Run at
        each scrape; a test moves ``now_ms`` on instead of waiting."""
        gone = [k for k, v in self.instances.items() if v.expired(now_ms)]
        for key in gone:
            del self.instances[key]
        return len(gone)


def record(instance: ClientInstance, points: list[tuple[SeriesKey, str, float, bool]]) -> None:
    """Keep pushed values: a delta sum adds to its series, anything else replaces it."""
    series = instance.series
    for key, kind, value, delta in points:
        entry = series.get(key)
        if entry is None:
            if len(series) >= SERIES_MAX_PER_CLIENT:
                instance.dropped_series += 1
                continue
            series[key] = [kind, value]
        elif delta:
            entry[1] = float(entry[1]) + value
        else:
            entry[1] = value


def subscription_id(instance_id: uuid.UUID, metrics: tuple[str, ...], interval_ms: int) -> int:
    """Kafka's subscription id: CRC-32C of the metric names (as Java prints a list) and the push
    interval, xor the instance id's Java hash, as a signed 32-bit int."""
    crc = crc32c(f"[{', '.join(metrics)}]{interval_ms}".encode())
    high, low = instance_id.int >> 64, instance_id.int & (2**64 - 1)
    h = high ^ low
    java_hash = ((h >> 32) ^ h) & 0xFFFFFFFF
    value = crc ^ java_hash
    return value - 2**32 if value >= 2**31 else value
