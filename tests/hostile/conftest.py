"""Fixtures for the hostile-conditions suite: the open-files limit for connection floods.

(Certificates and SASL users are shared fixtures: ``tests/conftest.py``; memory and file
descriptor counts are in ``tests/hostile/process_stats.py``.)"""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest


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
