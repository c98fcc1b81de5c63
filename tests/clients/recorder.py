"""A recorder in front of the broker's handler table: which client sent which (API, version).

Why: the compatibility table (docs/compatibility.md) claims which client exercised which
versions; the claim is only as good as a measurement, and this is the measurement. It wraps
every entry of ``apis.registry.HANDLERS`` (the pool looks a handler up per request), so an
in-process broker notes ``(client id, API name, version)`` of every request it handles.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from trio_broker.broker.apis import registry

Seen = collections.Counter[tuple[str | None, str, int]]


@contextmanager
def recording() -> Iterator[Seen]:
    """Counts ``(client_id, api_name, version)`` of every request handled inside the block."""
    seen: Seen = collections.Counter()
    with pytest.MonkeyPatch.context() as patch:
        for key, handler in list(registry.HANDLERS.items()):
            async def recorded(ctx, body, _handler=handler):  # type: ignore[no-untyped-def]
                seen[ctx.header.client_id, ctx.header.api_name, ctx.version] += 1
                return await _handler(ctx, body)

            patch.setitem(registry.HANDLERS, key, recorded)
        yield seen


def versions_by_api(seen: Seen, client_id: str) -> dict[str, set[int]]:
    """API name -> versions ``client_id`` sent."""
    out: dict[str, set[int]] = {}
    for (cid, api, version), _ in seen.items():
        if cid == client_id:
            out.setdefault(api, set()).add(version)
    return out
