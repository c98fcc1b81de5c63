"""The registry's and the REST proxy's requests on the broker's /metrics, per endpoint, under
the names the JMX exporter gives Confluent's Jersey metrics."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import httpx

from trio_broker.testing import ThreadedBroker


def _samples(broker: ThreadedBroker, family: str) -> dict[str, float]:
    assert broker.broker is not None
    state = broker.broker.state
    text = broker.call(lambda: state.metrics.expose().decode())
    return {labels: float(value) for labels, value in
            re.findall(rf"^{family}\{{(.*?)\}} (\S+)$", text, re.M)}


def _samples_once(broker: ThreadedBroker, family: str,
                  ready: Callable[[dict[str, float]], bool]) -> dict[str, float]:
    """``_samples`` once ``ready`` says they are all there: a request is counted after its
    answer's last byte is sent, so the client may have read it a moment before (2 s at most)."""
    deadline = time.monotonic() + 2
    while not ready(samples := _samples(broker, family)) and time.monotonic() < deadline:
        time.sleep(0.01)
    return samples


def test_requests_errors_and_latency_per_endpoint(kafka_broker: ThreadedBroker) -> None:
    prefix = "kafka_schema_registry_jersey_metrics"
    before = _samples(kafka_broker, f"{prefix}_request_total")
    with httpx.Client(base_url=kafka_broker.schema_registry_url or "") as registry:
        for _ in range(3):
            assert registry.get("/subjects").status_code == 200
        assert registry.get("/subjects/no-such-subject/versions").status_code == 404
        assert registry.get("/no/such/path").status_code == 404
    listed = 'endpoint="GET /subjects"'
    versions = 'endpoint="GET /subjects/{subject}/versions"'
    after = _samples_once(kafka_broker, f"{prefix}_request_total", lambda now: (
        now.get(listed, 0) - before.get(listed, 0) >= 3
        and now.get(versions, 0) - before.get(versions, 0) >= 1))
    assert after[listed] - before.get(listed, 0) == 3
    assert after[versions] - before.get(versions, 0) == 1
    unmatched = 'endpoint="unmatched",http_status_code="404"'
    errors = _samples_once(kafka_broker, f"{prefix}_request_error_total",
                           lambda now: unmatched in now)
    assert errors[f'{versions},http_status_code="404"'] >= 1
    assert errors[unmatched] >= 1
    latency = _samples(kafka_broker, f"{prefix}_request_latency_seconds_count")
    assert latency[listed] >= 3

    with httpx.Client(base_url=kafka_broker.rest_proxy_url) as rest:
        assert rest.get("/v3/clusters").status_code == 200
    proxied = _samples_once(kafka_broker, "kafka_rest_jersey_metrics_request_total",
                            lambda now: 'endpoint="GET /v3/clusters"' in now)
    assert proxied['endpoint="GET /v3/clusters"'] >= 1
