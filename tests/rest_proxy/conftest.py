"""The REST proxy's tests: plain HTTP clients (httpx) against the session broker's proxy."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from trio_broker.testing import ThreadedBroker


@pytest.fixture
def rest(kafka_broker: ThreadedBroker) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=kafka_broker.rest_proxy_url, timeout=30) as client:
        yield client


@pytest.fixture
def cluster(rest: httpx.Client) -> str:
    """``/v3/clusters/{cluster_id}`` of the proxy's one cluster."""
    response = rest.get("/v3/clusters")
    assert response.status_code == 200
    return f"/v3/clusters/{response.json()['data'][0]['cluster_id']}"
