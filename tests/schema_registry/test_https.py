"""The Schema Registry and the REST proxy on ``https://`` listeners: the broker's own certificate
(``ssl.certfile``), checked by the clients users run against the CA that signed it."""

from __future__ import annotations

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker


def test_registry_and_proxy_serve_https_with_the_brokers_certificate(tmp_path, tls_files):
    broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                               "ssl_certfile": str(tls_files.server_pem),
                               "schema_registry_listener": "https://127.0.0.1:0",
                               "rest_proxy_listener": "https://127.0.0.1:0"}).start()
    try:
        registry_url, proxy_url = broker.schema_registry_url, broker.rest_proxy_url
        assert registry_url is not None
        assert registry_url.startswith("https://")
        assert proxy_url.startswith("https://")
        client = SchemaRegistryClient({"url": registry_url,
                                       "ssl.ca.location": str(tls_files.ca_pem)})
        schema_id = client.register_schema("tls-value", Schema('"string"', "AVRO"))
        assert client.get_schema(schema_id).schema_str == '"string"'
        with httpx.Client(verify=str(tls_files.ca_pem), timeout=30) as http:
            clusters = http.get(f"{proxy_url}/v3/clusters").json()
            assert clusters["data"][0]["cluster_id"] == broker.broker.state.cluster_id
            assert http.get(f"{registry_url}/subjects").json() == ["tls-value"]
        # a client that does not trust the CA refuses the certificate; plain HTTP gets nothing
        with httpx.Client(timeout=10) as untrusting:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                untrusting.get(f"{registry_url}/subjects")
            with pytest.raises(httpx.HTTPError):
                untrusting.get(proxy_url.replace("https://", "http://") + "/v3/clusters")
    finally:
        broker.stop()

