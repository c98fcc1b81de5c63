"""Blocking file work off the event loop: in a worker thread, or inline under a test clock.

Why inline under ``trio.testing.MockClock``: an autojumping clock jumps to the next deadline
whenever every task is blocked, and a task waiting for a worker thread is blocked, so while the
disk works the clock would leap ahead and fire timeouts that real time never reaches (a
connection's idle timeout in the middle of a request, a session timeout during an fsync). Inline,
the loop is busy while the work runs, and virtual time stands still, as it should.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

import trio

T = TypeVar("T")


def mock_clock() -> trio.abc.Clock | None:
    """The running ``MockClock``, or None (Trio's real clock, or outside Trio)."""
    testing = sys.modules.get("trio.testing")  # no MockClock exists unless it was imported
    if testing is None:
        return None
    try:
        clock = trio.lowlevel.current_clock()
    except RuntimeError:
        return None
    return clock if isinstance(clock, testing.MockClock) else None


async def run_io(fn: Callable[..., T], *args: object) -> T:
    """``await trio.to_thread.run_sync(fn, *args)``, or ``fn(*args)`` under a ``MockClock``."""
    if mock_clock() is not None:
        await trio.lowlevel.checkpoint()
        return fn(*args)
    return await trio.to_thread.run_sync(fn, *args)
