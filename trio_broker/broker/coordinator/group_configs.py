"""Per-group configs (Kafka's ``GroupConfig``, the GROUP config resource, type 32): a group's own
share-group and consumer-group settings, set with IncrementalAlterConfigs and read with
DescribeConfigs, kept in one file in the first log dir like the other dynamic configs.

Why bounds from the broker: Kafka checks a group's session timeout, heartbeat interval and
record lock duration against the broker's ``group.share.min.*`` / ``group.share.max.*`` and
``group.consumer.min.*`` / ``group.consumer.max.*`` keys. The share ones are accepted here with
Kafka's defaults, so the defaults are the bounds; the consumer ones are the broker's settings
(``GroupConfigs(bounds=...)``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from ..storage.files import atomic_write

__all__ = ["GROUP_CONFIGS_FILE", "GROUP_CONFIG_KEYS", "GroupConfigError", "GroupConfigs"]

GROUP_CONFIGS_FILE = "group-configs.json"
AUTO_OFFSET_RESETS = ("latest", "earliest")
#: Kafka's ``IsolationLevel`` names, as ``share.isolation.level`` takes them
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


class GroupConfigKey(NamedTuple):
    #: DescribeConfigs v3+ config type: 2 INT, 7 STRING
    config_type: int
    low: int = 0
    high: int = 0
    doc: str = ""
    #: a STRING key's valid values
    values: tuple[str, ...] = ()


GROUP_CONFIG_KEYS: dict[str, GroupConfigKey] = {
    "share.auto.offset.reset": GroupConfigKey(
        7, doc="Where a share group starts reading a partition it has no state for: latest "
               "or earliest.", values=AUTO_OFFSET_RESETS),
    "share.isolation.level": GroupConfigKey(
        7, doc="How the share group reads transactional records: read_committed delivers "
               "only committed ones (up to the last stable offset; aborted ones and control "
               "records are archived, never delivered), read_uncommitted every record.",
        values=ISOLATION_LEVELS),
    "share.record.lock.duration.ms": GroupConfigKey(
        2, 15000, 60000, "The acquisition lock duration of the group's records."),
    "share.session.timeout.ms": GroupConfigKey(
        2, 45000, 60000, "A member that sends no heartbeat for this long leaves the group."),
    "share.heartbeat.interval.ms": GroupConfigKey(
        2, 5000, 15000, "The heartbeat interval given to the group's members."),
    "consumer.session.timeout.ms": GroupConfigKey(
        2, 45000, 60000, "A consumer-protocol member that sends no heartbeat for this long "
                         "leaves the group (within group.consumer.min/max.session.timeout.ms)."),
    "consumer.heartbeat.interval.ms": GroupConfigKey(
        2, 5000, 15000, "The heartbeat interval given to the consumer group's members (within "
                        "group.consumer.min/max.heartbeat.interval.ms)."),
}
#: Bounds = (low, high) by key, where the broker's settings replace Kafka's defaults
Bounds = Mapping[str, tuple[int, int]]


class GroupConfigError(Exception):
    """An invalid group config (Kafka's INVALID_CONFIG)."""


def validate(key: str, value: str | None, bounds: Bounds | None = None) -> None:
    spec = GROUP_CONFIG_KEYS.get(key)
    if spec is None:
        raise GroupConfigError(f"Unknown group config name: {key}")
    if value is None:
        return
    if spec.config_type == 7:
        if value.strip().lower() not in spec.values:
            raise GroupConfigError(f"Invalid value {value} for configuration {key}: String "
                                   f"must be one of: {', '.join(spec.values)}")
        return
    try:
        number = int(value.strip())
    except ValueError:
        raise GroupConfigError(f"Invalid value {value} for configuration {key}: Not a number "
                               f"of type INT") from None
    low, high = (bounds or {}).get(key, (spec.low, spec.high))
    if not low <= number <= high:
        raise GroupConfigError(f"{key} must be greater than or equal to {low} and less "
                               f"than or equal to {high}")


class GroupConfigs:
    def __init__(self, path: Path | None, bounds: Bounds | None = None) -> None:
        self.path = path
        self.bounds = bounds
        self.values: dict[str, dict[str, str]] = {}
        if path is not None and path.exists():
            self.values = json.loads(path.read_bytes())

    def get(self, group_id: str, key: str) -> str | None:
        return self.values.get(group_id, {}).get(key)

    def get_int(self, group_id: str, key: str, default: int) -> int:
        value = self.get(group_id, key)
        return default if value is None else int(value)

    def alter(self, group_id: str, changes: Iterable[tuple[str, str | None]], *,
              validate_only: bool = False) -> None:
        """Set (a value) or delete (None) keys, all checked before any applies."""
        changes = list(changes)
        for key, value in changes:
            validate(key, value, self.bounds)
        if validate_only:
            return
        current = dict(self.values.get(group_id, {}))
        for key, value in changes:
            if value is None:
                current.pop(key, None)
            else:
                current[key] = (value.strip().lower() if GROUP_CONFIG_KEYS[key].values
                                else value.strip())
        if current:
            self.values[group_id] = current
        else:
            self.values.pop(group_id, None)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, json.dumps(self.values, sort_keys=True).encode())
