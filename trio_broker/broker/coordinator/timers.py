"""Keyed deadlines on Trio's clock, fired by one task.

Why one task and a heap: a group coordinator has a deadline per member (session), per pending
member, per group (join phase, sync phase) and a periodic retention check, and reschedules the
member deadlines on every heartbeat. One sleeping task plus a heap with lazy deletion makes a
reschedule O(log n) and costs no task per member. Deadlines come from ``trio.current_time()``, so
tests run on ``trio.testing.MockClock(autojump_threshold=0)`` and finish instantly.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Hashable

import trio


class DeadlineQueue:
    """``schedule(key, deadline, fn)`` runs ``fn()`` at ``deadline`` unless rescheduled/cancelled.

    Callbacks are synchronous and run in the ``run`` task; an exception in one is a bug and
    propagates.
    """

    def __init__(self) -> None:
        self._live: dict[Hashable, tuple[float, int, Callable[[], None]]] = {}
        self._heap: list[tuple[float, int, Hashable]] = []
        self._seq = 0
        self._sleep_until = math.inf
        self._wakeup = trio.Event()

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._live

    def deadline(self, key: Hashable) -> float | None:
        entry = self._live.get(key)
        return None if entry is None else entry[0]

    def schedule(self, key: Hashable, deadline: float, fn: Callable[[], None]) -> None:
        """Set (or replace) the deadline of ``key``."""
        self._seq += 1
        self._live[key] = (deadline, self._seq, fn)
        heapq.heappush(self._heap, (deadline, self._seq, key))
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._live):
            self._heap = [(d, s, k) for k, (d, s, _) in self._live.items()]
            heapq.heapify(self._heap)
        if deadline < self._sleep_until:
            self._wakeup.set()

    def cancel(self, key: Hashable) -> None:
        self._live.pop(key, None)

    def fire_due(self, now: float) -> None:
        """Run every callback whose deadline is ``<= now``, earliest first."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, seq, key = heapq.heappop(heap)
            entry = self._live.get(key)
            if entry is None or entry[1] != seq:
                continue  # rescheduled or cancelled since
            del self._live[key]
            entry[2]()

    async def run(self) -> None:
        """Fire deadlines forever (until cancelled)."""
        while True:
            self.fire_due(trio.current_time())
            while self._heap:
                _, seq, key = self._heap[0]
                entry = self._live.get(key)
                if entry is not None and entry[1] == seq:
                    break
                heapq.heappop(self._heap)
            self._sleep_until = self._heap[0][0] if self._heap else math.inf
            self._wakeup = trio.Event()
            with trio.move_on_at(self._sleep_until):
                await self._wakeup.wait()
            self._sleep_until = math.inf
