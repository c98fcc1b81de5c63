"""Small file helpers shared by the storage modules.

Why: metadata files (topic configs, checkpoints, producer-id blocks) must never be seen half
written after a crash, which on POSIX means write a temp file, fsync it, rename it over the old
one, and fsync the directory so the rename itself survives a power loss.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

LOGGER = logging.getLogger(__name__)


def fsync_dir(path: Path) -> None:
    fsync_file(path, os.O_DIRECTORY)


def fsync_file(path: Path, flags: int = 0) -> None:
    """fsync the file (or, with ``os.O_DIRECTORY``, the directory) at ``path``."""
    fd = os.open(path, os.O_RDONLY | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(
    fd: int,
    data: bytes | bytearray | memoryview | tuple[bytes | bytearray | memoryview, ...],
    position: int,
) -> None:
    """pwrite until everything is written; a short write is retried, an error propagates.

    A tuple of buffers is written as if concatenated (``pwritev``, no copy).
    """
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


#: the longest file name the file systems we run on accept (bytes)
NAME_MAX = 255


def fitting_name(name: str, suffix: str) -> str:
    """``name + suffix``, ``name`` cut short if needed so the whole fits in ``NAME_MAX`` bytes.

    Why: a 249-character topic is valid in Kafka, and its files' temporary or deletion names
    (topic plus a suffix) must still be creatable; Kafka cuts the topic short the same way."""
    room = NAME_MAX - len(suffix.encode())
    encoded = name.encode()
    if len(encoded) <= room:
        return name + suffix
    return encoded[:room].decode(errors="ignore") + suffix


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so a crash leaves either the old or the new content."""
    tmp = path.with_name(fitting_name(path.name, ".tmp"))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data, 0)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
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


def close_fds(fds: list[int]) -> None:
    """Close duplicated descriptors; a failure is logged, not raised (they were only synced)."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            LOGGER.exception("Closing a duplicated fd failed")


def wall_ms() -> int:
    return time.time_ns() // 1_000_000
