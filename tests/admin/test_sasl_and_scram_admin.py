"""SaslHandshake v0 (bare SASL tokens), SaslAuthenticate v0-v2, and the SCRAM users of
``sasl.credentials.file`` managed over the wire (Describe/AlterUserScramCredentials), raw over
real sockets against a broker with a plaintext and a SASL listener."""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import struct
from pathlib import Path

import pytest
import trio

from tests.security_files import password
from tests.wire import RawClient
from trio_broker import open_broker
from trio_broker.client.core.sasl import ScramClient
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.errors import ErrorCode as E

HANDSHAKE, AUTHENTICATE = ApiKey.SaslHandshake, ApiKey.SaslAuthenticate
ALTER = request_class(ApiKey.AlterUserScramCredentials)
DESCRIBE = request_class(ApiKey.DescribeUserScramCredentials)
SHA256, SHA512 = 1, 2


def settings(tmp_path: Path, users: Path, **extra) -> dict:
    return {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "log_dirs": str(tmp_path / "data"), "sasl_credentials_file": str(users),
            "sasl_enabled_mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "shutdown_timeout_ms": 1000, "connection_failed_authentication_delay_ms": 100,
            **extra}


@pytest.fixture
def users(tmp_path, users_file) -> Path:
    """A private copy of the session's users file (these tests change it)."""
    copy = tmp_path / "users.json"
    shutil.copy(users_file, copy)
    return copy


async def connect(broker, listener: str) -> RawClient:
    [(host, port)] = [(h, p) for name, h, p in broker.listeners if name == listener]
    return await RawClient.connect(host, port)


async def raw_token(client: RawClient, token: bytes) -> bytes | None:
    """Send a bare size-prefixed token; the bare answer, or None if the broker closed."""
    await client.send_raw(struct.pack(">i", len(token)) + token)
    return await client.read_frame()


# --- SaslHandshake v0: bare tokens ------------------------------------------------------------

@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_handshake_v0_then_bare_tokens(tmp_path, users, mechanism):
    async with open_broker(**settings(tmp_path, users)) as broker:
        client = await connect(broker, "SASL_PLAINTEXT")
        hs = await client.request(HANDSHAKE, 0, mechanism=mechanism)
        assert (hs.error_code, "PLAIN" in hs.mechanisms) == (0, True)
        if mechanism == "PLAIN":
            assert await raw_token(client, b"\0alice\0" + password("alice").encode()) == b""
        else:
            scram = ScramClient(mechanism, "alice", password("alice"))
            server_first = await raw_token(client, scram.first_message())
            assert server_first is not None
            assert server_first.startswith(b"r=")
            server_final = await raw_token(client, scram.final_message(server_first))
            assert server_final is not None
            scram.verify_server_final(server_final)
        # Back to Kafka requests, authenticated.
        meta = await client.request(ApiKey.Metadata, 5, topics=[],
                                    allow_auto_topic_creation=False)
        assert meta.brokers
        await client.aclose()


async def test_handshake_v0_wrong_password_is_closed_without_an_answer(tmp_path, users):
    async with open_broker(**settings(tmp_path, users)) as broker:
        client = await connect(broker, "SASL_PLAINTEXT")
        assert (await client.request(HANDSHAKE, 0, mechanism="PLAIN")).error_code == 0
        start = trio.current_time()
        assert await raw_token(client, b"\0alice\0wrong") is None
        assert trio.current_time() - start >= 0.1  # connection.failed.authentication.delay.ms
        # Before authenticating, a Kafka request instead of a token is just a bad token.
        other = await connect(broker, "SASL_PLAINTEXT")
        assert (await other.request(HANDSHAKE, 0, mechanism="SCRAM-SHA-256")).error_code == 0
        assert await raw_token(other, b"not a scram message") is None


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_sasl_authenticate_each_version(tmp_path, users, version):
    async with open_broker(**settings(tmp_path, users)) as broker:
        client = await connect(broker, "SASL_PLAINTEXT")
        assert (await client.request(HANDSHAKE, 1, mechanism="SCRAM-SHA-512")).error_code == 0
        scram = ScramClient("SCRAM-SHA-512", "bob", password("bob"))
        first = await client.request(AUTHENTICATE, version, auth_bytes=scram.first_message())
        assert first.error_code == 0
        final = await client.request(AUTHENTICATE, version,
                                     auth_bytes=scram.final_message(first.auth_bytes))
        assert (final.error_code, final.error_message) == (0, None)
        scram.verify_server_final(final.auth_bytes)
        if version >= 1:
            assert final.session_lifetime_ms == 0
        again = await client.request(AUTHENTICATE, version, auth_bytes=b"x")
        assert again.error_code == E.ILLEGAL_SASL_STATE


# --- Describe/AlterUserScramCredentials -------------------------------------------------------

def salted(mechanism: int, pw: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha256" if mechanism == SHA256 else "sha512", pw.encode(), salt,
                               iterations)


def upsert(user: str, pw: str, mechanism: int = SHA256, iterations: int = 4096):
    salt = secrets.token_bytes(16)
    return ALTER.ScramCredentialUpsertion(name=user, mechanism=mechanism, iterations=iterations,
                                          salt=salt,
                                          salted_password=salted(mechanism, pw, salt,
                                                                 iterations))


async def describe(client, *names):
    body = await client.request(ApiKey.DescribeUserScramCredentials, 0,
                                users=None if names == (None,) else
                                [DESCRIBE.UserName(name=n) for n in names])
    assert body.error_code == 0
    return {r.user: (r.error_code, r.error_message,
                     sorted((c.mechanism, c.iterations) for c in r.credential_infos))
            for r in body.results}


