"""ApiVersions: what this broker speaks (v0-v4; unknown versions are answered in the handler
pool with the v0 error layout)."""

from __future__ import annotations

from typing import Any

from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.messages import response_type
from .context import HandlerResult, RequestContext
from .registry import advertised_versions, handler

_ApiVersion = response_type(ApiKey.ApiVersions).ApiVersion
_cached: list[Any] | None = None


def _entries() -> list[Any]:
    global _cached
    if _cached is None:
        _cached = [_ApiVersion(api_key=int(k), min_version=v.min, max_version=v.max)
                   for k, v in sorted(advertised_versions().items())]
    return _cached


@handler(ApiKey.ApiVersions)
async def handle_api_versions(ctx: RequestContext, request: Any) -> HandlerResult:
    if ctx.version >= 3:
        # Kafka validates the software name/version (KIP-511); a bad one is INVALID_REQUEST.
        for value in (request.client_software_name, request.client_software_version):
            if value is not None and not _valid_software_field(value):
                return ctx.response(error_code=ErrorCode.INVALID_REQUEST, api_keys=_entries(),
                                    throttle_time_ms=0)
    return ctx.response(error_code=0, api_keys=_entries(), throttle_time_ms=0)


def _valid_software_field(value: str) -> bool:
    return bool(value) and all(c.isalnum() or c in ".-" for c in value) and (
        value[0].isalnum() and value[-1].isalnum())
