"""The BROKER_LOGGER config resource: the process's loggers and their levels, over the wire.

Why: ``kafka-configs --entity-type broker-loggers`` and AdminClient tools change a running
broker's log levels (Kafka's ``Log4jController`` / ``RuntimeLoggerManager``). Here the loggers
are Python's; levels are shown and set with log4j's names, which those tools send.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ...protocol.errors import ErrorCode

__all__ = ["ROOT_LOGGER", "VALID_LOG_LEVELS", "LoggerConfigError", "alter", "levels"]

ROOT_LOGGER = "root"
TRACE = 5
#: Kafka's LogLevelConfig.VALID_LOG_LEVELS, sorted as Kafka lists them in its message
VALID_LOG_LEVELS = ("DEBUG", "ERROR", "FATAL", "INFO", "TRACE", "WARN")
_TO_PYTHON = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
              "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


class LoggerConfigError(ValueError):
    """A logger change Kafka refuses; ``error_code`` is INVALID_CONFIG or INVALID_REQUEST."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def _log4j_name(level: int) -> str:
    for name in ("FATAL", "ERROR", "WARN", "INFO", "DEBUG"):
        if level >= _TO_PYTHON[name]:
            return name
    return "TRACE"


def _logger(name: str) -> logging.Logger | None:
    if name == ROOT_LOGGER:
        return logging.getLogger()
    found = logging.Logger.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else None


def levels() -> dict[str, str]:
    """Logger name -> effective level (log4j name), the root logger first."""
    out = {ROOT_LOGGER: _log4j_name(logging.getLogger().getEffectiveLevel())}
    for name in sorted(logging.Logger.manager.loggerDict):
        logger = _logger(name)
        if logger is not None:
            out[name] = _log4j_name(logger.getEffectiveLevel())
    return out


def alter(ops: Iterable[tuple[str, int, str | None]], *, validate_only: bool) -> None:
    """Validate every operation first (Kafka's order), then apply them unless validating."""
    ops = list(ops)
    for name, op, value in ops:
        if op in (APPEND, SUBTRACT):
            verb = "APPEND" if op == APPEND else "SUBTRACT"
            raise LoggerConfigError(ErrorCode.INVALID_REQUEST,
                                    f"{verb} operation is not allowed for the BROKER_LOGGER "
                                    "resource")
        if op not in (SET, DELETE):
            raise LoggerConfigError(ErrorCode.INVALID_REQUEST, f"Unknown operation type {op} is "
                                    "not allowed for the BROKER_LOGGER resource")
        if _logger(name) is None:
            raise LoggerConfigError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")
        if op == SET and value not in VALID_LOG_LEVELS:
            raise LoggerConfigError(ErrorCode.INVALID_CONFIG, (
                f"Cannot set the log level of {name} to {value} as it is not a supported log "
                f"level. Valid log levels are {', '.join(VALID_LOG_LEVELS)}"))
        if op == DELETE and name == ROOT_LOGGER:
            raise LoggerConfigError(ErrorCode.INVALID_REQUEST,
                                    "Removing the log level of the root logger is not allowed")
    if validate_only:
        return
    for name, op, value in ops:
        logger = _logger(name)
        assert logger is not None
        if op == SET:
            logger.setLevel(_TO_PYTHON[str(value)])
            logging.getLogger(__name__).warning("Updated the log level of %s to %s", name, value)
        else:
            logger.setLevel(logging.NOTSET)
            logging.getLogger(__name__).warning("Unset the log level of %s", name)
