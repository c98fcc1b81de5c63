"""The cluster id: a Kafka ``Uuid`` chosen once per data directory, kept in each log dir's
meta.properties as Kafka writes it, and what clients see in Metadata and DescribeCluster."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from pathlib import Path

import javaproperties
import pytest
import trio
from confluent_kafka.admin import AdminClient

from tests.broker_process import BrokerProcess
from trio_broker.broker.lifecycle import open_broker
from trio_broker.broker.storage.meta_properties import (
    MetaPropertiesError,
    ensure_meta_properties,
    random_uuid,
)
from trio_broker.testing import ThreadedBroker, ThreadedCluster, open_cluster

TIMEOUT_S = 15
KAFKA_UUID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}")


def read_properties(path: Path) -> dict[str, str]:
    """The stamp as any Java properties reader sees it."""
    props: dict[str, str] = javaproperties.loads(path.read_text(encoding="latin-1"))
    return props


def _cluster_id_seen_by_librdkafka(bootstrap: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_cluster().result(TIMEOUT_S).cluster_id
    listed = admin.list_topics(timeout=TIMEOUT_S).cluster_id
    assert described == listed
    return str(described)


def test_random_uuid_is_kafkas_form():
    ids = {random_uuid() for _ in range(200)}
    assert len(ids) == 200
    for text in ids:
        assert KAFKA_UUID.fullmatch(text), text
        raw = base64.urlsafe_b64decode(text + "==")
        assert len(raw) == 16
        assert raw[6] >> 4 == 4  # the version nibble of a random UUID


def test_meta_properties_written_as_kafka_writes_it(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    cluster_id = ensure_meta_properties(dirs, 3)
    props = [read_properties(d / "meta.properties") for d in dirs]
    for p in props:
        assert set(p) == {"version", "cluster.id", "node.id", "directory.id"}
        assert (p["version"], p["cluster.id"], p["node.id"]) == ("1", cluster_id, "3")
        assert KAFKA_UUID.fullmatch(p["directory.id"])
    assert props[0]["directory.id"] != props[1]["directory.id"]
    text = (dirs[0] / "meta.properties").read_text()
    assert text.startswith("#\n#")  # Java's Properties.store header
    # read back: the same id, nothing rewritten
    before = [(d / "meta.properties").read_bytes() for d in dirs]
    assert ensure_meta_properties(dirs, 3) == cluster_id
    assert [(d / "meta.properties").read_bytes() for d in dirs] == before
    # a new dir added to the broker joins the same cluster
    dirs.append(tmp_path / "c")
    dirs[-1].mkdir()
    assert ensure_meta_properties(dirs, 3) == cluster_id
    assert read_properties(dirs[-1] / "meta.properties")["cluster.id"] == cluster_id


def test_other_node_or_cluster_refused_with_kafkas_messages(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    first = ensure_meta_properties([a], 1)
    with pytest.raises(MetaPropertiesError, match=(
            r"^Stored node id 1 doesn't match previous node id 2 in .*meta.properties\. If you "
            "moved your data, make sure your configured node id matches")):
        ensure_meta_properties([a], 2)
    second = ensure_meta_properties([b], 1)
    with pytest.raises(MetaPropertiesError, match=(
            rf"^Invalid cluster.id in: .*meta.properties\. Expected {first}, but read {second}")):
        ensure_meta_properties([a, b], 1)
    with pytest.raises(MetaPropertiesError, match=f"Expected other, but read {first}"):
        ensure_meta_properties([a], 1, "other")


def test_two_starts_over_one_dir_keep_the_id_and_two_dirs_differ(tmp_path):
    seen = []
    for data in ("one", "one", "two"):
        broker = ThreadedBroker(log_dirs=str(tmp_path / data),
                                listeners="PLAINTEXT://127.0.0.1:0").start()
        try:
            seen.append(_cluster_id_seen_by_librdkafka(broker.bootstrap_servers))
            assert broker.broker is not None
            assert seen[-1] == broker.broker.state.cluster_id
        finally:
            broker.stop()
    assert seen[0] == seen[1] != seen[2]
    assert all(KAFKA_UUID.fullmatch(x) for x in seen)
    stamped = read_properties(tmp_path / "one" / "meta.properties")
    assert stamped["cluster.id"] == seen[0]


def test_configured_cluster_id_is_stamped_and_kept(tmp_path):
    async def main() -> None:
        for _ in range(2):
            async with open_broker(log_dirs=str(tmp_path), cluster_id="MkU3OEVBNTcwNTJENDM2Qk",
                                   listeners="PLAINTEXT://127.0.0.1:0") as broker:
                assert broker.state.cluster_id == "MkU3OEVBNTcwNTJENDM2Qk"
        assert read_properties(tmp_path / "meta.properties")["cluster.id"] == (
            "MkU3OEVBNTcwNTJENDM2Qk")

    trio.run(main)


def test_test_cluster_nodes_share_one_id(tmp_path):
    cluster = ThreadedCluster(3, log_dirs=str(tmp_path)).start()
    try:
        assert cluster.cluster is not None
        ids = {_cluster_id_seen_by_librdkafka(f"{b.host}:{b.port}")
               for b in cluster.cluster.brokers}
        assert ids == {cluster.cluster.state.cluster_id}
    finally:
        cluster.stop()
    assert read_properties(tmp_path / "meta.properties")["cluster.id"] == ids.pop()

    async def restarted() -> str:
        async with open_cluster(3, log_dirs=str(tmp_path)) as again:
            return again.state.cluster_id

    assert trio.run(restarted) == read_properties(tmp_path / "meta.properties")["cluster.id"]


def test_kill_and_restart_keep_the_id(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        first = _cluster_id_seen_by_librdkafka(broker.bootstrap_servers)
        broker.kill()
        broker.start()
        assert _cluster_id_seen_by_librdkafka(broker.bootstrap_servers) == first
    finally:
        broker.kill()


def test_serve_over_another_nodes_dir_refuses_in_one_line(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    ensure_meta_properties([data], 7)
    done = subprocess.run(
        [sys.executable, "-m", "trio_broker", "serve", "--override", f"log.dirs={data}",
         "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "node.id=1"],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "Stored node id 7 doesn't match previous node id 1" in last, done.stderr
    assert "Traceback" not in done.stderr
