"""Import paths that moved keep working for one release, each with a DeprecationWarning.

Each check runs in a fresh interpreter: an old path imported once stays in ``sys.modules``,
so a second import in the same process would warn no more.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from trio_broker import _moved

#: (old import statement, the new module the old name must be, a name read through it)
OLD_PATHS = [
    ("import trio_broker.blocking_client as m", "trio_broker.client.blocking", "BlockingClient"),
    ("from trio_broker.blocking_client import client as m", "trio_broker.client.blocking.client",
     "BlockingClient"),
    ("import trio_broker.client_core as m", "trio_broker.client.core", "__doc__"),
    ("import trio_broker.client.consumer as m", "trio_broker.client.trio.consumer", "Consumer"),
    ("import trio_broker.client.producer as m", "trio_broker.client.trio.producer", "Producer"),
    ("import trio_broker.client.admin as m", "trio_broker.client.trio.admin", "Admin"),
    ("import trio_broker.config as m", "trio_broker.broker.config", "BrokerConfig"),
    ("import trio_broker.log as m", "trio_broker.broker.storage", "LogManager"),
    ("import trio_broker.log.log as m", "trio_broker.broker.storage.log", "Log"),
    ("import trio_broker.apis.state as m", "trio_broker.broker.server.state", "BrokerState"),
    ("import trio_broker.apis.registry as m", "trio_broker.broker.apis.registry", "HANDLERS"),
    ("import trio_broker.cluster as m", "trio_broker.testing", "open_cluster"),
    ("import trio_broker.cluster.threaded as m", "trio_broker.testing.threaded",
     "ThreadedCluster"),
    ("import trio_broker.http.control as m", "trio_broker.testing.control", "serve_control"),
    ("import trio_broker.security as m", "trio_broker.broker.security", "__doc__"),
    ("import trio_broker.broker.coordinator.share.group_configs as m",
     "trio_broker.broker.coordinator.group_configs", "GroupConfigs"),
    ("import trio_broker.spark._classes as m", "trio_broker.spark._class_archive",
     "ClassArchive"),
]


@pytest.mark.parametrize(("statement", "new", "name"), OLD_PATHS,
                         ids=[p[0].split()[1] for p in OLD_PATHS])
def test_an_old_path_gives_the_new_module_and_warns(statement: str, new: str,
                                                    name: str) -> None:
    code = textwrap.dedent(f"""
        import importlib, sys, warnings
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as caught:
            {statement}
        new = importlib.import_module({new!r})
        assert m is new, (m, new)
        assert getattr(m, {name!r}) is not None
        assert m.__spec__.name == {new!r}, m.__spec__.name
        messages = [str(w.message) for w in caught if w.category is DeprecationWarning]
        # the warning names where the old path (or the old package it is in) went
        moved_to = [text.split(" moved to ")[1].split(";")[0] for text in messages]
        assert any({new!r}.startswith(target) for target in moved_to), messages
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


def test_the_lifecycle_names_of_trio_broker_broker_warn() -> None:
    code = textwrap.dedent("""
        import warnings
        warnings.simplefilter("error")
        import trio_broker.broker
        from trio_broker.broker import lifecycle
        try:
            trio_broker.broker.serve
        except DeprecationWarning as warning:
            assert "trio_broker.broker.lifecycle.serve" in str(warning), warning
        else:
            raise AssertionError("no warning")
        warnings.simplefilter("ignore")
        assert trio_broker.broker.serve is lifecycle.serve
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


def test_an_old_path_runs_with_python_m() -> None:
    done = subprocess.run([sys.executable, "-W", "always", "-m",
                           "trio_broker.security.credentials", "--help"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "usage" in done.stdout.lower()
    assert "trio_broker.security moved to trio_broker.broker.security" in done.stderr


def test_new_paths_do_not_warn() -> None:
    code = textwrap.dedent("""
        import warnings
        warnings.simplefilter("error")
        import trio_broker.client.blocking, trio_broker.client.trio.consumer
        import trio_broker.broker.lifecycle, trio_broker.testing, trio_broker.pytest_plugin
        from trio_broker.client import Producer, Consumer, Admin
        from trio_broker.client.blocking import BlockingClient
        from trio_broker.testing import ThreadedBroker, ThreadedCluster, open_cluster
        from trio_broker import serve, open_broker, BrokerConfig
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


def test_every_old_path_names_a_module_that_exists() -> None:
    import importlib.util

    for old, new in _moved.MOVED.items():
        target = f"trio_broker.{new}"
        assert importlib.util.find_spec(target) is not None, (old, target)
        assert _moved.new_name(f"trio_broker.{old}") == target
    assert _moved.new_name("trio_broker.protocol.batch") is None
    assert _moved.new_name("trio_broker.log.segment") == "trio_broker.broker.storage.segment"
