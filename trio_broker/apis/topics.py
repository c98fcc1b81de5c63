"""Topic lookups shared by the APIs: existence, auto-creation, name validation.

Why here: Metadata, Produce and the admin APIs all need the same answer to "does this topic
exist, and if not, may I create it", with the same error codes.
"""

from __future__ import annotations

import logging
from typing import Any

from ..protocol.errors import ErrorCode

LOGGER = logging.getLogger(__name__)


def validate_topic_name(name: str | None) -> str | None:
    """Kafka's rule (``Topic.validate``): an error message, or None if the name is legal."""
    from ..log import validate_topic_name as _validate

    if name is None:
        return "topic name is null"
    return _validate(name)


def partition_count(broker: Any, topic: str) -> int | None:
    logs = broker.logs
    if logs is None:
        return None
    return logs.topics().get(topic)


def ensure_topic(broker: Any, topic: str, *, allow_auto_create: bool) -> tuple[ErrorCode, int]:
    """(error, partition count) for ``topic``, creating it if allowed and configured."""
    if validate_topic_name(topic) is not None:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, 0
    count = partition_count(broker, topic)
    if count is not None:
        return ErrorCode.NONE, count
    if not (allow_auto_create and broker.config.auto_create_topics_enable) or broker.logs is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0
    n = broker.config.num_partitions
    from ..log import StorageError, TopicAlreadyExistsError

    try:
        broker.logs.create_topic(topic, n, {})
    except TopicAlreadyExistsError:
        return ErrorCode.NONE, broker.logs.topics()[topic]
    except StorageError as exc:
        LOGGER.error("auto-creating topic %r failed: %s", topic, exc)
        return ErrorCode(exc.error_code), 0
    LOGGER.info("auto-created topic %r with %d partition(s)", topic, n)
    on_topics_changed(broker)
    return ErrorCode.NONE, n


def on_topics_changed(broker: Any) -> None:
    """Wake anything that waits for topic changes (none yet; a hook for purgatories)."""
    hook = broker.extras.get("on_topics_changed")
    if hook is not None:
        hook()