async def alter(client, *, deletions=(), upsertions=()):
    body = await client.request(ApiKey.AlterUserScramCredentials, 0, deletions=list(deletions),
                                upsertions=list(upsertions))
    return {r.user: (r.error_code, r.error_message) for r in body.results}


async def scram_login(broker, user, pw, mechanism="SCRAM-SHA-256") -> int:
    client = await connect(broker, "SASL_PLAINTEXT")
    assert (await client.request(HANDSHAKE, 1, mechanism=mechanism)).error_code == 0
    scram = ScramClient(mechanism, user, pw)
    first = await client.request(AUTHENTICATE, 1, auth_bytes=scram.first_message())
    if first.error_code:
        return first.error_code
    final = await client.request(AUTHENTICATE, 1,
                                 auth_bytes=scram.final_message(first.auth_bytes))
    await client.aclose()
    return final.error_code


async def test_describe_scram_credentials(tmp_path, users):
    async with open_broker(**settings(tmp_path, users)) as broker:
        client = await connect(broker, "PLAINTEXT")
        everyone = await describe(client, None)
        assert set(everyone) == {"alice", "bob", "ligature"}
        assert everyone["alice"] == (0, None, [(SHA256, 4096), (SHA512, 4096)])
        assert await describe(client) == everyone  # an empty list is everyone too
        got = await describe(client, "bob", "nobody", "alice", "alice")
        assert got == {
            "bob": (0, None, [(SHA256, 4096), (SHA512, 4096)]),
            "nobody": (E.RESOURCE_NOT_FOUND,
                       "Attempt to describe a user credential that does not exist: nobody", []),
            "alice": (E.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the same "
                      "user twice in a single request: alice", [])}


async def test_alter_scram_credentials_takes_effect_and_persists(tmp_path, users):
    async with open_broker(**settings(tmp_path, users)) as broker:
        client = await connect(broker, "PLAINTEXT")
        assert await scram_login(broker, "carol", "c-pw") == E.SASL_AUTHENTICATION_FAILED
        assert await alter(client, upsertions=[upsert("carol", "c-pw", iterations=8192)]) == {
            "carol": (0, None)}
        # The next login sees the new user at once, and the file holds only salted hashes.
        assert await scram_login(broker, "carol", "c-pw") == 0
        assert await scram_login(broker, "carol", "wrong") == E.SASL_AUTHENTICATION_FAILED
        assert b"c-pw" not in users.read_bytes()
        assert (await describe(client, "carol"))["carol"] == (0, None, [(SHA256, 8192)])
        # Change the password, then delete alice's SHA-512 credential.
        assert await alter(client, upsertions=[upsert("carol", "new-pw")],
                           deletions=[ALTER.ScramCredentialDeletion(name="alice",
                                                                    mechanism=SHA512)]) == {
            "carol": (0, None), "alice": (0, None)}
        assert await scram_login(broker, "carol", "c-pw") == E.SASL_AUTHENTICATION_FAILED
        assert await scram_login(broker, "carol", "new-pw") == 0
        assert await scram_login(broker, "alice", password("alice"), "SCRAM-SHA-512") == \
            E.SASL_AUTHENTICATION_FAILED
        assert await scram_login(broker, "alice", password("alice")) == 0
        assert oct(os.stat(users).st_mode & 0o777) == "0o600"
        assert not [p for p in users.parent.iterdir() if p.name.endswith(".tmp")]
    # A restarted broker reads the same users.
    async with open_broker(**settings(tmp_path, users)) as broker:
        assert await scram_login(broker, "carol", "new-pw") == 0
        client = await connect(broker, "PLAINTEXT")
        assert (await describe(client, "alice"))["alice"] == (0, None, [(SHA256, 4096)])


async def test_alter_scram_credentials_refusals(tmp_path, users):
    async with open_broker(**settings(tmp_path, users)) as broker:
        client = await connect(broker, "PLAINTEXT")
        before = users.read_bytes()
        got = await alter(client, deletions=[
            ALTER.ScramCredentialDeletion(name="nobody", mechanism=SHA256),
            ALTER.ScramCredentialDeletion(name="bob", mechanism=SHA256),
            ALTER.ScramCredentialDeletion(name="x", mechanism=9),
        ], upsertions=[
            upsert("bob", "again"),  # bob is already being altered
            upsert("", "pw"),
            upsert("few", "pw", iterations=1000),
            upsert("many", "pw", iterations=20_000),
        ])
        assert got == {
            "nobody": (E.RESOURCE_NOT_FOUND,
                       "Attempt to delete a user credential that does not exist"),
            "bob": (E.DUPLICATE_RESOURCE,
                    "A user credential cannot be altered twice in the same request"),
            "x": (E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
            "": (E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
            "few": (E.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
            "many": (E.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        }
        assert users.read_bytes() == before  # nothing valid: the file is untouched
        assert await scram_login(broker, "bob", password("bob")) == 0


async def test_scram_admin_without_a_credentials_file_stores_in_the_log_dir(trio_broker):
    """As Kafka stores SCRAM credentials with no setting: the first log dir's file, 0600."""
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    stored = trio_broker.state.config.log_dir_list[0] / "scram-credentials.json"
    assert not stored.exists()
    assert await describe(client, None) == {}
    assert (await describe(client, "ann"))["ann"][0] == E.RESOURCE_NOT_FOUND
    got = await alter(client, upsertions=[upsert("ann", "pw")])
    assert got["ann"][0] == E.NONE
    assert stored.stat().st_mode & 0o777 == 0o600
    assert "ann" in (await describe(client, None))
