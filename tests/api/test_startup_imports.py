"""What a broker imports to start, checked: the parts only some brokers or some requests need wait
for their first use (docs/benchmarks.md, start-up), and every deferred handler still loads."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap

from trio_broker.apis import registry

#: imported by the first request, scrape or setting that needs them, not by a start
DEFERRED = ("trio_broker.apis.admin", "trio_broker.apis.configs", "trio_broker.apis.describe",
            "trio_broker.apis.acls", "trio_broker.apis.quotas", "trio_broker.apis.cluster",
            "trio_broker.apis.scram", "trio_broker.apis.telemetry", "trio_broker.apis.records",
            "trio_broker.apis.consumer_groups", "trio_broker.apis.sasl",
            "trio_broker.config.describe", "trio_broker.network.metrics_http",
            "trio_broker.security.sasl",
            "trio_broker.security.credentials", "trio_broker.security.tls", "cryptography", "re2",
            "importlib.metadata", "crc32c", "prometheus_client")

_START = textwrap.dedent("""
    import sys, tempfile
    import trio
    from trio_broker import open_broker

    async def main():
        with tempfile.TemporaryDirectory() as d:
            async with open_broker(log_dirs=d) as broker:
                assert broker.port
    trio.run(main)
    print(" ".join(sorted(m for m in sys.modules if m in set(sys.argv[1:]))))
""")


def test_a_start_imports_none_of_the_deferred_parts() -> None:
    done = subprocess.run([sys.executable, "-c", _START, *DEFERRED], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []


def test_every_deferred_handler_loads_and_is_its_apis() -> None:
    deferred = {key: h for key, h in registry.HANDLERS.items()
                if isinstance(h, registry.OnFirstUse)}
    assert len(deferred) >= 20
    for key, entry in deferred.items():
        handler = entry.resolve()
        assert inspect.iscoroutinefunction(handler), entry
        assert handler.__module__.startswith("trio_broker.apis."), entry
        assert entry.resolve() is handler
        assert int(entry.key) == key
