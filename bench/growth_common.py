"""What the growth benchmarks share: a free loopback port, the broker's command line."""

from __future__ import annotations

import socket
import sys


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def broker_argv(port: int, data: str) -> list[str]:
    """``trio-broker serve`` on loopback ``port`` with its log in ``data``."""
    return [sys.executable, "-m", "trio_broker", "serve",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={data}", "--override", "log.level=WARNING"]
