"""``trio-broker serve`` as a child process: start, wait until it listens, kill, restart.

Why a real process: crash safety means SIGKILL at an arbitrary instruction, and memory bounds
mean the broker's own RSS (``/proc/PID/status``), neither of which an in-process broker can
show. Shared by ``tests/hostile`` and the long runs in ``bench/``.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[2]
EXECUTABLE = Path(sys.executable).parent / "trio-broker"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def status_kb(pid: int, key: str) -> int:
    """A ``VmRSS``/``VmHWM``-style line of ``/proc/PID/status``, in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


class BrokerProcess:
    """One broker child process on a fixed port (so clients can follow it across restarts)."""

    def __init__(self, log_dir: Path, *, port: int | None = None, log_file: Path | None = None,
                 max_open_files: int | None = None, **overrides: Any) -> None:
        self.log_dir = Path(log_dir)
        self.port = port or free_port()
        self.log_file = log_file or self.log_dir.parent / f"broker-{self.port}.log"
        self.overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                          "log.dirs": str(self.log_dir), **overrides}
        self.max_open_files = max_open_files
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._log: IO[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout_s: float = 30) -> float:
        """Start and wait for the "listening" line; returns the seconds it took."""
        argv = [str(EXECUTABLE), "serve"]
        for key, value in self.overrides.items():
            argv += ["--override", f"{key}={value}"]
        self._log = open(self.log_file, "ab")  # noqa: SIM115 - closed in wait()
        t0 = time.monotonic()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._log,
                                     cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                     preexec_fn=self._limits if self.max_open_files else None)
        self.starts += 1
        assert self.proc.stdout is not None
        deadline = t0 + timeout_s
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if b"listening on" in line:
                return time.monotonic() - t0
        self.kill()
        raise RuntimeError(f"broker did not start; see {self.log_file}:\n" + self.log_tail())

    def _limits(self) -> None:  # runs in the child, before exec
        assert self.max_open_files is not None
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.max_open_files, hard))

    def kill(self, sig: int = signal.SIGKILL, timeout_s: float = 30) -> int:
        """Send ``sig`` and reap the process (SIGKILL after ``timeout_s``); its exit status."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.wait()
            raise

    def wait(self, timeout_s: float = 30) -> int:
        assert self.proc is not None
        code = self.proc.wait(timeout_s)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_kb(self) -> int:
        return status_kb(self.pid, "VmRSS")

    def hwm_kb(self) -> int:
        return status_kb(self.pid, "VmHWM")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def log_text(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except OSError:
            return ""

    def __enter__(self) -> BrokerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.alive():
            self.kill(signal.SIGTERM)
