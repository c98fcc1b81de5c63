"""bootstrap.servers parsing and the security protocol a bootstrap prefix names."""

from __future__ import annotations

import pytest

from trio_broker.client.core.bootstrap import (
    BrokerAddress,
    format_address,
    parse_address,
    parse_bootstrap,
    prefix_protocol,
    resolve_security_protocol,
)
from trio_broker.client.core.errors import ConfigError


def test_every_accepted_form() -> None:
    assert parse_bootstrap("a:1, b:2,PLAINTEXT://c:3") == [("a", 1), ("b", 2), ("c", 3)]
    assert parse_bootstrap(["[::1]:9092", "h:9093,i:9094"]) == [("::1", 9092), ("h", 9093),
                                                                ("i", 9094)]
    assert parse_bootstrap("SASL_SSL://[fe80::1%eth0]:9093") == [("fe80::1%eth0", 9093)]
    assert parse_bootstrap("host,[::1]", default_port=9092) == [("host", 9092), ("::1", 9092)]
    assert parse_address("ssl://h:1") == BrokerAddress("h", 1)
    assert str(BrokerAddress("::1", 9)) == format_address("::1", 9) == "[::1]:9"
    assert str(BrokerAddress("h", 9)) == "h:9"


@pytest.mark.parametrize(("servers", "message"), [
    ("nohost", r"^bad bootstrap server 'nohost': expected HOST:PORT$"),
    ("h:0", r"^bad bootstrap server 'h:0': port '0' is not in 1\.\.65535$"),
    ("h:65536", r"port '65536' is not in"),
    ("h:port", r"port 'port' is not in"),
    ("a:1,::1:9092", r"^bad bootstrap server '::1:9092': write an IPv6 address in brackets"),
    ("[::1:9092", r"unclosed '\['"),
    ("[::1]x", r"expected \[HOST\]:PORT"),
    (":9092", r"^bad bootstrap server ':9092': expected HOST:PORT$"),
    ("HTTP://h:1", r"unknown security protocol 'HTTP'"),
    (" , ", r"^bootstrap.servers names no server"),
    ([], r"^bootstrap.servers names no server"),
])
def test_bad_entries_are_one_line_errors_naming_them(servers: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_bootstrap(servers)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


def test_prefix_names_the_security_protocol() -> None:
    assert prefix_protocol("h:1") is None
    assert prefix_protocol("ssl://h:1,SSL://i:2") == "SSL"
    with pytest.raises(ConfigError, match="mixes security protocols"):
        prefix_protocol("SSL://h:1,PLAINTEXT://i:2")
    assert resolve_security_protocol(None, "h:1") == "PLAINTEXT"
    assert resolve_security_protocol(None, "SASL_SSL://h:1") == "SASL_SSL"
    assert resolve_security_protocol("ssl", "SSL://h:1") == "SSL"
    with pytest.raises(ConfigError, match=r"security.protocol=PLAINTEXT but bootstrap"):
        resolve_security_protocol("PLAINTEXT", "SSL://h:1")
    with pytest.raises(ConfigError, match="is not one of"):
        resolve_security_protocol("TLS", "h:1")
