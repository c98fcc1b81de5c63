"""Cross-key checks of the consumer-protocol (KIP-848) group timeouts.

Why apart from ``broker.check_config``: the seven bounds are Kafka's ``GroupCoordinatorConfig``
rules, checked in its order with its messages, and read as a table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .broker import BrokerConfig


def consumer_group_bounds_error(config: BrokerConfig) -> tuple[str, str] | None:
    """(key, message) of the first of Kafka's ``GroupCoordinatorConfig`` checks of the
    consumer-protocol timeouts that ``config`` fails, or None."""
    c = config
    rules = (
        ("group.consumer.max.heartbeat.interval.ms", c.group_consumer_max_heartbeat_interval_ms,
         ">=", "group.consumer.min.heartbeat.interval.ms",
         c.group_consumer_min_heartbeat_interval_ms),
        ("group.consumer.heartbeat.interval.ms", c.group_consumer_heartbeat_interval_ms, ">=",
         "group.consumer.min.heartbeat.interval.ms", c.group_consumer_min_heartbeat_interval_ms),
        ("group.consumer.heartbeat.interval.ms", c.group_consumer_heartbeat_interval_ms, "<=",
         "group.consumer.max.heartbeat.interval.ms", c.group_consumer_max_heartbeat_interval_ms),
        ("group.consumer.max.session.timeout.ms", c.group_consumer_max_session_timeout_ms, ">=",
         "group.consumer.min.session.timeout.ms", c.group_consumer_min_session_timeout_ms),
        ("group.consumer.session.timeout.ms", c.group_consumer_session_timeout_ms, ">=",
         "group.consumer.min.session.timeout.ms", c.group_consumer_min_session_timeout_ms),
        ("group.consumer.session.timeout.ms", c.group_consumer_session_timeout_ms, "<=",
         "group.consumer.max.session.timeout.ms", c.group_consumer_max_session_timeout_ms),
        ("group.consumer.heartbeat.interval.ms", c.group_consumer_heartbeat_interval_ms, "<",
         "group.consumer.session.timeout.ms", c.group_consumer_session_timeout_ms),
    )
    words = {">=": "greater than or equal to", "<=": "less than or equal to", "<": "less than"}
    for name, value, op, other, bound in rules:
        ok = (value >= bound if op == ">=" else value <= bound if op == "<=" else value < bound)
        if not ok:
            return name, f"{name} must be {words[op]} {other}"
    return None
