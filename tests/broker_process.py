"""Run ``trio-broker serve`` as a real subprocess, for tests that need a process to signal or
kill."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    def __init__(self, data_dir: Path, *overrides: str, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.overrides = overrides
        self.proc: subprocess.Popen[str] | None = None
        self.output: list[str] = []
        self._ready = threading.Event()

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 20) -> BrokerProcess:
        args = [sys.executable, "-m", "trio_broker", "serve",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override", f"log.dirs={self.data_dir}",
                "--override", "group.initial.rebalance.delay.ms=0"]
        for o in self.overrides:
            args += ["--override", o]
        # one event per process: the previous process's reader, ending at its EOF after a
        # kill, must not mark this one ready before it listens
        self._ready = ready = threading.Event()
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        threading.Thread(target=self._pump, args=(self.proc, ready), daemon=True).start()
        if not ready.wait(timeout_s) or self.proc.poll() is not None:
            self.kill()
            raise RuntimeError("broker did not start:\n" + "".join(self.output))
        return self

    def _pump(self, proc: subprocess.Popen[str], ready: threading.Event) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.output.append(line)
            if "trio-broker listening on" in line:
                ready.set()
        ready.set()  # it exited: start() reports its output instead of waiting

    def wait_for_line(self, text: str, timeout_s: float = 10) -> str:
        """The first output line containing ``text``, once the broker has printed it."""
        deadline = time.monotonic() + timeout_s
        while not (lines := [x for x in self.output if text in x]):
            assert time.monotonic() < deadline, "".join(self.output)
            time.sleep(0.05)
        return lines[0]

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 20) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        return self.proc.wait(timeout_s)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def log_text(self) -> str:
        time.sleep(0.05)
        return "".join(self.output)
