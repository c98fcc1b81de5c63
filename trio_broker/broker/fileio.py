"""The syscalls of every durable write: write, fsync, rename; and the seam that tests hook.

Why one module under everything that persists: partition logs, the coordinators' files and the
admin state (ACLs, quotas, SCRAM users, dynamic configs) all need the same few steps (write
everything or fail, fsync, rename over the old file, fsync the directory), and a test that must
show what the broker answers when the disk fails (ENOSPC, EIO) needs one place to make a call
fail. ``fault_hook`` is that place: None in production (one module-level check per call), set by
``trio_broker.testing.disk_faults``, which raises the real ``OSError`` from the real call site
(and for a write may first write part of the data, as a short write before ENOSPC does).

Why a metadata file is replaced and never rewritten in place: a crash must leave either the old
or the new content, which on POSIX means write a temp file, fsync it, rename it over the old one,
and fsync the directory so the rename itself survives a power loss.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeAlias

Buffer: TypeAlias = bytes | bytearray | memoryview
Buffers: TypeAlias = Buffer | tuple[Buffer, ...]

#: called before each durable syscall as ``hook(op, target, data, position)``: ``op`` is
#: ``"write"`` (``target`` an fd, ``data`` what is about to be written at ``position``),
#: ``"fsync"`` (an fd) or ``"replace"`` (the destination path); it raises ``OSError`` to fail
#: the call. None unless a test installed one.
fault_hook: Callable[[str, int | Path, Buffers | None, int], None] | None = None

#: the longest file name the file systems we run on accept (bytes)
NAME_MAX = 255


def write_all(fd: int, data: Buffers, position: int) -> None:
    """pwrite until everything is written; a short write is retried, an error propagates.

    A tuple of buffers is written as if concatenated (``pwritev``, no copy).
    """
    if fault_hook is not None:
        fault_hook("write", fd, data, position)
    if isinstance(data, tuple):
        total = sum(map(len, data))
        written = os.pwritev(fd, data, position)
        if written == total:
            return
        data = b"".join(data)  # a short vectored write: rare, so finish the simple way
    else:
        written = os.pwrite(fd, data, position)
    if written == len(data):
        return
    view = memoryview(data)[written:]
    position += written
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written


def fsync_fd(fd: int) -> None:
    if fault_hook is not None:
        fault_hook("fsync", fd, None, 0)
    os.fsync(fd)


def fsync_file(path: Path, flags: int = 0) -> None:
    """fsync the file (or, with ``os.O_DIRECTORY``, the directory) at ``path``."""
    fd = os.open(path, os.O_RDONLY | flags)
    try:
        fsync_fd(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    fsync_file(path, os.O_DIRECTORY)


def replace(source: Path, destination: Path) -> None:
    """``os.replace``: rename ``source`` over ``destination`` (atomic within a file system)."""
    if fault_hook is not None:
        fault_hook("replace", Path(destination), None, 0)
    os.replace(source, destination)


def fitting_name(name: str, suffix: str) -> str:
    """``name + suffix``, ``name`` cut short if needed so the whole fits in ``NAME_MAX`` bytes.

    Why: a 249-character topic is valid in Kafka, and its files' temporary or deletion names
    (topic plus a suffix) must still be creatable; Kafka cuts the topic short the same way."""
    room = NAME_MAX - len(suffix.encode())
    encoded = name.encode()
    if len(encoded) <= room:
        return name + suffix
    return encoded[:room].decode(errors="ignore") + suffix


def atomic_write(path: Path, data: Buffers, *, durable: bool = True,
                 mode: int | None = None, tmp_suffix: str = ".tmp") -> None:
    """Replace ``path`` with ``data`` so a crash leaves either the old or the new content.

    ``mode`` is the new file's exact permission bits (else 0o644 less the umask); a file that
    more than one process may write gives a ``tmp_suffix`` of its own per process. A failure
    leaves the old file and removes the temp file."""
    tmp = path.with_name(fitting_name(path.name, tmp_suffix))
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644 if mode is None else mode)
        try:
            if mode is not None:
                os.fchmod(fd, mode)  # neither the umask nor a leftover temp file's mode applies
            write_all(fd, data, 0)
            if durable:
                fsync_fd(fd)
        finally:
            os.close(fd)
        replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass  # never made, or already renamed
        raise
    if durable:
        fsync_dir(path.parent)


def write_new(path: Path, data: bytes) -> None:
    """Create ``path`` with ``data``, no fsync (one file-system operation where ``atomic_write``
    makes two: for a file no reader can see before it is whole)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        write_all(fd, data, 0)
    finally:
        os.close(fd)


__all__ = ["NAME_MAX", "atomic_write", "fault_hook", "fitting_name", "fsync_dir", "fsync_fd",
           "fsync_file", "replace", "write_all", "write_new"]
