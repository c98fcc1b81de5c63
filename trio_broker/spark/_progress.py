"""Progress of ``trio-broker export``: executors' counts to the driver, and what the terminal
shows while the export runs and when it ends.

Why a side channel: Spark accumulators only reach the driver when a task ends, so a progress bar
fed by them jumps once per partition. Executors instead send small increments, at most every
``interval_s``, to the address the export command listens on. Datagrams are fire-and-forget:
a lost or unreachable one costs a less accurate bar, never the job.

Datagram: two big-endian i64, records then payload bytes, since the previous datagram.

The terminal part imports rich only when it runs: executors import this module for the sender.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from ._options import OffsetRange

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


# --- the terminal ------------------------------------------------------------------------------

def show_progress(console: Console, thread: threading.Thread, listener: ProgressListener,
                  planned: int | None, *, verb: str = "exporting") -> None:
    """A bar of records and bytes done of ``planned`` records (None: not known, a running
    count) until ``thread`` ends."""
    from rich.progress import (
        BarColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (
        TextColumn(f"[bold]{verb}"), BarColumn(), TaskProgressColumn(),
        TextColumn("{task.fields[records]}"), TextColumn("{task.fields[bytes]}"),
        TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
    )
    started = time.monotonic()
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(verb, total=planned, records="", bytes="", rate="")
        while thread.is_alive():
            thread.join(0.2)
            rate = listener.records / max(time.monotonic() - started, 1e-9)
            if planned is None:
                bar.update(task, completed=listener.records,
                           records=f"{listener.records:,} records",
                           bytes=_size(listener.bytes), rate=f"{rate:,.0f} rec/s")
                continue
            done = min(listener.records, planned)
            estimate = listener.bytes * planned / done if done else 0
            bar.update(task, completed=done,
                       records=f"{done:,}/{planned:,} records",
                       bytes=f"{_size(listener.bytes)} of ~{_size(estimate)}",
                       rate=f"{rate:,.0f} rec/s")


def show_import_summary(console: Console, summary: Mapping[str, Any], source: str,
                        elapsed_s: float, read_back: str | None) -> None:
    """The offsets written per partition and one line of totals."""
    from rich.table import Table

    table = Table(title=f"Imported {source}", title_justify="left")
    for name in ("topic", "partition", "first offset", "last offset", "records"):
        table.add_column(name, justify="left" if name == "topic" else "right")
    for r in summary["ranges"]:
        known = r["first_offset"] >= 0
        table.add_row(r["topic"], str(r["partition"]),
                      f"{r['first_offset']:,}" if known else "-",
                      f"{r['last_offset']:,}" if known else "-", f"{r['records']:,}")
    console.print(table)
    records = summary["records"]
    console.print(
        f"{records:,} records, {_size(summary['payload_bytes'])} of keys and values in "
        f"{elapsed_s:.1f} s ({records / max(elapsed_s, 1e-9):,.0f} records/s)", highlight=False)
    if read_back:
        console.print(f"Read them back with: {read_back}", highlight=False, soft_wrap=True)


def show_summary(console: Console, ranges: list[OffsetRange], manifest: Mapping[str, Any],
                 out: Path, elapsed_s: float, manifest_path: str) -> None:
    """The ranges exported and one line of totals."""
    from rich.table import Table

    table = Table(title=f"Exported to {out}", title_justify="left")
    for name in ("topic", "partition", "from offset", "to offset", "offsets"):
        table.add_column(name, justify="left" if name == "topic" else "right")
    for r in ranges:
        last = f"{r.end - 1:,}" if r.size else "-"
        table.add_row(r.topic, str(r.partition), f"{r.start:,}", last, f"{r.size:,}")
    console.print(table)
    records = manifest["records"]
    console.print(
        f"{records:,} records, {_size(manifest['payload_bytes'])} of keys and values, "
        f"{len(manifest['files'])} {manifest['format']} files in {elapsed_s:.1f} s "
        f"({records / max(elapsed_s, 1e-9):,.0f} records/s); manifest {manifest_path}"
        + (f"; replaced {len(manifest['replaced'])} earlier export(s)"
           if [r for r in manifest["replaced"] if r != manifest["export_id"]] else ""),
        highlight=False)


def watch_stream(console: Console, interactive: bool, query: Any,
                 stop: threading.Event) -> int:
    """Wait for ``stop`` (or the query's end), showing batches as they commit; records seen."""
    counted: dict[int, int] = {}
    status = console.status("following", spinner="dots") if interactive else None
    if status is not None:
        status.start()
    try:
        while not stop.is_set() and query.isActive:
            stop.wait(0.5)
            for progress in query.recentProgress:
                counted[progress["batchId"]] = progress["numInputRows"]
            if status is not None:
                status.update(f"following: {sum(counted.values()):,} records in "
                              f"{len(counted)} batches; Ctrl-C stops")
    finally:
        if status is not None:
            status.stop()
    return sum(counted.values())


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} TB"
