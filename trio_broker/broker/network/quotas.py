"""Connection quotas: a broker-wide limit that makes the acceptor wait, and per-address limits.

Why two behaviours (Kafka's ``ConnectionQuotas``): ``max.connections`` protects the broker, so
the acceptor stops accepting (the kernel backlog absorbs the surge) until a slot frees;
``max.connections.per.ip`` protects everyone else from one address, so its excess connections are
closed at once. A slot is returned by ``release`` whatever closed the connection.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections import defaultdict

import trio

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

    def release(self, ip: str) -> None:
        ip = _normalise_ip(ip)
        self.per_ip[ip] -= 1
        if self.per_ip[ip] <= 0:
            del self.per_ip[ip]
        self.total -= 1
        # notify_all needs the lock; a sync release cannot await it, so poke via a task-free
        # path: Condition.notify requires the lock held, hence the helper below.
        _notify_nowait(self._slot_freed)


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
