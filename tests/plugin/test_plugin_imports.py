"""pytest loads the plugin in every run of a project that installed the package, broker or not:
loading it imports neither the broker nor the test double nor Trio; a fixture's first use does."""

from __future__ import annotations

import subprocess
import sys
import textwrap

HEAVY = ("trio", "trio_broker.broker.lifecycle", "trio_broker.broker.server.state",
         "trio_broker.testing", "trio_broker.testing.threaded", "trio_broker.testing.cluster")


def loaded_after(code: str) -> list[str]:
    probe = code + textwrap.dedent("""
        import sys
        print(" ".join(sorted(m for m in sys.modules if m in set(sys.argv[1:]))))
    """)
    done = subprocess.run([sys.executable, "-c", probe, *HEAVY], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_loading_the_plugin_imports_no_broker() -> None:
    assert loaded_after("import pytest\nimport trio_broker.pytest_plugin\n") == []


def test_its_names_still_import_on_first_use() -> None:
    loaded = loaded_after("from trio_broker.pytest_plugin import ThreadedCluster, open_broker\n")
    assert {"trio_broker.broker.lifecycle", "trio_broker.testing"} <= set(loaded)
