"""KIP-368 on the wire: a session ends after connections.max.reauth.ms unless the client logs in
again on the same connection, as the same principal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from tests.authz.conftest import MECHANISM
from tests.authz.wire_login import login
from tests.security_files import password
from tests.wire import RawClient
from trio_broker.client.core.sasl import ScramClient
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.errors import ErrorCode
from trio_broker.testing import ThreadedBroker

LIFETIME_MS = 600


@pytest.fixture(scope="module")
def reauth_broker(tmp_path_factory: pytest.TempPathFactory, acl_users: Path
                  ) -> Iterator[ThreadedBroker]:
    broker = ThreadedBroker(listeners="SASL_PLAINTEXT://127.0.0.1:0",
                            log_dirs=str(tmp_path_factory.mktemp("reauth")),
                            sasl_credentials_file=str(acl_users),
                            sasl_enabled_mechanisms=MECHANISM,
                            connections_max_reauth_ms=LIFETIME_MS,
                            connection_failed_authentication_delay_ms=10,
                            shutdown_timeout_ms=1000).start()
    yield broker
    broker.stop()


async def _metadata(client: RawClient) -> object:
    return await client.request(ApiKey.Metadata, 12, topics=None,
                                allow_auto_topic_creation=False,
                                include_topic_authorized_operations=False)


async def _again(client: RawClient, user: str) -> object:
    hs = await client.request(ApiKey.SaslHandshake, 1, mechanism=MECHANISM)
    assert hs.error_code == 0, hs
    scram = ScramClient(MECHANISM, user, password(user))
    first = await client.request(ApiKey.SaslAuthenticate, 2, auth_bytes=scram.first_message())
    if first.error_code:
        return first
    return await client.request(ApiKey.SaslAuthenticate, 2,
                                auth_bytes=scram.final_message(first.auth_bytes))


async def test_a_request_after_the_session_ended_closes_the_connection(reauth_broker):
    client = await login(reauth_broker, "alice")
    await _metadata(client)
    await trio.sleep(LIFETIME_MS / 1000 + 0.2)
    await client.send(ApiKey.Metadata, 12, topics=None, allow_auto_topic_creation=False,
                      include_topic_authorized_operations=False)
    assert await client.read_frame() is None  # closed: the session ended


async def test_logging_in_again_extends_the_session(reauth_broker):
    client = await login(reauth_broker, "alice")
    for _ in range(3):
        await trio.sleep(LIFETIME_MS / 1000 * 0.6)
        final = await _again(client, "alice")
        assert final.error_code == 0, final
        assert 0 < final.session_lifetime_ms <= LIFETIME_MS
        await _metadata(client)  # served: total time is past the first session's end


async def test_logging_in_again_as_someone_else_fails(reauth_broker):
    client = await login(reauth_broker, "alice")
    final = await _again(client, "bob")
    assert final.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "principal" in final.error_message
    assert await client.read_frame() is None
