"""Every example in docs/rest.md, run with curl against a broker serving the REST proxy."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.docs.test_examples import ROOT, run_examples
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker


def test_every_rest_md_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                               "rest_proxy_listener": "http://127.0.0.1:0"}).start()
    try:
        url = broker.rest_proxy_url
        cluster_id = httpx.get(f"{url}/v3/clusters").json()["data"][0]["cluster_id"]
        # what the reader's shell keeps from the page's first command
        monkeypatch.setenv("CLUSTER", cluster_id)
        address = url.removeprefix("http://")
        assert run_examples(ROOT / "docs" / "rest.md", tmp_path,
                            {"localhost:8082": address}) >= 18
    finally:
        broker.stop()
