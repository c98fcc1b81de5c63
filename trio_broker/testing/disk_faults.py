"""Storage faults on command: make the broker's durable writes fail as a failing disk does.

Why at the syscall seam and not with a full file system: ENOSPC and EIO cannot be caused for
real without root (a small tmpfs) or a broken disk, and a test needs them on one chosen step of
one chosen file (the third fsync of ``commits.log``, the rename of ``acls.json``). Every durable
write of the broker goes through ``trio_broker.broker.fileio`` (``write_all``, ``fsync_fd``,
``replace``, ``atomic_write``); ``DiskFaults`` installs its ``fault_hook``, which raises the real
``OSError`` (real errno, real message, the file's path) at the real call site, so the code under
test sees what the kernel would have said. A write can also fail half-way: half of its bytes are
written for real first, as a short write followed by ENOSPC leaves them.

    with DiskFaults() as faults:
        fault = faults.add("write", path=r"/t-0/.*\\.log$", error=errno.ENOSPC)
        ...  # the next write to t-0's segment fails
        assert fault.failed == 1

A fault matches an operation (``"write"``, ``"fsync"``, ``"replace"``) and, optionally, a regular
expression searched in the path (an fd's path is read from ``/proc/self/fd``, Linux only); it
fails the ``nth`` matching call and the ``times - 1`` after it (``times=None``: every one until
cleared). The hook is process-wide: the broker must run in this process (``ThreadedBroker``).
"""

from __future__ import annotations

import errno as errnos
import os
import re
import threading
from pathlib import Path
from types import TracebackType

import attrs

from ..broker import fileio

OPERATIONS = ("write", "fsync", "replace")


@attrs.define
class DiskFault:
    op: str
    error: int = errnos.EIO
    path: str | None = None
    nth: int = 1
    times: int | None = 1
    #: a write: write the first half of the data for real before failing
    partial: bool = False
    #: matching calls seen, and how many of them were failed
    calls: int = 0
    failed: int = 0
    #: the paths of the calls that were failed
    failed_paths: list[str] = attrs.field(factory=list)

    def matches(self, op: str, path: str) -> bool:
        return op == self.op and (self.path is None or re.search(self.path, path) is not None)

    def should_fail(self) -> bool:
        self.calls += 1
        if self.calls < self.nth:
            return False
        return self.times is None or self.failed < self.times


def _path_of(target: int | Path) -> str:
    if isinstance(target, Path):
        return str(target)
    try:
        return os.readlink(f"/proc/self/fd/{target}")
    except OSError:
        return f"fd {target}"


def _write_half(fd: int, data: fileio.Buffers, position: int) -> None:
    whole = b"".join(data) if isinstance(data, tuple) else bytes(data)
    os.pwrite(fd, whole[: len(whole) // 2], position)


class DiskFaults:
    """The faults in force; a context manager installs and removes the hook."""

    def __init__(self) -> None:
        self.faults: list[DiskFault] = []
        self._lock = threading.Lock()

    def add(self, op: str, *, error: int = errnos.EIO, path: str | None = None, nth: int = 1,
            times: int | None = 1, partial: bool = False) -> DiskFault:
        if op not in OPERATIONS:
            raise ValueError(f"unknown operation {op!r}: one of {OPERATIONS}")
        if partial and op != "write":
            raise ValueError("only a write can fail half-way")
        fault = DiskFault(op, error, path, nth, times, partial)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        """Remove every fault: the disk works again."""
        with self._lock:
            self.faults = []

    def install(self) -> None:
        if fileio.fault_hook is not None:
            raise RuntimeError("another DiskFaults is installed")
        fileio.fault_hook = self._hook

    def uninstall(self) -> None:
        fileio.fault_hook = None

    def __enter__(self) -> DiskFaults:
        self.install()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.uninstall()

    def _hook(self, op: str, target: int | Path, data: fileio.Buffers | None,
              position: int) -> None:
        path = _path_of(target)
        with self._lock:
            fault = next((f for f in self.faults if f.matches(op, path) and f.should_fail()),
                         None)
            if fault is None:
                return
            fault.failed += 1
            fault.failed_paths.append(path)
        if fault.partial and data is not None and isinstance(target, int):
            _write_half(target, data, position)
        raise OSError(fault.error, os.strerror(fault.error), path)


__all__ = ["OPERATIONS", "DiskFault", "DiskFaults"]
