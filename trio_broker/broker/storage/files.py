"""Small file helpers shared by the storage modules.

The durable writes themselves (write everything, fsync, atomic replace) live in
``broker/fileio.py``, below every package that persists state, and are re-exported here.
"""

from __future__ import annotations

import logging
import os
import time

from ..fileio import (
    NAME_MAX,
    atomic_write,
    fitting_name,
    fsync_dir,
    fsync_fd,
    fsync_file,
    replace,
    write_all,
    write_new,
)

LOGGER = logging.getLogger(__name__)


def close_fds(fds: list[int]) -> None:
    """Close duplicated descriptors; a failure is logged, not raised (they were only synced)."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            LOGGER.exception("Closing a duplicated fd failed")


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


__all__ = ["NAME_MAX", "atomic_write", "close_fds", "fitting_name", "fsync_dir", "fsync_fd",
           "fsync_file", "replace", "wall_ms", "write_all", "write_new"]
