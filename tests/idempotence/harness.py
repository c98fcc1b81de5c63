"""A broker behind a ``CuttingProxy``, both in one background Trio thread, for sync clients.

The proxy's listener is bound first so the broker can advertise it: clients bootstrap through
the proxy and every reconnect (Metadata answers with the advertised address) goes through it
again. The broker itself listens on its own port 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import trio

from tests.idempotence.proxy import CuttingProxy
from trio_broker.protocol.records import Record, decode_batches
from trio_broker.testing import ThreadedBroker


@attrs.frozen
class StoredBatch:
    base_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[Record]


class ProxiedBroker(ThreadedBroker):
    def __init__(self, data_dir: Path, *, cut_after_bytes: tuple[int, int], seed: int,
                 **settings: Any) -> None:
        super().__init__(log_dirs=str(data_dir), listeners="PLAINTEXT://127.0.0.1:0",
                         group_initial_rebalance_delay_ms=0, **settings)
        self.cut_after_bytes = cut_after_bytes
        self.seed = seed
        self.proxy: CuttingProxy | None = None
        self.proxy_port = 0
        self._listener: trio.SocketListener | None = None

    @property
    def bootstrap_servers(self) -> str:
        """The proxy's address (also what the broker advertises)."""
        return f"127.0.0.1:{self.proxy_port}"

    async def _extra_settings(self) -> dict[str, Any]:
        # Bind the proxy first so the broker can advertise it.
        self._listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
        self.proxy_port = self._listener.socket.getsockname()[1]
        return {"advertised_listeners": f"PLAINTEXT://127.0.0.1:{self.proxy_port}"}

    async def _run_beside(self, broker: Any) -> None:
        broker_port = broker.listeners[0][2]
        assert broker_port != self.proxy_port
        self.proxy = CuttingProxy(("127.0.0.1", broker_port),
                                  cut_after_bytes=self.cut_after_bytes, seed=self.seed)
        async with trio.open_nursery() as nursery:
            await nursery.start(self.proxy.serve, self._listener)
            self._ready.set()
            await broker._stop.wait()
            nursery.cancel_scope.cancel()

    def read_partition(self, topic: str, partition: int) -> list[StoredBatch]:
        """Every batch of one partition, straight from its log."""
        return self.call(self._read_partition, topic, partition)

    def _read_partition(self, topic: str, partition: int) -> list[StoredBatch]:
        log = self.broker.state.logs.get_log(topic, partition)
        out: list[StoredBatch] = []
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            info = log.read(offset, 1 << 20)
            for header, records in decode_batches(info.records):
                out.append(StoredBatch(header.base_offset, header.producer_id,
                                       header.producer_epoch, header.base_sequence, records))
                offset = header.last_offset + 1
        return out
