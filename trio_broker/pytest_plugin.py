"""pytest plugin: a fresh broker per test, in milliseconds, with no JVM and no Docker.

Fixtures:
- ``trio_broker``: for Trio tests (pytest-trio). A broker in the test's own event loop, on port 0,
  with its data in ``tmp_path``; yields the ``Broker`` handle (``.bootstrap_servers``).
- ``kafka_broker``: for synchronous clients (confluent-kafka, kafka-python) or asyncio ones. The
  broker runs in a background thread with its own Trio loop, shared by the whole session unless a
  test asks for its own config with ``@pytest.mark.broker_config(...)``. ``unique_topic`` gives
  each test fresh topic names so a shared broker never leaks state between tests. The session's
  broker serves Confluent's REST Proxy API too, at ``kafka_broker.rest_proxy_url`` (a broker of
  its own serves it with ``broker_config(rest_proxy_listener="http://127.0.0.1:0")``).

  ``kafka_broker`` serves a Schema Registry on an ephemeral 127.0.0.1 port:
  ``kafka_broker.schema_registry_url`` is the URL for confluent-kafka's ``SchemaRegistryClient``
  (docs/schema-registry.md); ``broker_config(schema_registry_listener="")`` turns it off, and
  ``broker_config(schema_registry_listener="http://127.0.0.1:0")`` gives ``trio_broker`` one.

- ``kafka_cluster``: a ``ThreadedCluster`` of ``brokers`` nodes (3 unless
  ``@pytest.mark.broker_config(brokers=N, ...)`` says), fresh for each test, with its controls
  (``stop_broker``, ``move_leader``, ``inject``...) and one Schema Registry for the cluster
  (``kafka_cluster.schema_registry_url``; ``schema_registry_listener=""`` turns it off). Trio
  tests use ``open_cluster`` directly (``schema_registry_listener="http://127.0.0.1:0"`` gives
  it one).

All apply ``@pytest.mark.broker_config(num_partitions=3, ...)`` (Kafka key names with
underscores, or dotted names as a dict: ``broker_config(**{"num.partitions": 3})``). Test brokers
default to ``group.initial.rebalance.delay.ms=0`` so consumer groups form at once.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .lazy_names import lazy_names

if TYPE_CHECKING:
    from .broker.lifecycle import Broker as Broker
    from .broker.lifecycle import open_broker as open_broker
    from .testing import ThreadedBroker as ThreadedBroker
    from .testing import ThreadedCluster as ThreadedCluster
    from .testing import open_cluster as open_cluster

# pytest loads this plugin in every run of every project that installed the package; the broker
# is imported by the first test that asks for one of its fixtures, not by the plugin.
__getattr__, __dir__ = lazy_names(__name__, {
    "Broker": "broker.lifecycle", "open_broker": "broker.lifecycle",
    "ThreadedBroker": "testing", "ThreadedCluster": "testing", "open_cluster": "testing"},
    relative_to=__package__)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "broker_config(**overrides): config overrides for the broker fixtures")


#: ``kafka_broker`` serves a Schema Registry too (``.schema_registry_url``); its topic is made
#: by its first write, so a test that never uses it sees no extra topic. ``trio_broker`` starts
#: one only when asked (``broker_config(schema_registry_listener="http://127.0.0.1:0")``): its
#: HTTP server would add tens of milliseconds to every Trio test's broker start.
REGISTRY = {"schema_registry_listener": "http://127.0.0.1:0"}


def _overrides(request: pytest.FixtureRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers("broker_config"))):
        out.update({k.replace(".", "_"): v for k, v in marker.kwargs.items()})
    return out


@pytest.fixture
async def trio_broker(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Broker]:
    """A broker running in this test's Trio loop, stopped (gracefully) after the test."""
    from .broker.lifecycle import open_broker
    from .testing import TEST_DEFAULTS

    settings = {**TEST_DEFAULTS, "log_dirs": str(tmp_path / "broker-data"), **_overrides(request)}
    async with open_broker(**settings) as broker:
        yield broker


@pytest.fixture(scope="session")
def _kafka_broker_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedBroker]:
    from .testing import TEST_DEFAULTS, ThreadedBroker

    data = tmp_path_factory.mktemp("kafka-broker")
    # the session's broker serves the Schema Registry and the REST proxy too:
    # ``kafka_broker.schema_registry_url``, ``kafka_broker.rest_proxy_url``
    broker = ThreadedBroker(**{**TEST_DEFAULTS, **REGISTRY, "log_dirs": str(data),
                               "rest_proxy_listener": "http://127.0.0.1:0"}).start()
    yield broker
    broker.stop()


@pytest.fixture
def kafka_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ThreadedBroker]:
    """A broker in a background thread: the session's, or a fresh one for ``broker_config``."""
    from .testing import TEST_DEFAULTS, ThreadedBroker

    overrides = _overrides(request)
    if not overrides:
        yield request.getfixturevalue("_kafka_broker_session")
        return
    broker = ThreadedBroker(**{**TEST_DEFAULTS, **REGISTRY,
                               "log_dirs": str(tmp_path / "broker-data"), **overrides}).start()
    try:
        yield broker
    finally:
        broker.stop()


_topic_counter = itertools.count()


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``unique_topic("orders")`` -> a topic name no other test uses."""
    run = uuid.uuid4().hex[:6]

    def make(prefix: str = "t") -> str:
        base = "".join(c if c.isalnum() or c in "._-" else "-" for c in request.node.name)
        return f"{prefix}-{base[:60]}-{run}-{next(_topic_counter)}"

    return make


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ThreadedCluster]:
    """A test cluster in a background thread; ``broker_config(brokers=N, ...)`` sets it up."""
    from .testing import TEST_DEFAULTS, ThreadedCluster

    overrides = _overrides(request)
    brokers = int(overrides.pop("brokers", 3))
    auto_failover = bool(overrides.pop("auto_failover", True))
    cluster = ThreadedCluster(brokers, auto_failover=auto_failover, **{
        **TEST_DEFAULTS, **REGISTRY, "log_dirs": str(tmp_path / "cluster-data"),
        **overrides}).start()
    try:
        yield cluster
    finally:
        cluster.stop()


__all__ = ["ThreadedBroker", "ThreadedCluster", "kafka_broker", "kafka_cluster",
           "open_broker", "open_cluster", "trio_broker", "unique_topic"]
