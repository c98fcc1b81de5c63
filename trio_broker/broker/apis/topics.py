"""Topic lookups shared by the APIs: existence, auto-creation, name validation.

Why here: Metadata, Produce and the admin APIs all need the same answer to "does this topic
exist, and if not, may I create it", with the same error codes.
"""

from __future__ import annotations

import logging

from ...protocol.errors import ErrorCode
from ..coordinator.internal_topics import is_internal
from ..offload import run_io
from ..server.state import BrokerState, TopicChange
from ..storage import StorageError, TopicAlreadyExistsError
from ..storage import validate_topic_name as _validate

LOGGER = logging.getLogger(__name__)


def validate_topic_name(name: str | None) -> str | None:
    """Kafka's rule (``Topic.validate``): an error message, or None if the name is legal."""
    if name is None:
        return "topic name is null"
    return _validate(name)


def partition_count(broker: BrokerState, topic: str) -> int | None:
    return broker.logs.partition_count(topic)


async def ensure_topic(broker: BrokerState, topic: str, *,
                       allow_auto_create: bool) -> tuple[ErrorCode, int]:
    """(error, partition count) for ``topic``, creating it if allowed and configured (in a
    worker thread: the fsyncs of its record take milliseconds)."""
    if validate_topic_name(topic) is not None:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, 0
    count = partition_count(broker, topic)
    if count is not None:
        return ErrorCode.NONE, count
    if not (allow_auto_create and broker.config.auto_create_topics_enable):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0
    if is_internal(topic):  # made as the coordinators make it (Kafka's AutoTopicCreationManager)
        try:
            count = await run_io(broker.internal_topics.ensure, topic)
        except StorageError as exc:
            LOGGER.error("creating internal topic %r failed: %s", topic, exc)
            return ErrorCode(exc.error_code), 0
        return ErrorCode.NONE, count
    n = broker.config.num_partitions
    try:
        await run_io(broker.logs.create_topic, topic, n, {})
    except TopicAlreadyExistsError:  # created meanwhile by another request
        count = partition_count(broker, topic)
        if count is None:  # and deleted since
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0
        return ErrorCode.NONE, count
    except StorageError as exc:
        LOGGER.error("auto-creating topic %r failed: %s", topic, exc)
        return ErrorCode(exc.error_code), 0
    LOGGER.info("auto-created topic %r with %d partition(s)", topic, n)
    broker.topics_changed(TopicChange(topic, 0, n))
    return ErrorCode.NONE, n
