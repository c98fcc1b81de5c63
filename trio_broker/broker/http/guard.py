"""Who an HTTP endpoint of the broker answers: the Host and Origin checks and the bearer token,
shared by the web console and a test cluster's control endpoint.

Why a Host check on every bind: DNS rebinding lets a web page reach an address it cannot name
(loopback, or a broker on a private network) under a name of its own, and then its requests are
same-origin for the browser, so the ``Origin`` header equals the ``Host`` and proves nothing. The
attacker's name is never an address the server was reached on, so an endpoint answers only a
``Host`` that is a loopback name or address, the host it is bound to, the address the connection
was accepted on, or a name listed in ``http.allowed.hosts``. Any other is 421 Misdirected Request.

Why Origin when present: a browser sends it with every cross-origin write, so a write whose
``Origin`` does not name the ``Host`` comes from another site's page.

Why compare_digest: a token compared byte by byte answers sooner the earlier it differs, which
lets a patient client guess it one byte at a time.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

__all__ = ["HostCheck", "bearer_token_matches", "host_name", "is_loopback", "origin_matches"]

#: addresses that mean "every interface": the Host of a request to them names one of the host's
#: own addresses, which the connection's local address says
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(value: str) -> str:
    """The host of a ``Host`` header (or a ``host:port``), lower-cased, without port, brackets
    or a trailing dot."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


class HostCheck:
    """The Host allow-list of one endpoint bound to ``bound_host``."""

    def __init__(self, bound_host: str, allowed_hosts: Iterable[str] = ()) -> None:
        self.bound_host = host_name(bound_host)
        self.allowed = frozenset(host_name(h) for h in allowed_hosts if h.strip())

    def allows(self, host_header: str | None, local_address: str | None = None) -> bool:
        """Whether a request with ``Host: host_header``, accepted on ``local_address``, is one
        this endpoint answers."""
        if not host_header:
            return False
        host = host_name(host_header)
        if is_loopback(host) or host in self.allowed:
            return True
        if host == self.bound_host and host not in _WILDCARDS:
            return True
        return local_address is not None and host == host_name(local_address)


def origin_matches(origin: str | None, host_header: str | None) -> bool:
    """Whether a request's ``Origin`` (absent is fine: only browsers send it) names its Host."""
    if origin is None:
        return True
    if origin == "null" or not host_header:
        return False
    return urlsplit(origin).netloc.lower() == host_header.strip().lower()


def bearer_token_matches(authorization: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``Bearer <token>``, compared in constant
    time."""
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())
