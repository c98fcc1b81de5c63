"""Dispatch table from API key to handler.

Why a registry: the set of registered handlers *is* what the broker implements, so ApiVersions
advertises exactly the keys found here (intersected with ``SUPPORTED_VERSIONS``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..protocol.api_keys import SUPPORTED_VERSIONS, ApiKey, VersionRange
from .context import HandlerResult, RequestContext

Handler = Callable[[RequestContext, Any], Awaitable[HandlerResult]]

HANDLERS: dict[int, Handler] = {}


def handler(api_key: ApiKey) -> Callable[[Handler], Handler]:
    """Register ``fn`` as the handler of ``api_key``."""

    def register(fn: Handler) -> Handler:
        if api_key not in SUPPORTED_VERSIONS:
            raise ValueError(f"{api_key.name} has no entry in SUPPORTED_VERSIONS")
        HANDLERS[int(api_key)] = fn
        return fn

    return register


def advertised_versions() -> dict[ApiKey, VersionRange]:
    """What ApiVersions advertises: supported versions of every API that has a handler."""
    _load_all()
    return {k: v for k, v in SUPPORTED_VERSIONS.items() if int(k) in HANDLERS}


def _load_all() -> None:
    # Importing the handler modules registers them.
    from . import load_handlers

    load_handlers()
