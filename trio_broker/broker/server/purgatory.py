"""Kafka's purgatory for delayed fetches: parked requests completed by an event or a deadline.

Why: a long-poll fetch may wait up to ``max_wait_ms`` for data. Holding a handler task that long
would let a few hundred idle consumers starve every producer, so the handler parks the fetch here
and returns at once. Each parked operation is watched under the partitions it asked for; an
append to one of them adds to the operation's byte count, and the operation completes as soon as
it has ``min_bytes`` or its deadline passes, whichever comes first. Its expiry is a light task in
the broker's nursery, not a handler.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable

import trio


class DelayedOperation:
    """A parked request: ``complete`` runs exactly once, on enough data or at the deadline."""

    __slots__ = ("_done", "accumulated_bytes", "complete", "deadline", "keys", "min_bytes")

    def __init__(self, keys: Iterable[Hashable], *, deadline: float, min_bytes: int,
                 accumulated_bytes: int, complete: Callable[[], None]) -> None:
        self.keys = tuple(keys)
        self.deadline = deadline
        self.min_bytes = min_bytes
        self.accumulated_bytes = accumulated_bytes
        self.complete = complete
        self._done = trio.Event()

    def add_bytes(self, n: int) -> None:
        self.accumulated_bytes += n
        if self.accumulated_bytes >= self.min_bytes:
            self._done.set()

    def force_complete(self) -> None:
        self._done.set()


class Purgatory:
    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self._watchers: defaultdict[Hashable, set[DelayedOperation]] = defaultdict(set)

    def __len__(self) -> int:
        return len({op for ops in self._watchers.values() for op in ops})

    def park(self, op: DelayedOperation) -> None:
        for key in op.keys:
            self._watchers[key].add(op)
        self._nursery.start_soon(self._expire, op)

    async def _expire(self, op: DelayedOperation) -> None:
        with trio.move_on_at(op.deadline):
            await op._done.wait()
        for key in op.keys:
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.discard(op)
                if not watchers:
                    del self._watchers[key]
        op.complete()

    def notify(self, key: Hashable, appended_bytes: int) -> None:
        """Data arrived under ``key`` (a topic-partition)."""
        watchers = self._watchers.get(key)
        if watchers:
            for op in list(watchers):
                op.add_bytes(appended_bytes)

    def complete_all(self, key: Hashable | None = None) -> None:
        """Complete every operation (under ``key``): shutdown, topic deletion."""
        ops: Iterable[DelayedOperation] = self._watchers.get(key, ()) if key is not None else {
            op for ops in self._watchers.values() for op in ops}
        for op in list(ops):
            op.force_complete()
