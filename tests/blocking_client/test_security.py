"""The blocking client on the broker's TLS and SASL listeners: every mechanism, a password
hashed as typed, a client certificate, and the ways a login goes wrong."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.security_files import LIGATURE_PASSWORD, TlsFiles, password
from trio_broker.client.blocking import BlockingClient, KafkaConnectionError, TopicPartition
from trio_broker.client.core import errors
from trio_broker.protocol.records import build_batch
from trio_broker.testing import ThreadedBroker

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@pytest.fixture(scope="module")
def sasl_ssl_broker(tmp_path_factory, tls_files: TlsFiles, users_file: Path,
                    ) -> Iterator[ThreadedBroker]:
    broker = ThreadedBroker(listeners="SASL_SSL://127.0.0.1:0",
                            log_dirs=str(tmp_path_factory.mktemp("bc-sasl-ssl")),
                            ssl_certfile=str(tls_files.server_pem),
                            sasl_credentials_file=str(users_file),
                            sasl_enabled_mechanisms="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                            connection_failed_authentication_delay_ms=0,
                            shutdown_timeout_ms=1000).start()
    yield broker
    broker.stop()


def sasl(tls: TlsFiles, mechanism: str, user: str = "alice", pw: str | None = None,
         ) -> dict[str, Any]:
    return {"security.protocol": "SASL_SSL", "ssl.ca.location": str(tls.ca_pem),
            "sasl.mechanism": mechanism, "sasl.username": user,
            "sasl.password": password(user) if pw is None else pw}


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_every_mechanism_over_tls(sasl_ssl_broker, tls_files, unique_topic, mechanism):
    topic = sasl_ssl_broker.create_topic(unique_topic("sec"))
    tp = TopicPartition(topic, 0)
    with BlockingClient(sasl_ssl_broker.bootstrap_servers,
                        config=sasl(tls_files, mechanism)) as client:
        assert client.produce({tp: build_batch([(None, b"secret")])}, acks=-1)[tp].error == 0
        fetched = client.fetch(tp, 0, max_bytes=1 << 20)
        assert fetched.high_watermark == 1


def test_the_bootstrap_prefix_names_the_protocol_and_passwords_are_hashed_as_typed(
        sasl_ssl_broker, tls_files):
    config = sasl(tls_files, "SCRAM-SHA-512", "ligature", LIGATURE_PASSWORD)
    del config["security.protocol"]
    with BlockingClient("SASL_SSL://" + sasl_ssl_broker.bootstrap_servers,
                        config=config) as client:
        assert client.metadata([]).brokers


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_wrong_password_is_refused_in_one_line(sasl_ssl_broker, tls_files, mechanism):
    with pytest.raises(errors.SaslAuthenticationFailedError,
                       match=rf"refused the login of 'alice' \({mechanism}\): "
                             "Authentication failed") as info:
        BlockingClient(sasl_ssl_broker.bootstrap_servers,
                       config=sasl(tls_files, mechanism, pw="wrong")).metadata([])
    assert not info.value.retriable
    assert "\n" not in str(info.value)


def test_misconfigured_security_is_named(sasl_ssl_broker, tls_files, tmp_path):
    bootstrap = sasl_ssl_broker.bootstrap_servers
    # a CA that did not sign the broker's certificate
    other = tmp_path / "other-ca.pem"
    other.write_bytes(trustme.CA().cert_pem.bytes())
    with pytest.raises(KafkaConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        BlockingClient(bootstrap, retries=0, config={**sasl(tls_files, "PLAIN"),
                                                     "ssl.ca.location": str(other)}).metadata()
    # TLS without the SASL login: the broker closes the connection at the first request
    with pytest.raises(KafkaConnectionError, match="closed the connection"):
        BlockingClient(bootstrap, retries=0, config={
            "security.protocol": "SSL", "ssl.ca.location": str(tls_files.ca_pem)}).metadata()
    with pytest.raises(errors.ConfigError, match=r"ssl.ca.location .*missing"):
        BlockingClient(bootstrap, config={**sasl(tls_files, "PLAIN"),
                                          "ssl.ca.location": str(tmp_path / "missing")})


def test_a_mechanism_the_listener_does_not_enable(tmp_path, tls_files, users_file):
    broker = ThreadedBroker(listeners="SASL_PLAINTEXT://127.0.0.1:0", log_dirs=str(tmp_path),
                            sasl_credentials_file=str(users_file),
                            sasl_enabled_mechanisms="SCRAM-SHA-512",
                            shutdown_timeout_ms=1000).start()
    try:
        config = {**sasl(tls_files, "PLAIN"), "security.protocol": "SASL_PLAINTEXT"}
        with pytest.raises(errors.UnsupportedSaslMechanismError,
                           match="does not enable SASL mechanism PLAIN "
                                 r"\(enabled: SCRAM-SHA-512\)"):
            BlockingClient(broker.bootstrap_servers, config=config).metadata([])
        config["sasl.mechanism"] = "SCRAM-SHA-512"
        with BlockingClient(broker.bootstrap_servers, config=config) as client:
            assert client.metadata([]).brokers
    finally:
        broker.stop()


def test_a_client_certificate_where_the_listener_requires_one(tmp_path, tls_files):
    broker = ThreadedBroker(listeners="SSL://127.0.0.1:0", log_dirs=str(tmp_path),
                            ssl_certfile=str(tls_files.server_cert),
                            ssl_keyfile=str(tls_files.server_key),
                            ssl_cafile=str(tls_files.ca_pem), ssl_client_auth="required",
                            shutdown_timeout_ms=1000).start()
    try:
        config = {"security.protocol": "SSL", "ssl.ca.location": str(tls_files.ca_pem),
                  "ssl.certificate.location": str(tls_files.client_pem)}
        with BlockingClient(broker.bootstrap_servers, config=config) as client:
            assert client.metadata([]).brokers
        del config["ssl.certificate.location"]
        with pytest.raises(KafkaConnectionError):
            BlockingClient(broker.bootstrap_servers, retries=0, config=config).metadata([])
    finally:
        broker.stop()
