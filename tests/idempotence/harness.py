"""A broker behind a ``CuttingProxy``, both in one background Trio thread, for sync clients.

The proxy's listener is bound first so the broker can advertise it: clients bootstrap through
the proxy and every reconnect (Metadata answers with the advertised address) goes through it
again. The broker itself listens on its own port 0.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from trio_broker import open_broker
from trio_broker.protocol.records import Record, decode_batches

from .proxy import CuttingProxy


@attrs.frozen
class StoredBatch:
    base_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[Record]


class ProxiedBroker:
    def __init__(self, data_dir: Path, *, cut_after_bytes: tuple[int, int], seed: int,
                 **settings: Any) -> None:
        self.data_dir = data_dir
        self.cut_after_bytes = cut_after_bytes
        self.seed = seed
        self.settings = settings
        self.proxy: CuttingProxy | None = None
        self.proxy_port = 0
        self._broker: Any = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="proxied-broker", daemon=True)

    @property
    def bootstrap_servers(self) -> str:
        """The proxy's address (also what the broker advertises)."""
        return f"127.0.0.1:{self.proxy_port}"

    def start(self, timeout_s: float = 30) -> ProxiedBroker:
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise RuntimeError("broker thread did not start in time")
        if self._error is not None:
            raise RuntimeError(f"broker failed to start: {self._error!r}") from self._error
        return self

    def _run(self) -> None:
        async def main() -> None:
            self._token = trio.lowlevel.current_trio_token()
            self._stop = trio.Event()
            listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
            self.proxy_port = listener.socket.getsockname()[1]
            async with open_broker(
                log_dirs=str(self.data_dir),
                listeners="PLAINTEXT://127.0.0.1:0",
                advertised_listeners=f"PLAINTEXT://127.0.0.1:{self.proxy_port}",
                group_initial_rebalance_delay_ms=0,
                **self.settings,
            ) as broker:
                self._broker = broker
                broker_port = broker.listeners[0][2]
                assert broker_port != self.proxy_port
                self.proxy = CuttingProxy(("127.0.0.1", broker_port),
                                          cut_after_bytes=self.cut_after_bytes, seed=self.seed)
                async with trio.open_nursery() as nursery:
                    await nursery.start(self.proxy.serve, listener)
                    self._ready.set()
                    await self._stop.wait()
                    nursery.cancel_scope.cancel()

        try:
            trio.run(main)
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
        finally:
            self._ready.set()

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` in the broker's thread."""
        return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    def create_topic(self, name: str, partitions: int) -> None:
        self.call(self._broker.state.logs.create_topic, name, partitions, {})

    def read_partition(self, topic: str, partition: int) -> list[StoredBatch]:
        """Every batch of one partition, straight from its log."""
        return self.call(self._read_partition, topic, partition)

    def _read_partition(self, topic: str, partition: int) -> list[StoredBatch]:
        log = self._broker.state.logs.get_log(topic, partition)
        out: list[StoredBatch] = []
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            info = log.read(offset, 1 << 20)
            for header, records in decode_batches(info.records):
                out.append(StoredBatch(header.base_offset, header.producer_id,
                                       header.producer_epoch, header.base_sequence, records))
                offset = header.last_offset + 1
        return out

    def stop(self, timeout_s: float = 30) -> None:
        if self._stop is not None and self._token is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(timeout_s)
        if self._error is not None:
            raise RuntimeError(f"broker thread failed: {self._error!r}") from self._error
