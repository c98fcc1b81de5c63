"""Ids, versions and GUIDs come back from ``_schemas`` after a clean restart and after kill -9,
each context's ids as its own."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.broker_process import BrokerProcess, free_port
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

CT = {"content-type": "application/vnd.schemaregistry.v1+json"}


def schema(n: int) -> dict[str, str]:
    return {"schema": json.dumps({"type": "record", "name": "R", "fields": [
        {"name": f"f{i}", "type": "int", "default": 0} for i in range(n)]})}


def register_some(url: str) -> dict[str, object]:
    with httpx.Client(base_url=url, headers=CT) as http:
        for n in range(1, 4):
            assert http.post("/subjects/a/versions", json=schema(n)).status_code == 200
        assert http.post("/subjects/b/versions", json=schema(2)).status_code == 200
        # another context numbers from 1 again
        for n in (5, 6):
            assert http.post("/subjects/:.linked:a/versions", json=schema(n)).json()["id"] == (
                n - 4)
        http.delete("/subjects/a/versions/1")
        http.put("/config/b", json={"compatibility": "FULL",
                                    "defaultMetadata": {"properties": {"owner": "o"}}})
        return snapshot(http)


def snapshot(http: httpx.Client) -> dict[str, object]:
    return {"subjects": http.get("/subjects?deleted=true").json(),
            "a": [http.get(f"/subjects/a/versions/{v}?deleted=true").json() for v in (1, 2, 3)],
            "b": http.get("/subjects/b/versions/latest").json(),
            "b-config": http.get("/config/b").json(),
            "a-live": http.get("/subjects/a/versions").json(),
            "linked": [http.get(f"/schemas/ids/{i}?subject=:.linked:a").json() for i in (1, 2)],
            "contexts": http.get("/contexts").json(),
            "guids": [(http.get(f"/schemas/guids/{guid}").json(),
                       http.get(f"/schemas/guids/{guid}/ids").json())
                      for guid in guids(http)]}


def guids(http: httpx.Client) -> list[str]:
    """The GUIDs of b's schema (also a's second) and of one only the linked context holds."""
    found = [http.get("/subjects/b/versions/latest").json()["guid"],
             http.get("/schemas/ids/2?subject=:.linked:a").json()["guid"]]
    assert len(set(found)) == 2
    return found


def after_restart(url: str, before: dict[str, object]) -> None:
    with httpx.Client(base_url=url, headers=CT) as http:
        assert snapshot(http) == before
        # a new schema gets the next id, never one already given
        new_id = http.post("/subjects/c/versions", json=schema(7)).json()["id"]
        assert new_id == 4
        assert http.post("/contexts/.linked/subjects/c/versions", json=schema(7)).json()[
            "id"] == 3


def test_ids_survive_a_clean_restart(tmp_path: Path) -> None:
    settings = {**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                "schema_registry_listener": "http://127.0.0.1:0"}
    broker = ThreadedBroker(**settings).start()
    try:
        assert broker.schema_registry_url is not None
        before = register_some(broker.schema_registry_url)
    finally:
        broker.stop()
    broker = ThreadedBroker(**settings).start()
    try:
        assert broker.schema_registry_url is not None
        after_restart(broker.schema_registry_url, before)
    finally:
        broker.stop()


@pytest.mark.timeout(120)
def test_ids_survive_kill_9(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = BrokerProcess(tmp_path / "data", f"schema.registry.listener={url}").start()
    try:
        before = register_some(url)
        process.kill()
        process.start()
        after_restart(url, before)
    finally:
        process.kill()
