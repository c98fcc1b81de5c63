"""What failed SASL/PLAIN logins may cost: each is a PBKDF2 (the stored credentials are salted
hashes), so they run one at a time in a limiter of their own and never take the worker threads
storage work runs in; a password verified once costs an HMAC the next time."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.wire import RawClient
from trio_broker import open_broker
from trio_broker.broker.security import add_user
from trio_broker.broker.security.credentials import CredentialStore
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.errors import ErrorCode


def test_a_verified_password_is_remembered_until_the_credential_changes(tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    add_user(users, "alice", "first-secret")
    store = CredentialStore(users)
    assert not store.plain_verified("alice", "first-secret")
    assert not store.verify_plain("alice", "wrong")
    assert not store.plain_verified("alice", "wrong")  # a wrong guess is never remembered
    assert store.verify_plain("alice", "first-secret")
    assert store.plain_verified("alice", "first-secret")
    assert not store.plain_verified("alice", "first-secret ")
    assert not store.plain_verified("bob", "first-secret")
    add_user(users, "alice", "second-secret")
    store.maybe_reload()
    assert not store.plain_verified("alice", "first-secret")
    assert not store.verify_plain("alice", "first-secret")
    assert store.verify_plain("alice", "second-secret")


async def _bad_login(host: str, port: int) -> int:
    client = RawClient(await trio.open_tcp_stream(host, port))
    try:
        await client.request(ApiKey.SaslHandshake, 1, mechanism="PLAIN")
        answer = await client.request(ApiKey.SaslAuthenticate, 2, auth_bytes=b"\0alice\0guess")
        return int(answer.error_code)
    finally:
        await client.aclose()


async def test_a_flood_of_bad_plain_logins_leaves_the_storage_threads_free(
        tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    add_user(users, "alice", "alice-secret")
    async with open_broker(listeners="SASL_PLAINTEXT://127.0.0.1:0",
                           log_dirs=str(tmp_path / "data"), sasl_credentials_file=str(users),
                           sasl_enabled_mechanisms="PLAIN",
                           connection_failed_authentication_delay_ms=0) as broker:
        default = trio.to_thread.current_default_thread_limiter()
        borrowed: list[int] = []
        errors: list[int] = []

        async def sample() -> None:
            while True:
                borrowed.append(default.borrowed_tokens)
                await trio.sleep(0.001)

        async def flood() -> None:
            for _ in range(4):
                errors.append(await _bad_login(broker.host, broker.port))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sample)
            async with trio.open_nursery() as clients:
                for _ in range(50):
                    clients.start_soon(flood)
            nursery.cancel_scope.cancel()
        assert errors == [ErrorCode.SASL_AUTHENTICATION_FAILED] * 200
        assert max(borrowed) <= 2, max(borrowed)
