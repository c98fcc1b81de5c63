"""Shared test helpers: the broker fixtures come from the trio_broker pytest plugin."""

from __future__ import annotations

import socket

import pytest


@pytest.fixture
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
