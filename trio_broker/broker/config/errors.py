"""``ConfigError``: the one error type of configuration, below every config module."""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad configuration key or value; ``str()`` is a one-line message for the user.

    ``key`` names the key at fault when there is one, so the loader can say where it was set.
    """

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key
