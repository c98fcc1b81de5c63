"""Cross-key checks of the consumer-protocol (KIP-848) group timeouts.

Why apart from ``broker.check_config``: the seven bounds are Kafka's ``GroupCoordinatorConfig``
rules, checked in its order with its messages, and read best as a table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

_HB = "group.consumer.heartbeat.interval.ms"
_MIN_HB = "group.consumer.min.heartbeat.interval.ms"
_MAX_HB = "group.consumer.max.heartbeat.interval.ms"
_SESSION = "group.consumer.session.timeout.ms"
_MIN_SESSION = "group.consumer.min.session.timeout.ms"
_MAX_SESSION = "group.consumer.max.session.timeout.ms"
#: the keys the rules read
KEYS = (_HB, _MIN_HB, _MAX_HB, _SESSION, _MIN_SESSION, _MAX_SESSION)

_RULES: tuple[tuple[str, str, str], ...] = (
    (_MAX_HB, ">=", _MIN_HB),
    (_HB, ">=", _MIN_HB),
    (_HB, "<=", _MAX_HB),
    (_MAX_SESSION, ">=", _MIN_SESSION),
    (_SESSION, ">=", _MIN_SESSION),
    (_SESSION, "<=", _MAX_SESSION),
    (_HB, "<", _SESSION),
)
_CHECKS: dict[str, tuple[str, Callable[[int, int], bool]]] = {
    ">=": ("greater than or equal to", lambda a, b: a >= b),
    "<=": ("less than or equal to", lambda a, b: a <= b),
    "<": ("less than", lambda a, b: a < b),
}


def consumer_group_bounds_error(values: Mapping[str, int]) -> tuple[str, str] | None:
    """(key, message) of the first of Kafka's checks that ``values`` (by key) fail, or None."""
    for name, op, other in _RULES:
        words, ok = _CHECKS[op]
        if not ok(values[name], values[other]):
            return name, f"{name} must be {words} {other}"
    return None
