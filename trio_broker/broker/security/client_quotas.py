"""Client quotas: Kafka's entities, their durable store, rate sensors and throttle times.

Why Kafka's model: a quota is set on a user, a client id, both, or their defaults
(AlterClientQuotas); the quota that applies to a request is the first of Kafka's eight levels
that sets it (``DefaultQuotaCallback``: user+client, user+default client, user, default
user+client, default user+default client, default user, client, default client), and clients
matched at one level share one sensor. A sensor is Kafka's ``TokenBucket`` (KIP-599, the
controller mutation quota's) rather than ``ClientQuotaManager``'s sampled ``Rate``: both let
the first burst through (``quota.window.num`` windows of ``quota.window.size.seconds`` worth of
quota), but the sampled rate lets a client that can burst do so again each time the burst's
sample expires (every 11 s), while the bucket then holds the rate at the quota. A recording
that overdraws the bucket costs the time its refill takes, sent as ``throttle_time_ms``.
Plain synchronous code: the network layer mutes a
connection for the throttle time it gets from here.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterable
from pathlib import Path

#: the file of quotas in the first log directory
QUOTA_FILE = "client-quotas.json"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
#: quota keys Kafka accepts per entity kind -> whether the value must be a whole number
CLIENT_KEYS = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True, REQUEST_PERCENTAGE: False,
               "controller_mutation_rate": False}
CONNECTION_CREATION_RATE = "connection_creation_rate"
IP_KEYS = {CONNECTION_CREATION_RATE: True}
USER, CLIENT_ID, IP = "user", "client-id", "ip"

#: an entity: (entity type, name or None for the type's default), sorted by type
Entity = tuple[tuple[str, str | None], ...]


class QuotaError(ValueError):
    """An AlterClientQuotas entry Kafka refuses (INVALID_REQUEST)."""


def validate(entity: Entity, ops: Iterable[tuple[str, float, bool]]) -> None:
    types = [t for t, _ in entity]
    if not types or len(set(types)) != len(types):
        raise QuotaError("Invalid empty or duplicated entity types")
    unknown = set(types) - {USER, CLIENT_ID, IP}
    if unknown:
        raise QuotaError(f"Unknown entity type {sorted(unknown)[0]}")
    if IP in types and len(types) > 1:
        raise QuotaError("Invalid quota entity combination: ip with user or client-id")
    keys = IP_KEYS if IP in types else CLIENT_KEYS
    for key, value, remove in ops:
        if key not in keys:
            raise QuotaError(f"Invalid configuration key {key}")
        if remove:
            continue
        if not math.isfinite(value) or value <= 0:
            raise QuotaError(f"Invalid value {value} for configuration {key}: must be positive")
        if keys[key] and value != int(value):
            raise QuotaError(f"Invalid value {value} for configuration {key}: must be a whole "
                             "number")


class TokenBucket:
    """Kafka's ``TokenBucket`` (KIP-599): credit refills at the quota's rate up to a burst.

    It starts full (``burst`` = quota x ``quota.window.num`` x the window), so the first burst
    goes through, as Kafka's quotas let it; a recording that takes the credit below zero costs
    the time the refill needs to bring it back to zero."""

    __slots__ = ("_burst", "_last_ms", "_rate", "_tokens")

    def __init__(self, rate: float, burst_s: float, now_ms: float) -> None:
        self._rate = rate
        self._burst = rate * burst_s
        self._tokens = self._burst
        self._last_ms = now_ms

    def record(self, value: float, now_ms: float) -> int:
        """Take ``value`` (negative: give back); the throttle time in ms."""
        elapsed = max(now_ms - self._last_ms, 0.0)
        self._last_ms = now_ms
        self._tokens = min(self._burst, self._tokens + self._rate * elapsed / 1000) - value
        if self._tokens >= 0:
            return 0
        return math.ceil(-self._tokens / self._rate * 1000)


class ClientQuotas:
    """The quotas set with AlterClientQuotas (kept in ``path``) and the sensors they govern."""

    def __init__(self, path: Path, *, samples: int = 11, window_s: int = 1) -> None:
        self.path = path
        self.samples = samples
        self.window_ms = window_s * 1000
        self._quotas: dict[Entity, dict[str, float]] = self._read()
        #: (quota key, user tag, client tag) -> sensor
        self._sensors: dict[tuple[str, str, str], TokenBucket] = {}
        #: changes run in worker threads, one at a time
        self._write_lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether any quota is set (else no request is measured: Kafka's ``quotasEnabled``)."""
        return bool(self._quotas)

    def _read(self) -> dict[Entity, dict[str, float]]:
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise QuotaError(f"the quota file {self.path} cannot be read: {exc}") from None
        return {entity_of(e["entity"].items()): dict(e["values"]) for e in doc["quotas"]}

    def entries(self) -> dict[Entity, dict[str, float]]:
        return {e: dict(v) for e, v in self._quotas.items()}

    def alter(self, changes: Iterable[tuple[Entity, list[tuple[str, float, bool]]]]) -> None:
        """Apply validated changes in one durable write (a removed last key drops the entity)."""
        with self._write_lock:
            self._alter(changes)

    def _alter(self, changes: Iterable[tuple[Entity, list[tuple[str, float, bool]]]]) -> None:
        quotas = self.entries()
        for entity, ops in changes:
            values = quotas.setdefault(entity, {})
            for key, value, remove in ops:
                if remove:
                    values.pop(key, None)
                else:
                    values[key] = value
            if not values:
                del quotas[entity]
        if quotas == self._quotas:
            return
        from .credentials import _write_atomically  # its imports wait for the first write

        _write_atomically(self.path, {"version": 1, "quotas": [
            {"entity": dict(entity), "values": values}
            for entity, values in sorted(quotas.items(), key=lambda kv: repr(kv[0]))]})
        self._quotas = quotas
        self._sensors = {}  # a bound or a level changed: sensors start afresh

    def quota(self, key: str, user: str | None, client_id: str) -> tuple[float, str, str] | None:
        """(bound, user tag, client tag) of Kafka's first level that sets ``key``, or None.

        ``user`` is the principal's name (None for an anonymous client: Kafka's sanitized user
        is then ANONYMOUS, which only default user quotas match)."""
        name = user if user is not None else "ANONYMOUS"
        for entity, tags in (
                (((CLIENT_ID, client_id), (USER, name)), (name, client_id)),
                (((CLIENT_ID, None), (USER, name)), (name, client_id)),
                (((USER, name),), (name, "")),
                (((CLIENT_ID, client_id), (USER, None)), (name, client_id)),
                (((CLIENT_ID, None), (USER, None)), (name, client_id)),
                (((USER, None),), (name, "")),
                (((CLIENT_ID, client_id),), ("", client_id)),
                (((CLIENT_ID, None),), ("", client_id))):
            values = self._quotas.get(entity)
            if values is not None and key in values:
                return values[key], tags[0], tags[1]
        return None

    def ip_quota(self, key: str, ip: str) -> float | None:
        """``key``'s bound for the address ``ip``: its own entity's, else the default IP
        entity's, else None (Kafka's ``connectionRateForIp``)."""
        for entity in (((IP, ip),), ((IP, None),)):
            values = self._quotas.get(entity)
            if values is not None and key in values:
                return values[key]
        return None

    def record(self, key: str, user: str | None, client_id: str, value: float,
               now_ms: float) -> int:
        """Record ``value`` on the sensor of the applicable quota; the throttle time in ms (0
        within the quota)."""
        found = self.quota(key, user, client_id)
        if found is None:
            return 0
        bound, user_tag, client_tag = found
        sensor = self._sensors.get((key, user_tag, client_tag))
        if sensor is None:
            sensor = self._sensors[(key, user_tag, client_tag)] = TokenBucket(
                bound, self.samples * self.window_ms / 1000, now_ms)
        return sensor.record(value, now_ms)

    def unrecord(self, key: str, user: str | None, client_id: str, value: float,
                 now_ms: float) -> None:
        """Take back a recorded value (a throttled fetch answers no data: Kafka's
        ``unrecordQuotaSensor``)."""
        found = self.quota(key, user, client_id)
        if found is not None:
            sensor = self._sensors.get((key, found[1], found[2]))
            if sensor is not None:
                sensor.record(-value, now_ms)


def entity_of(components: Iterable[tuple[str, str | None]]) -> Entity:
    """The entity of (type, name) pairs in its one order (a name may be None: the default)."""
    return tuple(sorted(components, key=lambda c: (c[0], c[1] is not None, c[1] or "")))
