"""``bootstrap.servers``: where a client first connects, parsed once for every face.

Accepted, as Kafka's clients and tools accept them: ``host:port``, ``[v6]:port``, a listener
prefix (``PLAINTEXT://``, ``SSL://``, ``SASL_PLAINTEXT://``, ``SASL_SSL://``) as Kafka's tools
print listeners, a comma list or a sequence of entries, and a bare host (or ``[v6]``) where the
caller has a default port (a console tool's ``--bootstrap-server localhost``). A bad entry is a
one-line ``ConfigError`` (a ``ValueError``) naming it.

A prefix names the security protocol: ``SSL://host:9093`` reaches a TLS listener without a
separate setting, and an explicit ``security.protocol`` that disagrees with it is an error
rather than a silent choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from .errors import ConfigError

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PORT = 9092


class BrokerAddress(NamedTuple):
    host: str
    port: int

    def __str__(self) -> str:
        return format_address(self.host, self.port)


def format_address(host: str, port: int) -> str:
    """``host:port``, with brackets around an IPv6 host."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _entries(servers: str | Sequence[str]) -> list[str]:
    items = servers.split(",") if isinstance(servers, str) else [
        part for item in servers for part in str(item).split(",")]
    return [item.strip() for item in items if item.strip()]


def _split_prefix(item: str) -> tuple[str | None, str]:
    scheme, sep, rest = item.partition("://")
    if not sep:
        return None, item
    protocol = scheme.upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigError(f"bad bootstrap server {item!r}: unknown security protocol "
                          f"{scheme!r} (use {', '.join(SECURITY_PROTOCOLS)})")
    return protocol, rest


def parse_address(item: str, *, default_port: int | None = None) -> BrokerAddress:
    """One ``[PROTOCOL://]host[:port]`` entry; the port may be left out only with a default."""
    item = item.strip()
    _, rest = _split_prefix(item)
    if rest.startswith("["):
        host, bracket, tail = rest[1:].partition("]")
        if not bracket:
            raise ConfigError(f"bad bootstrap server {item!r}: unclosed '['")
        if tail and not tail.startswith(":"):
            raise ConfigError(f"bad bootstrap server {item!r}: expected [HOST]:PORT")
        port_text = tail[1:] if tail else None
    elif rest.count(":") > 1:
        raise ConfigError(f"bad bootstrap server {item!r}: write an IPv6 address in brackets, "
                          "[HOST]:PORT")
    else:
        host, colon, port_text_or_empty = rest.partition(":")
        port_text = port_text_or_empty if colon else None
    if not host or any(c.isspace() for c in host) or "/" in host:
        raise ConfigError(f"bad bootstrap server {item!r}: expected HOST:PORT")
    if port_text is None:
        if default_port is None:
            raise ConfigError(f"bad bootstrap server {item!r}: expected HOST:PORT")
        return BrokerAddress(host, default_port)
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(f"bad bootstrap server {item!r}: port {port_text!r} is not in "
                          "1..65535")
    return BrokerAddress(host, int(port_text))


def parse_bootstrap(servers: str | Sequence[str], *,
                    default_port: int | None = None) -> list[BrokerAddress]:
    """Every entry of ``"h1:9092,[::1]:9093"`` (or a list of entries), in order."""
    entries = _entries(servers)
    if not entries:
        raise ConfigError("bootstrap.servers names no server: give at least one HOST:PORT")
    return [parse_address(item, default_port=default_port) for item in entries]


def prefix_protocol(servers: str | Sequence[str]) -> str | None:
    """The security protocol the entries' ``PROTOCOL://`` prefixes name (None without one)."""
    found = {protocol for item in _entries(servers)
             if (protocol := _split_prefix(item)[0]) is not None}
    if len(found) > 1:
        raise ConfigError(f"bootstrap.servers mixes security protocols {sorted(found)}")
    return found.pop() if found else None


def resolve_security_protocol(configured: str | None, servers: str | Sequence[str]) -> str:
    """``security.protocol`` as set, else as the bootstrap prefixes say, else PLAINTEXT."""
    prefixed = prefix_protocol(servers)
    if configured is None:
        return prefixed or "PLAINTEXT"
    protocol = str(configured).upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigError(f"security.protocol {configured!r} is not one of "
                          f"{', '.join(SECURITY_PROTOCOLS)}")
    if prefixed is not None and prefixed != protocol:
        raise ConfigError(f"security.protocol={protocol} but bootstrap.servers says "
                          f"{prefixed}://")
    return protocol


__all__ = ["DEFAULT_PORT", "SECURITY_PROTOCOLS", "BrokerAddress", "format_address",
           "parse_address", "parse_bootstrap", "prefix_protocol", "resolve_security_protocol"]
