"""Idle ratios that are right when the broker is idle and do not depend on who reads them.

Kafka's ``RequestHandlerAvgIdlePercent`` (a one-minute rate of the handlers' time spent waiting
for work) and ``NetworkProcessorAvgIdlePercent`` (the processors' selector io-wait ratio). Two
earlier mistakes are what this module is shaped against: idle time counted only when a wait
*ended* (a broker idle for a minute had counted none of it), and a window that restarted at
every scrape (two scrapers saw two different numbers). Here a wait in progress counts up to
now, and the window is the last minute of wall time, kept in one-second slots, whoever reads it.

The handler pool reports each handler's waits (``begin``/``end``, keyed by handler). The
network processors all run on the broker's Trio loop, so their io-wait is the loop's: the time
between Trio's ``before_io_wait`` and ``after_io_wait`` (``IoWaitInstrument``).
"""

from __future__ import annotations

import time
from typing import Any

import trio

SLOT_NS = 1_000_000_000
SLOTS = 60


class IdleMeter:
    """The fraction of the last minute ``workers`` workers spent waiting."""

    def __init__(self, workers: int = 1) -> None:
        self.workers = max(1, workers)
        self._slots = [0] * SLOTS
        self._ids = [-1] * SLOTS
        self._waiting: dict[Any, int] = {}
        self._created_ns = time.monotonic_ns()

    def begin(self, key: Any, now_ns: int) -> None:
        """Worker ``key`` starts waiting."""
        self._waiting[key] = now_ns

    def end(self, key: Any, now_ns: int) -> None:
        """Worker ``key`` has work again."""
        start = self._waiting.pop(key, None)
        if start is not None and now_ns > start:
            self.add_idle(start, now_ns)

    def add_idle(self, start_ns: int, end_ns: int) -> None:
        """Count ``[start_ns, end_ns)`` as idle, spread over the slots it covers."""
        self._add(start_ns, end_ns, 1)

    def add_busy(self, start_ns: int, end_ns: int) -> None:
        """Count ``[start_ns, end_ns)`` as one worker's work done while the workers themselves
        were counted waiting (a request answered outside the pool's tasks): that much less
        idle."""
        self._add(start_ns, end_ns, -1)

    def _add(self, start_ns: int, end_ns: int, sign: int) -> None:
        first, last = start_ns // SLOT_NS, (end_ns - 1) // SLOT_NS
        if first == last:  # within one slot: every request but one a second
            i = first % SLOTS
            if self._ids[i] != first:
                self._ids[i], self._slots[i] = first, 0
            self._slots[i] += sign * (end_ns - start_ns)
            return
        if last - first >= SLOTS:  # older than the window: only its last minute matters
            first = last - SLOTS + 1
            start_ns = first * SLOT_NS
        slots, ids = self._slots, self._ids
        while first <= last:
            upto = min(end_ns, (first + 1) * SLOT_NS)
            i = first % SLOTS
            if ids[i] != first:
                ids[i], slots[i] = first, 0
            slots[i] += sign * (upto - start_ns)
            start_ns, first = upto, first + 1

    def ratio(self, now_ns: int | None = None) -> float:
        """Idle time / (elapsed time x workers) over the last minute (or since creation)."""
        now = time.monotonic_ns() if now_ns is None else now_ns
        current = now // SLOT_NS
        oldest = current - SLOTS + 1
        window_start = max(oldest * SLOT_NS, self._created_ns)
        idle = sum(v for v, i in zip(self._slots, self._ids, strict=True)
                   if oldest <= i <= current)
        idle += sum(now - max(start, window_start) for start in self._waiting.values()
                    if now > start)
        elapsed = (now - window_start) * self.workers
        if elapsed <= 0:
            return 1.0
        return max(0.0, min(1.0, idle / elapsed))


class IoWaitInstrument(trio.abc.Instrument):
    """Feeds an ``IdleMeter`` with the time the Trio loop waits for I/O.

    A poll with a zero timeout (the loop has tasks to run and only collects ready I/O) is not
    a wait, and is not timed: on a busy broker most loop passes are such polls, and two clock
    reads are a large share of a pass (docs/benchmarks.md, "Per-request cost")."""

    def __init__(self, meter: IdleMeter) -> None:
        self.meter = meter

    def before_io_wait(self, timeout: float) -> None:
        if timeout:
            self.meter.begin(self, time.monotonic_ns())

    def after_io_wait(self, timeout: float) -> None:
        if timeout:
            self.meter.end(self, time.monotonic_ns())


__all__ = ["SLOTS", "SLOT_NS", "IdleMeter", "IoWaitInstrument"]
