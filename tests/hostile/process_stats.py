"""This process's (or another's) memory and open file descriptors, from /proc."""

from __future__ import annotations

import os
from pathlib import Path


def vm_rss_kb(pid: int | str = "self") -> int:
    """Resident set size of a process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS line")


def vm_hwm_kb(pid: int | str = "self") -> int:
    """Peak resident set size of a process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM line")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def fd_targets() -> list[str]:
    """What this process's descriptors point at (paths, ``socket:[...]``, ...)."""
    targets = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            targets.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # closed meanwhile (the listing's own descriptor among them)
            continue
    return targets
