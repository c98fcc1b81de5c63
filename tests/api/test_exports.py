"""The public API a Trio app embeds (pinned, as trio pins its own exports)."""

from __future__ import annotations

import subprocess
import sys

import trio_broker


def test_public_names():
    assert sorted(trio_broker.__all__) == ["Broker", "BrokerConfig", "ConfigError",
                                           "load_config", "open_broker", "serve"]
    for name in trio_broker.__all__:
        assert getattr(trio_broker, name) is not None


def test_importing_the_package_imports_no_broker_or_spark():
    code = ("import sys, trio_broker; print(any(m in sys.modules for m in "
            "('trio', 'pyspark', 'trio_broker.broker.lifecycle')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"
