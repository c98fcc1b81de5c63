"""The embedded start (``open_broker``): its file work takes one hand-off to a worker thread
(for an empty log dir, only its new stamp's, in the background), and a start cancelled or
interrupted half-way still ends, with its logs cleanly closed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_broker import open_broker
from trio_broker.broker.config import BrokerConfig, ConfigError
from trio_broker.broker.lifecycle import as_config
from trio_broker.broker.storage.dir_checkpoints import CLEAN_SHUTDOWN_FILE
from trio_broker.broker.storage.meta_properties import ensure_meta_properties, read_meta_properties


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions handed to a worker thread from now on."""
    names: list[str] = []
    real = trio.to_thread.run_sync

    async def spy(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        names.append(getattr(fn, "__qualname__", repr(fn)))
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(trio.to_thread, "run_sync", spy)
    return names


async def test_a_start_hands_its_file_work_to_one_worker_thread(
        tmp_path: Path, handed: list[str]) -> None:
    (tmp_path / "topic-configs").mkdir()  # a log dir that holds something
    ensure_meta_properties([tmp_path], 0)  # and was stamped by an earlier start
    async with open_broker(log_dirs=str(tmp_path)):
        assert handed == ["_open_storage"]
        # every background task had its first pass; with no log the cleaner hands off nothing
        await trio.testing.wait_all_tasks_blocked()
        assert handed == ["_open_storage"]


async def test_an_empty_log_dirs_start_opens_on_the_loop_and_stamps_the_dir_in_a_thread(
        tmp_path: Path, handed: list[str]) -> None:
    """Nothing to read and, with the coordinators' files made on first use, nothing to write
    but the dir's meta.properties: the files are opened on the loop, without the thread's
    hand-off and back, and the stamp's fsyncs are a worker thread's, beside the start."""
    async with open_broker(log_dirs=str(tmp_path)) as broker:
        # the coordinators, started without waiting for them, are loaded by now
        assert broker.state.groups.loaded
        assert broker.state.transactions.loaded
        await trio.testing.wait_all_tasks_blocked()
        assert handed == ["write_stamps"]
        with trio.fail_after(10):  # the worker thread's fsyncs, beside the running broker
            while read_meta_properties(tmp_path) is None:  # noqa: ASYNC110 (a thread's file)
                await trio.sleep(0.005)
        assert os.listdir(tmp_path) == ["meta.properties"]
        assert read_meta_properties(tmp_path).cluster_id == broker.state.cluster_id


# Run in a process of its own: a start that does not end would hang the test run, not fail it.
_INTERRUPTED_START = textwrap.dedent("""
    import os, pathlib, signal, sys, threading
    import trio
    from trio_broker.broker import lifecycle as broker

    # a run started in the background by a shell inherits SIGINT ignored: a terminal's is not
    signal.signal(signal.SIGINT, signal.default_int_handler)
    mode, log_dir = sys.argv[1], pathlib.Path(sys.argv[2])
    if mode != "ctrl-c-empty":  # a log dir that holds something is opened in the thread
        (log_dir / "topic-configs").mkdir()
    real = broker._open_storage
    in_thread, cancelled = threading.Event(), threading.Event()

    def opening_storage(*args):
        in_thread.set()
        if mode.startswith("ctrl-c"):
            os.kill(os.getpid(), signal.SIGINT)
        else:
            cancelled.wait(10)
        real(*args)

    broker._open_storage = opening_storage

    async def main():
        with trio.CancelScope() as scope:
            async def cancel_in_the_thread():
                while not in_thread.is_set():
                    await trio.sleep(0.001)
                scope.cancel()
                cancelled.set()

            async with trio.open_nursery() as nursery:
                if mode == "cancel":
                    nursery.start_soon(cancel_in_the_thread)
                async with broker.open_broker(log_dirs=str(log_dir)):
                    print("started")
                    await trio.sleep(60)
        print("cancelled" if scope.cancelled_caught else "not cancelled")

    try:
        trio.run(main)
    except* KeyboardInterrupt:  # out of the nurseries, in a group
        print("interrupted")
    print(len(os.listdir("/proc/self/fd")))
""")


@pytest.mark.parametrize(("mode", "ending"), [("cancel", "cancelled"), ("ctrl-c", "interrupted"),
                                             ("ctrl-c-empty", "interrupted")])
def test_a_start_stopped_in_its_storage_thread_ends_and_closes_its_logs(
        tmp_path: Path, mode: str, ending: str) -> None:
    """Cancelled (or Ctrl-C) while the start's worker thread opens the logs: the start finishes
    what it began, then shuts down as a running broker does (its logs closed cleanly, no file
    left open) instead of waiting forever on its shielded parts."""
    done = subprocess.run([sys.executable, "-c", _INTERRUPTED_START, mode, str(tmp_path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert lines[:-1] == ["started", ending] or lines[:-1] == [ending], done.stdout
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    baseline = subprocess.run([sys.executable, "-c", "import os, trio_broker.broker.lifecycle; "
                               "print(len(os.listdir('/proc/self/fd')))"],
                              capture_output=True, text=True, timeout=60, check=True)
    assert int(lines[-1]) <= int(baseline.stdout) + 1  # the listing's own descriptor at most


@pytest.mark.parametrize("overrides", [
    {},
    {"listeners": "PLAINTEXT://127.0.0.1:0", "log_dirs": "/var/lib/broker"},
    {"log.dirs": "a,b", "num_partitions": 3, "auto.create.topics.enable": "false"},
])
def test_the_embedded_config_is_the_defaults_evolved_by_the_overrides(
        overrides: dict[str, object]) -> None:
    """``open_broker(**overrides)`` builds its config without validating the defaults first:
    the same config, originals and origins as ``BrokerConfig().evolve(**overrides)``."""
    built = as_config(None, overrides)
    evolved = BrokerConfig().evolve(**overrides)
    assert built == evolved
    assert built.originals == evolved.originals
    assert built.origins == evolved.origins


def test_an_unknown_embedded_override_is_named() -> None:
    with pytest.raises(ConfigError, match="override: unknown config key 'no_such_key'"):
        as_config(None, {"no_such_key": 1})
