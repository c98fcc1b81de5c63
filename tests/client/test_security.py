"""The Trio client on the broker's TLS and SASL listeners: produce, consume with a group and the
admin client over every mechanism, and the errors a refused login or an untrusted certificate
gives (raised to the caller, not retried forever)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trustme

from tests.security_files import LIGATURE_PASSWORD, TlsFiles, password
from trio_broker import open_broker
from trio_broker.client import NewTopic, open_admin, open_consumer, open_producer
from trio_broker.client.trio import errors

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def secured(tls: TlsFiles, mechanism: str, user: str = "alice",
            pw: str | None = None) -> dict[str, Any]:
    return {"security_protocol": "SASL_SSL", "ssl_ca_location": str(tls.ca_pem),
            "sasl_mechanism": mechanism, "sasl_username": user,
            "sasl_password": password(user) if pw is None else pw}


def broker_settings(tmp_path: Path, tls: TlsFiles, users: Path, **extra: Any) -> dict[str, Any]:
    return {"listeners": "SASL_SSL://127.0.0.1:0", "log_dirs": str(tmp_path / "data"),
            "ssl_certfile": str(tls.server_pem), "sasl_credentials_file": str(users),
            "group_initial_rebalance_delay_ms": 0, "shutdown_timeout_ms": 1000, **extra}


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_produce_consume_and_admin_over_sasl_ssl(tmp_path, tls_files, users_file,
                                                       mechanism):
    async with open_broker(**broker_settings(tmp_path, tls_files, users_file)) as broker:
        config = secured(tls_files, mechanism)
        async with open_admin(broker.bootstrap_servers, **config) as admin:
            await admin.create_topics([NewTopic("secure", 2)])
            assert "secure" in await admin.list_topics()
        async with open_producer(broker.bootstrap_servers, **config) as producer:
            metas = [await producer.send("secure", b"v%d" % i, key=b"k%d" % i)
                     for i in range(20)]
        assert {m.partition for m in metas} == {0, 1}
        with trio.fail_after(20):
            async with open_consumer("secure", bootstrap_servers=broker.bootstrap_servers,
                                     group_id="g", auto_offset_reset="earliest",
                                     **config) as consumer:
                got = []
                async for record in consumer:
                    got.append(record.value)
                    if len(got) == 20:
                        break
        assert sorted(got) == sorted(b"v%d" % i for i in range(20))


async def test_the_bootstrap_prefix_and_a_password_hashed_as_typed(tmp_path, tls_files,
                                                                  users_file):
    async with open_broker(**broker_settings(tmp_path, tls_files, users_file)) as broker:
        config = secured(tls_files, "SCRAM-SHA-512", "ligature", LIGATURE_PASSWORD)
        del config["security_protocol"]
        async with open_producer("SASL_SSL://" + broker.bootstrap_servers, **config) as producer:
            assert (await producer.send("t", b"x")).offset == 0


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_a_refused_login_reaches_the_caller(tmp_path, tls_files, users_file, mechanism):
    async with open_broker(**broker_settings(
            tmp_path, tls_files, users_file,
            connection_failed_authentication_delay_ms=0)) as broker:
        config = secured(tls_files, mechanism, pw="wrong")
        with trio.fail_after(10):
            async with open_producer(broker.bootstrap_servers, max_block_ms=60_000,
                                     **config) as producer:
                with pytest.raises(errors.SaslAuthenticationFailedError,
                                   match=rf"refused the login of 'alice' \({mechanism}\)"):
                    await producer.send("t", b"x")
            async with open_admin(broker.bootstrap_servers, **config) as admin:
                with pytest.raises(errors.SaslAuthenticationFailedError):
                    await admin.list_topics()
            async with open_consumer("t", bootstrap_servers=broker.bootstrap_servers,
                                     group_id="g", **config) as consumer:
                with pytest.raises(errors.SaslAuthenticationFailedError):
                    await consumer.getmany(timeout_ms=30_000)


async def test_an_untrusted_certificate_reaches_the_caller(tmp_path, tls_files, users_file):
    other_ca = tmp_path / "other-ca.pem"
    other_ca.write_bytes(trustme.CA().cert_pem.bytes())
    async with open_broker(**broker_settings(tmp_path, tls_files, users_file)) as broker:
        config = {**secured(tls_files, "PLAIN"), "ssl_ca_location": str(other_ca)}
        with trio.fail_after(10):
            async with open_consumer(bootstrap_servers=broker.bootstrap_servers,
                                     **config) as consumer:
                with pytest.raises(errors.SslAuthenticationError,
                                   match="CERTIFICATE_VERIFY_FAILED"):
                    await consumer.topics()


async def test_security_settings_are_checked_when_the_client_is_made(tls_files):
    with pytest.raises(errors.ConfigError, match=r"sasl\.mechanism GSSAPI is not supported"):
        async with open_producer("h:1", security_protocol="SASL_PLAINTEXT"):
            pass
    with pytest.raises(errors.ConfigError, match=r"needs sasl\.username and sasl\.password"):
        async with open_consumer(bootstrap_servers="h:1", security_protocol="SASL_SSL",
                                 sasl_mechanism="PLAIN"):
            pass
    with pytest.raises(errors.ConfigError, match=r"bootstrap\.servers says SSL://"):
        async with open_admin("SSL://h:1", security_protocol="PLAINTEXT"):
            pass
    with pytest.raises(errors.ConfigError, match=r"unknown producer config 'ssl_keystore'"):
        async with open_producer("h:1", ssl_keystore="x"):
            pass
