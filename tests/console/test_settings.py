"""The console's settings from a broker's config: where it binds, on or off, read-only, login."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from tests.security_files import TlsFiles
from trio_broker.broker.config import BrokerConfig, ConfigError, parse_http_listener
from trio_broker.broker.http.settings import (
    ConsoleSettings,
    console_settings,
    is_loopback,
)

ADVERTISED = ("127.0.0.1", 9092)


def settings(**keys: object) -> ConsoleSettings:
    return console_settings(BrokerConfig().evolve(**keys), ADVERTISED)


@pytest.mark.parametrize(("value", "expected"), [
    ("http://127.0.0.1:9400", ("http", "127.0.0.1", 9400)),
    ("127.0.0.1:0", ("http", "127.0.0.1", 0)),
    ("https://[::1]:9443", ("https", "::1", 9443)),
    ("http://0.0.0.0:9400/", ("http", "0.0.0.0", 9400)),
    ("http://:9400", ("http", "127.0.0.1", 9400)),  # no host: loopback
])
def test_listener_values(value: str, expected: tuple[str, str, int]) -> None:
    assert parse_http_listener(value) == expected


@pytest.mark.parametrize("value", ["ftp://h:1", "http://h", "http://h:x",
                                   "http://h:9400/console", "http://h:9400?x=1"])
def test_bad_listener_names_the_key(value: str) -> None:
    with pytest.raises(ConfigError, match=r"http\.listener") as info:
        parse_http_listener(value)
    assert info.value.key == "http.listener"


def test_loopback_names() -> None:
    assert all(map(is_loopback, ["127.0.0.1", "127.1.2.3", "::1", "localhost"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "10.0.0.1", "example.com"]))


def test_plaintext_loopback_is_read_write_without_login() -> None:
    s = settings(http_listener="http://127.0.0.1:9400")
    assert s.enabled
    assert not s.read_only
    assert not s.login_required
    assert s.bootstrap == "127.0.0.1:9092"
    assert s.ssl_context() is None
    assert s.client_config()["security.protocol"] == "PLAINTEXT"


def test_beyond_loopback_is_read_only_unless_told() -> None:
    assert settings(http_listener="http://0.0.0.0:9400").read_only
    assert not settings(http_listener="http://0.0.0.0:9400",
                        http_console_read_only=False).read_only
    assert settings(http_listener="http://127.0.0.1:9400", http_console_read_only=True).read_only


def test_sasl_listener_means_a_login_with_enabled_mechanisms(users_file: Path) -> None:
    s = settings(http_listener="http://127.0.0.1:9400",
                 listeners="SASL_PLAINTEXT://127.0.0.1:9094",
                 sasl_credentials_file=str(users_file),
                 sasl_enabled_mechanisms="SCRAM-SHA-256,SCRAM-SHA-512")
    assert s.enabled
    assert s.login_required
    assert s.mechanisms == ("SCRAM-SHA-512", "SCRAM-SHA-256")
    config = s.client_config("alice", "pw", "SCRAM-SHA-256")
    assert (config["sasl.username"], config["sasl.mechanism"]) == ("alice", "SCRAM-SHA-256")


def test_the_advertised_listener_decides_the_protocol(users_file: Path) -> None:
    s = settings(http_listener="http://127.0.0.1:9400", sasl_credentials_file=str(users_file),
                 listeners="PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9094",
                 advertised_listeners="SASL_PLAINTEXT://127.0.0.1:9094")
    assert s.security_protocol == "SASL_PLAINTEXT"
    assert s.login_required


def test_ssl_without_sasl_is_off_unless_enabled(tls_files: TlsFiles) -> None:
    keys = {"http_listener": "http://127.0.0.1:9400", "listeners": "SSL://127.0.0.1:9093",
            "ssl_certfile": str(tls_files.server_pem)}
    off = settings(**keys)
    assert not off.enabled
    assert "http.console.enabled=true" in (off.off_reason or "")
    on = settings(**keys, http_console_enabled=True)
    assert on.enabled
    assert not on.login_required
    context = on.ssl_context()
    assert isinstance(context, ssl.SSLContext)
    assert not context.check_hostname
    assert context.verify_flags & ssl.VERIFY_X509_PARTIAL_CHAIN


def test_disabled_and_https_needs_a_certificate(tmp_path: Path) -> None:
    assert settings(http_listener="http://127.0.0.1:9400",
                    http_console_enabled=False).off_reason == "http.console.enabled=false"
    with pytest.raises(ConfigError, match=r"needs ssl\.certfile"):
        settings(http_listener="https://127.0.0.1:9443")


def test_the_console_never_presents_the_brokers_certificate(tls_files: TlsFiles) -> None:
    keys = {"http_listener": "http://127.0.0.1:9400", "listeners": "SSL://127.0.0.1:9093",
            "ssl_certfile": str(tls_files.server_pem), "ssl_cafile": str(tls_files.ca_pem),
            "ssl_client_auth": "required", "http_console_enabled": True}
    bare = settings(**keys)
    assert bare.presents_no_certificate
    context = bare.ssl_context()
    assert context is not None
    assert context.get_ca_certs()  # it still trusts the broker
    given = settings(**keys, http_console_ssl_certfile=str(tls_files.client_pem))
    assert not given.presents_no_certificate
    assert given.ssl_context() is not None
