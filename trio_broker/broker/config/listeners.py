"""Kafka's listener settings: ``listeners``/``advertised.listeners`` entries, the
``listener.security.protocol.map`` and ``max.connections.per.ip.overrides``, parsed with Kafka's
messages (the network layer binds what these return)."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

import attrs

from .errors import ConfigError


@attrs.frozen
class Listener:
    """One entry of ``listeners``: its name, address and security protocol."""

    name: str
    host: str
    port: int
    security_protocol: str = attrs.field(
        default=attrs.Factory(lambda self: self.name, takes_self=True))
    #: named in controller.listener.names: accepted, never bound or advertised to clients
    controller: bool = False


KNOWN_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def parse_protocol_map(value: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` -> {NAME: PROTOCOL} (Kafka's listener.security.protocol.map)."""
    out: dict[str, str] = {}
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        name, colon, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not colon or not name.strip() or protocol not in KNOWN_PROTOCOLS:
            raise ConfigError(
                f"Invalid value {value} for configuration listener.security.protocol.map: "
                f"expected NAME:PROTOCOL with PROTOCOL one of {', '.join(KNOWN_PROTOCOLS)}, "
                f"got {item!r}", key="listener.security.protocol.map")
        out[name.strip().upper()] = protocol
    return out


def parse_listeners(value: str, key: str, protocol_map: Mapping[str, str] | None = None,
                    controller_names: frozenset[str] = frozenset(), *,
                    required: bool = True) -> list[Listener]:
    """Parse Kafka's ``NAME://host:port,...`` ([::1] for IPv6; an empty host binds all)."""
    out: list[Listener] = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        name, sep, rest = item.partition("://")
        host, colon, port_s = rest.rpartition(":")
        if not sep or not colon or not port_s.isdigit() or int(port_s) > 65535 or not name:
            raise ConfigError(f"Invalid value {value} for configuration {key}: expected "
                              f"NAME://host:port[,...], got {item!r}", key=key)
        name = name.upper()
        protocol = (protocol_map or {}).get(name)
        if protocol is None and name in KNOWN_PROTOCOLS:
            protocol = name
        if protocol is None and name in controller_names:
            protocol = "PLAINTEXT"  # Kafka 4.x: an unmapped controller listener is PLAINTEXT
        if protocol is None:
            raise ConfigError(f"Invalid value {value} for configuration {key}: no security "
                              f"protocol defined for listener {name} (add {name}:PROTOCOL to "
                              "listener.security.protocol.map)", key=key)
        if any(existing.name == name for existing in out):
            raise ConfigError(f"Invalid value {value} for configuration {key}: each listener "
                              f"must have a different name, {name} appears twice", key=key)
        out.append(Listener(name, host.strip("[]"), int(port_s), protocol,
                            name in controller_names))
    if required and not any(not lst.controller for lst in out):
        raise ConfigError(f"Invalid value {value} for configuration {key}: expected at least one "
                          "NAME://host:port that is not a controller listener", key=key)
    return out


def parse_ip_overrides(value: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        host, colon, n = item.rpartition(":")
        if not colon or not host or not n.strip().isdigit():
            raise ConfigError(f"Invalid value {value} for configuration "
                              f"max.connections.per.ip.overrides: expected host:N[,...], got "
                              f"{item!r}", key="max.connections.per.ip.overrides")
        out[host.strip()] = int(n)
    return out


#: the broker's own HTTP endpoints: key -> the schemes it serves
HTTP_LISTENER_SCHEMES = {"http.listener": ("http", "https"), "metrics.listener": ("http",),
                         "control.listener": ("http",),
                         "schema.registry.listener": ("http", "https"),
                         "rest.proxy.listener": ("http", "https")}


def parse_http_listener(value: str, key: str = "http.listener") -> tuple[str, str, int]:
    """``[scheme://][host]:port`` of one of the broker's HTTP endpoints -> (scheme, host, port).

    No host means loopback: these endpoints are off unless set, and reach no further than the
    machine unless a host says so. A bad value is a ConfigError naming ``key``.
    """
    schemes = HTTP_LISTENER_SCHEMES[key]
    expected = " or ".join(f"{scheme}://host:port" for scheme in schemes)
    try:
        url = urlsplit(value if "://" in value else f"http://{value}")
        port = url.port
    except ValueError:  # an unbalanced "[" (urlsplit), a port out of range (.port)
        raise ConfigError(f"{key}={value!r}: expected {expected}", key) from None
    if url.scheme not in schemes or port is None or url.path.strip("/") or url.query:
        raise ConfigError(f"{key}={value!r}: expected {expected}", key)
    return url.scheme, url.hostname or "127.0.0.1", port


def http_url(scheme: str, host: str, port: int) -> str:
    """``scheme://host:port`` of a bound HTTP service (an IPv6 host in brackets)."""
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"
