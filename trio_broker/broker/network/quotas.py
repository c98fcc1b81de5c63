"""Connection quotas: broker-wide limits that make the acceptor wait, and per-address limits.

Why two behaviours (Kafka's ``ConnectionQuotas``): ``max.connections`` and the connection creation
rates (``max.connection.creation.rate``, broker-wide and per listener, KIP-612) protect the broker,
so the acceptor stops accepting (the kernel backlog absorbs the surge) until a slot frees or the
throttle time passes, and no connection is refused; ``max.connections.per.ip`` and an address's
``connection_creation_rate`` quota protect everyone else from one address, so an address's excess
connections are closed: at once over its count, after the throttle time over its rate (Kafka's
``ConnectionThrottledException``, so a client that reconnects at once is slowed down too). A slot
is returned by ``release`` whatever closed the connection.

The rates are measured by the client quotas' ``TokenBucket`` over ``quota.window.num`` windows of
``quota.window.size.seconds``, as Kafka measures them with its client quotas' sensors; a throttled
address's connection is taken back from its bucket, as Kafka unrecords it.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections import defaultdict
from collections.abc import Callable, Mapping

import trio

from ..config import BrokerConfig
from ..security.client_quotas import TokenBucket

LOGGER = logging.getLogger(__name__)


class ConnectionQuotas:
    def __init__(self, max_connections: int, max_per_ip: int,
                 overrides: dict[str, int]) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = _resolve_overrides(overrides)
        self.total = 0
        self.per_ip: defaultdict[str, int] = defaultdict(int)
        self._slot_freed = trio.Condition()
        #: seconds of quota a bucket holds when full (quota.window.num x the window)
        self.burst_s = 11.0
        #: listener name (None: the broker) -> (its creation rate, the bucket measuring it)
        self._rates: dict[str | None, tuple[float, TokenBucket]] = {}
        self._rate_bounds: dict[str | None, float] = {}
        #: the connection_creation_rate quota of an address (None: no quota)
        self.ip_rate: Callable[[str], float | None] = lambda ip: None
        #: address -> (bound, bucket, last use in ms)
        self._ip_buckets: dict[str, tuple[float, TokenBucket, float]] = {}

    def reconfigure(self, config: BrokerConfig) -> None:
        """Apply ``max.connections`` and the creation rates of ``config`` (at start, and at
        once when AlterConfigs changes them)."""
        self.max_connections = config.max_connections
        _notify_nowait(self._slot_freed)
        broker_rate, listener_rates = connection_rates(config)
        self.configure_rates(broker_rate, listener_rates, burst_s=(
            config.quota_window_num * config.quota_window_size_seconds))

    def configure_rates(self, broker_rate: float, listener_rates: Mapping[str, float], *,
                        burst_s: float | None = None) -> None:
        """Set the creation rates (a change starts the measurement afresh, as Kafka's
        ``updateBrokerMaxConnectionRate``); 2147483647, Kafka's default, is no limit, and so is
        0, which would otherwise stop the acceptor for good."""
        if burst_s is not None:
            self.burst_s = burst_s
        bounds: dict[str | None, float] = {None: broker_rate}
        bounds.update(listener_rates)
        self._rate_bounds = {k: v for k, v in bounds.items() if 0 < v < _NO_LIMIT}
        self._rates = {k: v for k, v in self._rates.items()
                       if self._rate_bounds.get(k) == v[0]}

    def _bucket(self, key: str | None, now_ms: float) -> TokenBucket | None:
        bound = self._rate_bounds.get(key)
        if bound is None:
            return None
        found = self._rates.get(key)
        if found is None or found[0] != bound:
            found = self._rates[key] = (bound, TokenBucket(bound, self.burst_s, now_ms))
        return found[1]

    def record_connection(self, listener: str) -> float:
        """Record a new connection on the listener's and the broker's rate; the seconds the
        acceptor waits before accepting the next (Kafka's
        ``recordConnectionAndGetThrottleTimeMs``)."""
        now_ms = trio.current_time() * 1000
        throttle_ms = 0
        for key in (listener, None):
            bucket = self._bucket(key, now_ms)
            if bucket is not None:
                throttle_ms = max(throttle_ms, bucket.record(1, now_ms))
        return throttle_ms / 1000

    def limit_for(self, ip: str) -> int:
        return self.overrides.get(_normalise_ip(ip), self.max_per_ip)

    async def wait_for_slot(self) -> None:
        """Block the acceptor while the broker is at ``max.connections``."""
        async with self._slot_freed:
            while self.total >= self.max_connections:
                await self._slot_freed.wait()

    def try_acquire(self, ip: str) -> bool:
        """Count a new connection from ``ip``; False if its per-address limit is reached."""
        ip = _normalise_ip(ip)
        if self.per_ip[ip] >= self.limit_for(ip):
            return False
        self.per_ip[ip] += 1
        self.total += 1
        return True

    def ip_throttle_s(self, ip: str) -> float:
        """Record a connection on ``ip``'s ``connection_creation_rate``; the seconds after
        which to close it if it is over the quota (then it is not counted), else 0."""
        ip = _normalise_ip(ip)
        bound = self.ip_rate(ip)
        if bound is None:
            self._ip_buckets.pop(ip, None)
            return 0.0
        now_ms = trio.current_time() * 1000
        found = self._ip_buckets.get(ip)
        if found is None or found[0] != bound:
            if len(self._ip_buckets) >= _PRUNE_AT:
                self._prune_ip_buckets(now_ms)
            found = (bound, TokenBucket(bound, self.burst_s, now_ms), now_ms)
        bucket = found[1]
        self._ip_buckets[ip] = (bound, bucket, now_ms)
        throttle_ms = bucket.record(1, now_ms)
        if throttle_ms > 0:
            bucket.record(-1, now_ms)
        return throttle_ms / 1000

    def _prune_ip_buckets(self, now_ms: float) -> None:
        # A bucket unused for burst_s has refilled: dropping it changes nothing, and many
        # addresses (an IPv6 range) cannot grow the map without bound.
        idle_ms = self.burst_s * 1000
        self._ip_buckets = {ip: entry for ip, entry in self._ip_buckets.items()
                            if now_ms - entry[2] < idle_ms}

    def release(self, ip: str) -> None:
        ip = _normalise_ip(ip)
        self.per_ip[ip] -= 1
        if self.per_ip[ip] <= 0:
            del self.per_ip[ip]
        self.total -= 1
        # notify_all needs the lock; a sync release cannot await it, so poke via a task-free
        # path: Condition.notify requires the lock held, hence the helper below.
        _notify_nowait(self._slot_freed)


_NO_LIMIT = 2**31 - 1
_PRUNE_AT = 4096


def _notify_nowait(cond: trio.Condition) -> None:
    lock = cond._lock  # trio.Lock; acquiring without waiting is fine when nobody holds it
    if lock.locked():
        # The acceptor holds it only while not waiting; it re-checks the count after waking.
        return
    lock.acquire_nowait()
    try:
        cond.notify_all()
    finally:
        lock.release()


def _normalise_ip(ip: str) -> str:
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return ip
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return str(addr.ipv4_mapped)
    return str(addr)


def _resolve_overrides(overrides: dict[str, int]) -> dict[str, int]:
    """Kafka accepts host names in the overrides; resolve them once, at startup."""
    out: dict[str, int] = {}
    for host, n in overrides.items():
        try:
            ipaddress.ip_address(host)
            out[_normalise_ip(host)] = n
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None)
        except OSError:
            LOGGER.warning("max.connections.per.ip.overrides: cannot resolve %r; ignored", host)
            continue
        for info in infos:
            out[_normalise_ip(str(info[4][0]))] = n
    return out


def connection_rates(config: BrokerConfig) -> tuple[float, dict[str, float]]:
    """``max.connection.creation.rate`` and its per-listener values (listener name -> rate)."""
    rates: dict[str, float] = {}
    for listener in config.listener_list:
        prefixed = f"listener.name.{listener.name.lower()}.max.connection.creation.rate"
        if prefixed in config.originals:
            rates[listener.name] = float(config.originals[prefixed])
    return config.max_connection_creation_rate, rates
