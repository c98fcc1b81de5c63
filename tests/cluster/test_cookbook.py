"""Every example of the test-cluster cookbook in docs/testing.md, run as the reader would."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_broker.testing import TEST_DEFAULTS, ThreadedCluster

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def _cookbook() -> list[tuple[int, str]]:
    """(line, code) of each python block between "### Cookbook" and the next heading."""
    lines = DOC.read_text().splitlines()
    start = lines.index("### Cookbook")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("### "))
    out, i = [], start
    while i < end:
        if lines[i].strip() == "```python":
            j = lines.index("```", i + 1)
            out.append((i + 2, "\n".join(lines[i + 1:j])))
            i = j
        i += 1
    return out


EXAMPLES = _cookbook()


def test_the_cookbook_has_its_four_recipes() -> None:
    names = [next(n for n in _test_names(code)) for _, code in EXAMPLES]
    assert names == ["test_leader_failover", "test_broker_restart",
                     "test_retriable_and_fatal_errors", "test_slow_broker"]


def _test_names(code: str) -> list[str]:
    return [line.split("(")[0].split()[-1] for line in code.splitlines()
            if line.startswith(("def test_", "async def test_"))]


@pytest.mark.parametrize(("line", "code"), EXAMPLES, ids=[str(n) for n, _ in EXAMPLES])
def test_cookbook_example(line: int, code: str, tmp_path: Path) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(code, f"{DOC.name}:{line}", "exec"), namespace)
    [name] = _test_names(code)
    fn = namespace[name]
    if inspect.iscoroutinefunction(fn):
        trio.run(fn)
        return
    settings: dict[str, Any] = {}
    for mark in getattr(fn, "pytestmark", []):
        if mark.name == "broker_config":
            settings.update(mark.kwargs)
    brokers = settings.pop("brokers", 3)
    cluster = ThreadedCluster(brokers, **{**TEST_DEFAULTS, "log_dirs": str(tmp_path),
                                          **settings}).start()
    try:
        fn(cluster)
    finally:
        cluster.stop()
