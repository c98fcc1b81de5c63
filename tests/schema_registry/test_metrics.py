"""The registry's and the REST proxy's requests on the broker's /metrics, per endpoint, under
the names the JMX exporter gives Confluent's Jersey metrics."""

from __future__ import annotations

import re

import httpx

from trio_broker.testing import ThreadedBroker


def _samples(broker: ThreadedBroker, family: str) -> dict[str, float]:
    assert broker.broker is not None
    state = broker.broker.state
    text = broker.call(lambda: state.metrics.expose().decode())
    return {labels: float(value) for labels, value in
            re.findall(rf"^{family}\{{(.*?)\}} (\S+)$", text, re.M)}


def test_requests_errors_and_latency_per_endpoint(kafka_broker: ThreadedBroker) -> None:
    prefix = "kafka_schema_registry_jersey_metrics"
    before = _samples(kafka_broker, f"{prefix}_request_total")
    with httpx.Client(base_url=kafka_broker.schema_registry_url or "") as registry:
        for _ in range(3):
            assert registry.get("/subjects").status_code == 200
        assert registry.get("/subjects/no-such-subject/versions").status_code == 404
        assert registry.get("/no/such/path").status_code == 404
    after = _samples(kafka_broker, f"{prefix}_request_total")
    listed = 'endpoint="GET /subjects"'
    assert after[listed] - before.get(listed, 0) == 3
    versions = 'endpoint="GET /subjects/{subject}/versions"'
    assert after[versions] - before.get(versions, 0) == 1
    errors = _samples(kafka_broker, f"{prefix}_request_error_total")
    assert errors[f'{versions},http_status_code="404"'] >= 1
    assert errors['endpoint="unmatched",http_status_code="404"'] >= 1
    latency = _samples(kafka_broker, f"{prefix}_request_latency_seconds_count")
    assert latency[listed] >= 3

    with httpx.Client(base_url=kafka_broker.rest_proxy_url) as rest:
        assert rest.get("/v3/clusters").status_code == 200
    proxied = _samples(kafka_broker, "kafka_rest_jersey_metrics_request_total")
    assert proxied['endpoint="GET /v3/clusters"'] >= 1
