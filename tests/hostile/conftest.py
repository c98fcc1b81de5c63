"""Helpers for the hostile-conditions suite: memory and file descriptor counts, open-files limit.

(Certificates and SASL users are shared fixtures: ``tests/conftest.py``.)"""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from pathlib import Path

import pytest


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


@pytest.fixture
def fd_limit() -> Iterator[int]:
    """Raise the soft open-files limit to the hard limit for a connection flood."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 65536
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    try:
        yield target
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
