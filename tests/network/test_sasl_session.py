"""A SASL listener's connection's SASL session: its failures are its connection's alone, and
are logged under its own name."""

from __future__ import annotations

import logging

import trio

from tests.security_files import password
from tests.wire import RawClient
from trio_broker import open_broker
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.errors import ErrorCode

LOGGER_NAME = "trio_broker.broker.network.sasl_session"


async def plain_login(client: RawClient, user: str, pw: str, version: int = 1):
    hs = await client.request(ApiKey.SaslHandshake, 1, mechanism="PLAIN")
    assert hs.error_code == 0, hs
    return await client.request(ApiKey.SaslAuthenticate, version,
                                auth_bytes=f"\0{user}\0{pw}".encode())


async def test_a_failed_login_closes_its_connection_only(tmp_path, users_file, caplog):
    async with open_broker(listeners="SASL_PLAINTEXT://127.0.0.1:0",
                           log_dirs=str(tmp_path / "data"),
                           sasl_credentials_file=str(users_file),
                           connection_failed_authentication_delay_ms=50) as broker:
        good = RawClient(await trio.open_tcp_stream(broker.host, broker.port))
        bad = RawClient(await trio.open_tcp_stream(broker.host, broker.port))
        assert (await plain_login(good, "alice", password("alice"))).error_code == 0
        with caplog.at_level(logging.INFO, logger=LOGGER_NAME), trio.fail_after(10):
            failed = await plain_login(bad, "alice", "not-the-password")
            assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert await bad.is_closed_by_peer()
        logged = [r.getMessage() for r in caplog.records if r.name == LOGGER_NAME]
        assert len(logged) == 1, logged
        assert logged[0].endswith(" from 127.0.0.1: SASL authentication failed"), logged
        # the other connection, logged in, is served as before
        meta = await good.request(ApiKey.Metadata, 5, topics=[],
                                  allow_auto_topic_creation=False)
        assert meta.brokers[0].port == broker.port
        exposed = broker.state.metrics.expose().decode()
        assert 'reason="authentication_failed"} 1.0' in exposed
        await good.aclose()
