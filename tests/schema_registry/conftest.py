"""What the registry's tests share: an HTTP client of the ``kafka_broker`` fixture's registry."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from trio_broker.testing import ThreadedBroker

from .test_rest import CT


@pytest.fixture
def http(kafka_broker: ThreadedBroker) -> Iterator[httpx.Client]:
    """The registry's REST API with Confluent's content type on every request."""
    assert kafka_broker.schema_registry_url is not None
    with httpx.Client(base_url=kafka_broker.schema_registry_url, headers=CT) as client:
        yield client
