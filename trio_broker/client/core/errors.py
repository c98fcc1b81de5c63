"""Client exceptions: one class per Kafka error code, generated from ``ErrorCode``; every
client face (the Trio client, the blocking client) raises these.

Why generated: applications catch ``UnknownTopicOrPartitionError`` by name and check
``err.retriable`` the way the Java client's exception hierarchy lets them, and a hand-written list
would drift from the protocol layer's table. Names are the CamelCase of the code's name with an
``Error`` suffix (a trailing ``_EXCEPTION`` is dropped: ``INVALID_TOPIC_EXCEPTION`` ->
``InvalidTopicError``).

A few errors happen only in the client and carry the code Kafka's Java client would report for
them: a broken or mismatched connection is a ``NetworkError`` (retriable), a local deadline is a
``RequestTimedOutError`` (retriable). Every message is one line, fit to show a user as it is.
"""

from __future__ import annotations

from ...protocol.errors import ErrorCode


class KafkaError(Exception):
    """Base of every error a broker can report; ``code`` and ``retriable`` as Kafka sets them."""

    code: ErrorCode | int = ErrorCode.UNKNOWN_SERVER_ERROR
    retriable: bool = False

    def __init__(self, message: str | None = None, *, code: ErrorCode | int | None = None) -> None:
        if code is not None:
            self.code = code
            try:
                self.retriable = ErrorCode(code).retriable
            except ValueError:
                self.retriable = False
        if message is None:
            message = describe_code(self.code)
        super().__init__(message)


def error_name(code: int) -> str:
    """Kafka's name for an error code (``UNKNOWN_TOPIC_OR_PARTITION``), or ``error code N``."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {int(code)}"


def describe_code(code: ErrorCode | int) -> str:
    """``NAME (number)``, for messages that name the code both ways."""
    try:
        return f"{ErrorCode(code).name} ({int(code)})"
    except ValueError:
        return f"error code {int(code)}"


def _class_name(code: ErrorCode) -> str:
    name = code.name.removesuffix("_EXCEPTION")
    return "".join(part.capitalize() for part in name.split("_")) + "Error"


_BY_CODE: dict[int, type[KafkaError]] = {}


def _generate() -> dict[str, type[KafkaError]]:
    made: dict[str, type[KafkaError]] = {}
    for code in ErrorCode:
        if code is ErrorCode.NONE:
            continue
        cls_name = _class_name(code)
        cls = type(cls_name, (KafkaError,), {
            "code": code,
            "retriable": code.retriable,
            "__doc__": f"Kafka error {code.name} ({int(code)}).",
            "__module__": __name__,
        })
        made[cls_name] = cls
        _BY_CODE[int(code)] = cls
    return made


_GENERATED = _generate()
globals().update(_GENERATED)

# The generated classes client code refers to by name (the rest are reached by import).
NetworkError: type[KafkaError] = _GENERATED["NetworkError"]
RequestTimedOutError: type[KafkaError] = _GENERATED["RequestTimedOutError"]
UnsupportedVersionError: type[KafkaError] = _GENERATED["UnsupportedVersionError"]
UnknownTopicOrPartitionError: type[KafkaError] = _GENERATED["UnknownTopicOrPartitionError"]
OffsetOutOfRangeError: type[KafkaError] = _GENERATED["OffsetOutOfRangeError"]
SaslAuthenticationFailedError: type[KafkaError] = _GENERATED["SaslAuthenticationFailedError"]
UnsupportedSaslMechanismError: type[KafkaError] = _GENERATED["UnsupportedSaslMechanismError"]
IllegalSaslStateError: type[KafkaError] = _GENERATED["IllegalSaslStateError"]


class KafkaConnectionError(NetworkError):  # type: ignore[misc,valid-type]
    """The connection to a broker failed or was closed; requests on it may be retried."""


class CorrelationIdMismatchError(KafkaConnectionError):
    """A response arrived out of order: the connection is closed, its requests fail retriably."""


class SslAuthenticationError(KafkaConnectionError):
    """The TLS handshake failed (an untrusted or mismatched certificate, no common protocol):
    as Kafka's ``SslAuthenticationException``, not retriable."""

    retriable = False


class InvalidResponseError(KafkaConnectionError):
    """The broker sent a frame that is too large or does not decode: the connection is unusable.
    """


class KafkaTimeoutError(RequestTimedOutError):  # type: ignore[misc,valid-type]
    """A client-side deadline passed (``max.block.ms``, ``delivery.timeout.ms``, a timeout)."""


class NoOffsetForPartitionError(OffsetOutOfRangeError):  # type: ignore[misc,valid-type]
    """No committed offset and ``auto.offset.reset=none``: the application must ``seek``."""


class BufferExhaustedError(KafkaTimeoutError):
    """``buffer.memory`` is full and the caller chose not to wait."""


class ConfigError(ValueError):
    """An unknown config key or a value Kafka would reject."""


class IllegalStateError(RuntimeError):
    """The call does not fit the client's state (closed, not subscribed, no group id...)."""


def error_for(code: int, message: str | None = None) -> KafkaError:
    """The exception for a broker's error code (``KafkaError`` for codes this table lacks)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return KafkaError(message, code=code)
    return cls(message)


def error_class(code: int) -> type[KafkaError]:
    """The exception class for a known error code."""
    return _BY_CODE[code]


def raise_for_code(code: int, message: str | None = None) -> None:
    """Raise the error for ``code`` unless it is ``NONE``."""
    if code:
        raise error_for(code, message)


__all__ = [
    "BufferExhaustedError",
    "ConfigError",
    "CorrelationIdMismatchError",
    "IllegalStateError",
    "InvalidResponseError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NoOffsetForPartitionError",
    "SslAuthenticationError",
    "describe_code",
    "error_class",
    "error_for",
    "error_name",
    "raise_for_code",
    *sorted(_GENERATED),
]
