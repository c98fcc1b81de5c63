"""A Trio loop in a background thread, for synchronous code: what ``ThreadedBroker`` and
``ThreadedCluster`` share.

Why: synchronous clients (confluent-kafka, kafka-python) and their tests block, so the broker or
cluster runs beside them in a thread of its own. Starting it, reporting a failure to start in the
starting thread, calling into its loop from any thread and stopping it are the same for both;
what runs in the loop is each subclass's ``_main``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import trio


class LoopThread:
    """Runs ``_main`` in a daemon thread's Trio loop; ``_main`` sets ``_ready`` once it serves."""

    #: what runs, in messages ("broker", "cluster")
    what = "loop"

    def __init__(self, thread_name: str) -> None:
        self._token: trio.lowlevel.TrioToken | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)

    async def _main(self) -> None:
        raise NotImplementedError

    def _start_thread(self, timeout_s: float) -> None:
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise RuntimeError(f"{self.what} thread did not start in time")
        if self._error is not None:
            raise RuntimeError(f"{self.what} failed to start: {self._error!r}") from self._error

    def _run(self) -> None:
        async def main() -> None:
            self._token = trio.lowlevel.current_trio_token()
            await self._main()

        try:
            trio.run(main)
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
        finally:
            self._ready.set()

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` in the loop's thread (for direct access to its state)."""
        return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    def _stop_thread(self, stop: Callable[[], object] | None, timeout_s: float) -> None:
        """Call ``stop`` in the loop (if it is running), wait for the thread, report its error."""
        if stop is not None and self._token is not None:
            try:
                trio.from_thread.run_sync(stop, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(timeout_s)
        if self._error is not None:
            raise RuntimeError(f"{self.what} thread failed: {self._error!r}") from self._error
