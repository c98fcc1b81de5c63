"""The REST proxy's errors: Confluent's ``{"error_code": ..., "message": ...}`` bodies.

Why two kinds of code: Confluent's v3 answers a request it cannot route or read with the HTTP
status as ``error_code`` (404, 400, 415), and an error Kafka reported with a five-digit code
whose first three digits are the status (``KafkaExceptionMapper``): 40403 for an unknown topic or
partition, 40002 for a request Kafka refused (the topic exists, a bad config, too many
partitions), 40301 when the authorizer said no, 50003 for a retriable error and 50002 for any
other. The message is Kafka's own, as the broker wrote it.
"""

from __future__ import annotations

from ...client.core.errors import KafkaError, describe_code
from ...protocol.errors import ErrorCode
from ..http.confluent_error import ConfluentError

__all__ = ["RETRIABLE", "RestError", "bad_request", "from_kafka", "not_found"]

#: Confluent's code for a retriable Kafka error
RETRIABLE = 50003

#: Kafka's errors that mean "this request is wrong": Confluent's 40002
_BAD_REQUEST = frozenset({
    ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.INVALID_TOPIC_EXCEPTION,
    ErrorCode.INVALID_PARTITIONS, ErrorCode.INVALID_REPLICATION_FACTOR,
    ErrorCode.INVALID_REPLICA_ASSIGNMENT, ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_REQUEST,
    ErrorCode.POLICY_VIOLATION, ErrorCode.UNSUPPORTED_VERSION, ErrorCode.SECURITY_DISABLED,
    ErrorCode.INVALID_RECORD, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_TIMESTAMP, ErrorCode.NON_EMPTY_GROUP,
})
_FORBIDDEN = frozenset({
    ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
})


class RestError(ConfluentError):
    """An answer other than success: the HTTP status and Confluent's error body."""


def not_found(message: str = "HTTP 404 Not Found") -> RestError:
    return RestError(404, 404, message)


def bad_request(message: str) -> RestError:
    return RestError(400, 400, message)


def kafka_message(exc: KafkaError) -> str:
    """The broker's own message: what follows the ``NAME (code):`` the client put before it."""
    text = str(exc)
    marker = f"{describe_code(exc.code)}: "
    return text.split(marker, 1)[1] if marker in text else text


def from_kafka(exc: KafkaError) -> RestError:
    code = exc.code
    message = kafka_message(exc)
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return RestError(404, 40403, message)
    if code in (ErrorCode.GROUP_ID_NOT_FOUND,):
        return RestError(404, 404, message)
    if code in _BAD_REQUEST:
        return RestError(400, 40002, message)
    if code in _FORBIDDEN:
        return RestError(403, 40301, message)
    if code == ErrorCode.SASL_AUTHENTICATION_FAILED:
        return RestError(401, 40101, message)
    if exc.retriable:
        return RestError(500, RETRIABLE, message)
    return RestError(500, 50002, message)
