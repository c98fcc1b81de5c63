"""The cyclic collector waits while a command's modules load and a broker starts, and runs again
once the broker serves (or the command failed): a process never runs on without it."""

from __future__ import annotations

import gc
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker_process import free_port
from trio_broker.cli import main


@pytest.fixture
def collector_restored() -> Iterator[None]:
    yield
    gc.unfreeze()  # what a served start froze belongs to this test process: give it back
    gc.enable()


def test_the_collector_runs_again_once_the_broker_listens(
        tmp_path: Path, collector_restored: None, capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[bool] = []
    port = free_port()
    served = threading.Event()  # set once ``main`` returned: no signal may reach pytest then

    def stop_once_collecting() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not served.is_set():  # bound: nearly started
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.01)
        while not gc.isenabled() and time.monotonic() < deadline and not served.is_set():
            time.sleep(0.01)
        seen.append(gc.isenabled())
        if not served.is_set():
            os.kill(os.getpid(), signal.SIGINT)

    watcher = threading.Thread(target=stop_once_collecting)
    watcher.start()
    try:
        status = main(["serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                       "--override", f"log.dirs={tmp_path}", "--override", "log.level=WARNING"])
    finally:
        served.set()
        watcher.join()
    assert "listening on PLAINTEXT://127.0.0.1:" in capsys.readouterr().out
    assert seen == [True]
    assert status == 0
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0


@pytest.mark.parametrize("argv", [["serve", "--override", "no.such.key"], ["--help"],
                                  ["topics", "--bootstrap-server", "nonsense", "list"]])
def test_a_failed_or_finished_command_leaves_the_collector_on(argv: list[str],
                                                              collector_restored: None) -> None:
    try:
        main(argv)
    except SystemExit:
        pass
    assert gc.isenabled()
