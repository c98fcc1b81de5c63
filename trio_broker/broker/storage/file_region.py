"""A byte range of a segment file, handed to the network layer to send with ``sendfile``.

Why its own file descriptor: the range is read when the response is written, which may be after
retention or the cleaner deleted (and closed) the segment. The region holds a duplicate of the
segment's descriptor, so the file's bytes stay readable until the region is closed, whatever
happens to the segment meanwhile (Kafka keeps the ``FileChannel`` of its ``FileRecords``). A
truncation of the file in place (a log truncated below the range) cannot be held off: the
sender sees the file end early and closes the connection, as Kafka does.

A region is closed by whoever consumes it (the connection that sends it, or the code that drops
its response); the finaliser closes one that was dropped on an unforeseen path.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

__all__ = ["FileRegion"]


class FileRegion:
    """``size`` bytes of an open file from ``position``; ``len()`` is its size."""

    __slots__ = ("fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd = fd
        self.position = position
        self.size = size

    @classmethod
    def of(cls, fd: int, position: int, size: int) -> FileRegion:
        """A region of the file open as ``fd``, holding its own duplicate of the descriptor."""
        return cls(os.dup(fd), position, size)

    def __len__(self) -> int:
        return self.size

    def read(self) -> bytes:
        """The bytes themselves (the copy path, for a stream that is not a plain socket)."""
        data = os.pread(self.fd, self.size, self.position)
        if len(data) != self.size:
            raise OSError(f"file region truncated: {len(data)} of {self.size} bytes left")
        return data

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileRegion(fd={self.fd}, position={self.position}, size={self.size})"


def close_regions(topics: Iterable[Any]) -> None:
    """Close the file regions among a Fetch response's records (an answer that is not sent)."""
    for t in topics:
        for p in t.partitions:
            if isinstance(p.records, FileRegion):
                p.records.close()
