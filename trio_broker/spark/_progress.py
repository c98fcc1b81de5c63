"""Executor-to-driver progress for ``trio-broker export``: UDP datagrams of (records, bytes).

Why a side channel: Spark accumulators only reach the driver when a task ends, so a progress bar
fed by them jumps once per partition. Executors instead send small increments, at most every
``interval_s``, to the address the export command listens on. Datagrams are fire-and-forget:
a lost or unreachable one costs a less accurate bar, never the job.

Datagram: two big-endian i64, records then payload bytes, since the previous datagram.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time

LOGGER = logging.getLogger(__name__)

_DATAGRAM = struct.Struct(">qq")


class ProgressSender:
    """Executor side; every method is safe to call when the driver is not listening."""

    def __init__(self, address: tuple[str, int] | None, *, interval_s: float = 0.2) -> None:
        self._address = address
        self._interval_s = interval_s
        self._records = 0
        self._bytes = 0
        self._last_sent = time.monotonic()
        self._sock: socket.socket | None = None
        if address is not None:
            try:
                self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            except OSError:
                self._sock = None

    def add(self, records: int, payload_bytes: int) -> None:
        self._records += records
        self._bytes += payload_bytes
        if time.monotonic() - self._last_sent >= self._interval_s:
            self.flush()

    def flush(self) -> None:
        if self._sock is None or self._address is None or not (self._records or self._bytes):
            return
        try:
            self._sock.sendto(_DATAGRAM.pack(self._records, self._bytes), self._address)
        except OSError as exc:
            LOGGER.debug("progress datagram to %s dropped: %s", self._address, exc)
        self._records = self._bytes = 0
        self._last_sent = time.monotonic()

    def close(self) -> None:
        self.flush()
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class ProgressListener:
    """Driver side: a thread summing the datagrams that arrive on a UDP socket."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind((host, 0))
        self._sock.settimeout(0.2)
        self.address: tuple[str, int] = self._sock.getsockname()
        self.records = 0
        self.bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="export-progress", daemon=True)

    def __enter__(self) -> ProgressListener:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._sock.recv(64)
            except TimeoutError:
                continue
            except OSError:
                return
            if len(data) == _DATAGRAM.size:
                records, payload_bytes = _DATAGRAM.unpack(data)
                self.records += records
                self.bytes += payload_bytes
