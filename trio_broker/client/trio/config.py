"""Client configuration under Kafka's own names and defaults.

Why Kafka's names: users move configs between this client, the Java client and librdkafka, so
``linger.ms`` means here what it means there. TLS and SASL keys are the client core's
(``client.core.security``), the same for every face. Keys are accepted dotted
(``{"linger.ms": 5}``) or as Python keywords (``linger_ms=5``); an unknown key is an error naming
it, never silently ignored.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from ..core.errors import ConfigError
from ..core.security import SECURITY_DEFAULTS

_COMMON: dict[str, Any] = {
    "bootstrap.servers": None,
    "client.id": None,
    "request.timeout.ms": 30000,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 1000,
    "retry.backoff.ms": 100,
    "retry.backoff.max.ms": 1000,
    "socket.connection.setup.timeout.ms": 10000,
    "connections.max.idle.ms": 540000,
    "metadata.max.age.ms": 300000,
    "max.in.flight.requests.per.connection": 5,
    **SECURITY_DEFAULTS,
    "client.rack": "",
    "receive.buffer.bytes": 65536,
    "send.buffer.bytes": 131072,
}

PRODUCER_DEFAULTS: dict[str, Any] = {
    **_COMMON,
    "acks": "all",
    "linger.ms": 5,
    "batch.size": 16384,
    "buffer.memory": 33554432,
    "compression.type": "none",
    "enable.idempotence": True,
    "retries": 2147483647,
    "delivery.timeout.ms": 120000,
    "max.block.ms": 60000,
    "max.request.size": 1048576,
    "partitioner.ignore.keys": False,
    "transactional.id": None,
    "transaction.timeout.ms": 60000,
}

CONSUMER_DEFAULTS: dict[str, Any] = {
    **_COMMON,
    "group.id": None,
    "group.instance.id": None,
    "group.protocol": "classic",
    "group.remote.assignor": None,
    "session.timeout.ms": 45000,
    "heartbeat.interval.ms": 3000,
    "max.poll.interval.ms": 300000,
    "max.poll.records": 500,
    "partition.assignment.strategy": ["range", "roundrobin"],
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 5000,
    "auto.offset.reset": "latest",
    "fetch.min.bytes": 1,
    "fetch.max.bytes": 52428800,
    "fetch.max.wait.ms": 500,
    "max.partition.fetch.bytes": 1048576,
    "check.crcs": True,
    "isolation.level": "read_uncommitted",
    "allow.auto.create.topics": True,
    "exclude.internal.topics": True,
    "default.api.timeout.ms": 60000,
}

#: Kafka's ``KafkaShareConsumer`` keys (KIP-932) this client reads
SHARE_CONSUMER_DEFAULTS: dict[str, Any] = {
    **_COMMON,
    "group.id": None,
    "share.acknowledgement.mode": "implicit",
    "max.poll.records": 500,
    "fetch.min.bytes": 1,
    "fetch.max.bytes": 52428800,
    "fetch.max.wait.ms": 500,
}

ADMIN_DEFAULTS: dict[str, Any] = {
    **_COMMON,
    "default.api.timeout.ms": 60000,
}

_CLIENT_IDS = itertools.count(1)


def normalize(kind: str, defaults: Mapping[str, Any], config: Mapping[str, Any] | None,
              overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``config`` (dotted keys) and keyword ``overrides`` over ``defaults``.

    Raises ``ConfigError`` naming the first unknown key.
    """
    merged = dict(defaults)
    for source in (config or {}), overrides:
        for key, value in source.items():
            name = key.replace("_", ".")
            if name not in defaults:
                raise ConfigError(f"unknown {kind} config {key!r}")
            merged[name] = value
    if not merged["bootstrap.servers"]:
        raise ConfigError(f"{kind} config 'bootstrap.servers' is required")
    for name, default in defaults.items():
        value = merged[name]
        if isinstance(default, bool):
            merged[name] = _to_bool(name, value)
        elif isinstance(default, int) and name != "acks":
            merged[name] = _to_int(name, value)
    if merged["client.id"] is None:
        merged["client.id"] = f"trio-broker-{kind}-{next(_CLIENT_IDS)}"
    return merged


def _to_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"config {name!r} must be true or false, got {value!r}")


def _to_int(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"config {name!r} must be an integer, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"config {name!r} must be an integer, got {value!r}") from None
