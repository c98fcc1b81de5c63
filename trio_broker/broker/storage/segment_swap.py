"""Replacing segments of a partition directory by one new segment, crash-safely.

Why in storage proper: the compactor (``cleaner.py``) writes the new segment, but finishing a
swap is the log's business. ``Log.replace_segments`` completes a swap the cleaner committed, and
the loader completes one a crash interrupted, before it opens any segment.

The protocol: the new segment is written into ``.cleaning-<base>/`` inside the partition
directory and fsynced; the one atomic step, the commit, is renaming that directory to
``.swap-<base>-<end>/``. ``complete_swap`` deletes the replaced segments in [base, end) (then
marks that done inside the swap directory) and renames the new files over their namesakes, so a
crash at any point leaves a state that completing the swap again turns into the new segment. A
``.cleaning-`` directory found at load time was never committed and is removed.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .files import fsync_dir, replace
from .segment import LOG_SUFFIX

LOGGER = logging.getLogger(__name__)

CLEANING_PREFIX = ".cleaning-"
SWAP_PREFIX = ".swap-"
_DELETED_MARKER = "replaced-segments-deleted"


def swap_dir_name(base: int, end: int) -> str:
    """The committed name of a swap replacing the segments in [base, end)."""
    return f"{SWAP_PREFIX}{base:020d}-{end:020d}"


def parse_swap(name: str) -> tuple[int, int] | None:
    """(base, end) of a swap directory's name, or None if it is not one."""
    if not name.startswith(SWAP_PREFIX):
        return None
    try:
        base, end = name[len(SWAP_PREFIX):].split("-")
        return int(base), int(end)
    except ValueError:
        return None


def complete_swap(directory: Path, swap: Path) -> int:
    """Replace the segments in [base, end) by the swap directory's segment (idempotent: recovery
    runs it again after a crash midway); returns the base offset of the new segment."""
    parsed = parse_swap(swap.name)
    if parsed is None:
        raise ValueError(f"{swap} is not a swap directory")
    base, end = parsed
    marker = swap / _DELETED_MARKER
    if not marker.exists():
        incoming = set(os.listdir(swap))  # renamed over their old namesakes below
        for path in directory.iterdir():
            stem, dot, _suffix = path.name.partition(".")
            if (dot and len(stem) == 20 and stem.isdigit() and base <= int(stem) < end
                    and path.name not in incoming):
                path.unlink()
        marker.touch()
        fsync_dir(directory)
        fsync_dir(swap)
    names = sorted((n for n in os.listdir(swap) if n != _DELETED_MARKER),
                   key=lambda n: n.endswith(LOG_SUFFIX))
    for name in names:
        replace(swap / name, directory / name)
    fsync_dir(directory)
    marker.unlink()
    swap.rmdir()
    fsync_dir(directory)
    return base


def finish_interrupted_swaps(directory: Path) -> None:
    """At load time: complete a committed swap (``.swap-*``), drop an uncommitted one."""
    for path in sorted(directory.iterdir()):
        if path.name.startswith(CLEANING_PREFIX) and path.is_dir():
            LOGGER.warning("Removing %s: a cleaning interrupted before its swap", path)
            remove_dir(path)
        elif parse_swap(path.name) is not None and path.is_dir():
            LOGGER.warning("Completing the swap of cleaned segment %s, interrupted by a "
                           "crash", path)
            complete_swap(directory, path)


def remove_dir(path: Path) -> None:
    """Remove a swap or cleaning directory and the files in it."""
    for child in path.iterdir():
        child.unlink()
    path.rmdir()


__all__ = ["CLEANING_PREFIX", "SWAP_PREFIX", "complete_swap", "finish_interrupted_swaps",
           "parse_swap", "remove_dir", "swap_dir_name"]
