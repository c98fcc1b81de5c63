"""The client and the broker draw from generators of their own, never from the global ``random``.

The global ``random`` state belongs to the application: a seeded simulation, or a Hypothesis run
(which fails a draw when that state moves under it). A broker's REST proxy refreshes its
metadata in the background, a producer picks partitions for keyless records, a reconnect waits
a jittered time: none of them may move it.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

import trio_broker
from trio_broker.client import open_producer
from trio_broker.client.core.backoff import ExponentialBackoff
from trio_broker.testing import ThreadedBroker

PACKAGE = str(Path(trio_broker.__file__).parent)
#: the global ``random`` functions a library would call
DRAWS = ("random", "choice", "choices", "shuffle", "sample", "uniform", "randint", "randrange",
         "getrandbits", "randbytes", "gauss", "expovariate")


def _called_from_the_package() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.startswith(PACKAGE):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


@pytest.fixture
def package_draws(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The global ``random`` functions called from the package's code while the test runs."""
    calls: list[str] = []

    def recording(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def draw(*args: Any, **kwargs: Any) -> Any:
            if _called_from_the_package():
                calls.append(name)
            return original(*args, **kwargs)
        return draw

    for name in DRAWS:
        monkeypatch.setattr(random, name, recording(name, getattr(random, name)))
    return calls


def test_keyless_records_metadata_and_backoff_leave_the_global_random_alone(
        kafka_broker: ThreadedBroker, unique_topic: Callable[[str], str],
        package_draws: list[str]) -> None:
    topic = unique_topic("keyless")
    with httpx.Client(base_url=kafka_broker.rest_proxy_url, timeout=30) as rest:
        cluster = rest.get("/v3/clusters").json()["data"][0]["cluster_id"]
        created = rest.post(f"/v3/clusters/{cluster}/topics",
                            json={"topic_name": topic, "partitions_count": 3})
        assert created.status_code == 201, created.text
        for i in range(3):  # keyless, through the REST proxy's own client and partitioner
            sent = rest.post(f"/v3/clusters/{cluster}/topics/{topic}/records",
                             json={"value": {"type": "STRING", "data": f"rest {i}"}})
            assert sent.status_code == 200, sent.text
            assert sent.json()["error_code"] == 200

    async def produce() -> list[int]:
        async with open_producer(kafka_broker.bootstrap_servers) as producer:
            return [(await producer.send(topic, f"trio {i}".encode())).partition
                    for i in range(20)]

    partitions = trio.run(produce)
    assert set(partitions) <= {0, 1, 2}
    waits = [ExponentialBackoff(100, 1000).backoff_ms(2) for _ in range(20)]
    assert len(set(waits)) > 1  # jittered ...
    assert all(320 <= w <= 480 for w in waits)  # ... +/-20 % around 400 ms
    assert package_draws == []
