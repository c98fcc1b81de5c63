"""The GROUP config resource (type 32) for DescribeConfigs and IncrementalAlterConfigs: a
group's share and consumer-group settings (``coordinator.group_configs``), apart from
``configs.py`` so the broker and topic paths stay as they are."""

from __future__ import annotations

from ...protocol.errors import ErrorCode
from ..config.describe import ConfigSource, Entry
from ..coordinator.group_configs import GROUP_CONFIG_KEYS, GroupConfigError
from ..server.state import BrokerState

SET, DELETE = 0, 1


def describe(broker: BrokerState, group_id: str, keys: set[str] | None) -> list[Entry]:
    shares = broker.shares
    effective = {
        "share.auto.offset.reset": shares.auto_offset_reset(group_id),
        "share.isolation.level": shares.isolation_level(group_id),
        "share.record.lock.duration.ms": str(shares.record_lock_duration_ms(group_id)),
        "share.session.timeout.ms": str(shares.session_timeout_ms(group_id)),
        "share.heartbeat.interval.ms": str(shares.heartbeat_interval_ms(group_id)),
        "consumer.session.timeout.ms": str(broker.groups.consumer.session_timeout_ms(group_id)),
        "consumer.heartbeat.interval.ms": str(
            broker.groups.consumer.heartbeat_interval_ms(group_id)),
    }
    out = []
    for key, spec in GROUP_CONFIG_KEYS.items():
        if keys and key not in keys:
            continue
        source = (ConfigSource.GROUP_CONFIG if shares.group_configs.get(group_id, key) is not None
                  else ConfigSource.DEFAULT_CONFIG)
        out.append(Entry(key, effective[key], source, False, False, (), spec.doc,
                         spec.config_type))
    return out


def alter(broker: BrokerState, group_id: str, ops: list[tuple[str, int, str | None]],
          validate_only: bool) -> tuple[int, str] | None:
    """Kafka's SET / DELETE on a group's configs; APPEND / SUBTRACT do not apply (no list
    keys). The error (code, message) or None."""
    if not group_id:
        return ErrorCode.INVALID_REQUEST, "Group name must not be empty"
    changes: list[tuple[str, str | None]] = []
    for key, op, value in ops:
        if op == SET:
            changes.append((key, value or ""))
        elif op == DELETE:
            changes.append((key, None))
        else:
            return ErrorCode.INVALID_CONFIG, f"Config value append is not allowed for config {key}"
    try:
        broker.shares.group_configs.alter(group_id, changes, validate_only=validate_only)
    except GroupConfigError as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    return None
