"""DeadlineQueue: keyed deadlines on Trio's clock."""

from __future__ import annotations

import trio

from trio_broker.broker.coordinator.timers import DeadlineQueue


async def test_fires_in_order_and_honours_reschedule_and_cancel(autojump_clock, nursery):
    timers = DeadlineQueue()
    nursery.start_soon(timers.run)
    fired: list[tuple[str, float]] = []
    start = trio.current_time()

    def note(name: str) -> None:
        fired.append((name, trio.current_time() - start))

    timers.schedule("a", start + 5, lambda: note("a"))
    timers.schedule("b", start + 2, lambda: note("b"))
    timers.schedule("c", start + 3, lambda: note("c"))
    timers.schedule("a", start + 1, lambda: note("a"))  # moved earlier: wakes the sleeper
    timers.cancel("c")
    await trio.sleep(10)
    assert fired == [("a", 1), ("b", 2)]
    assert len(timers) == 0


async def test_many_reschedules_keep_the_heap_small(autojump_clock, nursery):
    timers = DeadlineQueue()
    nursery.start_soon(timers.run)
    fired = []
    for i in range(10_000):  # a heartbeat storm for one member
        timers.schedule("session", trio.current_time() + 6 + i / 1000, lambda: fired.append(1))
    assert len(timers._heap) <= 4 * len(timers) + 64
    await trio.sleep(20)
    assert fired == [1]
