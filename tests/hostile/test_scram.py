"""SCRAM (RFC 5802/7677), PLAIN and the credentials file, without sockets."""

from __future__ import annotations

import base64
import io
import json
import os

import pytest

from trio_broker.broker.security import (
    CredentialStore,
    SaslAuthenticator,
    SaslSettings,
    SaslState,
    ScramServer,
    add_user,
    remove_user,
)
from trio_broker.broker.security.credentials import CredentialsError, main
from trio_broker.broker.security.scram import ScramError, make_credential
from trio_broker.client.core.sasl import ScramClient
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.errors import ErrorCode

# RFC 7677 section 3.
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def _rfc_server() -> ScramServer:
    cred = make_credential("SCRAM-SHA-256", "pencil", salt=RFC_SALT, iterations=4096)
    return ScramServer("SCRAM-SHA-256", lambda u: cred if u == "user" else None,
                       nonce=RFC_SERVER_NONCE)


def test_rfc7677_test_vector() -> None:
    server = _rfc_server()
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.first_message() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = server.evaluate(client.first_message())
    assert server_first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = client.final_message(server_first)
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    server_final = server.evaluate(final)
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    client.verify_server_final(server_final)
    assert server.complete
    assert server.username == "user"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_round_trip_and_wrong_password(mechanism: str) -> None:
    cred = make_credential(mechanism, "right")
    for pw, ok in (("right", True), ("wrong", False)):
        server = ScramServer(mechanism, lambda u, c=cred: c if u == "ann" else None)
        client = ScramClient(mechanism, "ann", pw)
        final = client.final_message(server.evaluate(client.first_message()))
        if ok:
            client.verify_server_final(server.evaluate(final))
            assert server.complete
        else:
            with pytest.raises(ScramError, match="invalid credentials"):
                server.evaluate(final)
            assert not server.complete
            assert server.username is None
            # the exchange is over: nothing more is accepted
            with pytest.raises(ScramError):
                server.evaluate(final)


def test_unknown_user_gets_a_stable_fake_salt_and_fails_at_the_proof() -> None:
    key = b"k" * 32

    def first(user: str) -> bytes:
        server = ScramServer("SCRAM-SHA-256", lambda u: None, fake_salt_key=key)
        return server.evaluate(ScramClient("SCRAM-SHA-256", user, "x").first_message())

    a, b, c = first("ghost"), first("ghost"), first("other")
    salt = [dict(p.split("=", 1) for p in m.decode().split(","))["s"] for m in (a, b, c)]
    assert salt[0] == salt[1] != salt[2]
    assert b",i=4096" in a
    server = ScramServer("SCRAM-SHA-256", lambda u: None, fake_salt_key=key)
    client = ScramClient("SCRAM-SHA-256", "ghost", "x")
    final = client.final_message(server.evaluate(client.first_message()))
    with pytest.raises(ScramError, match="invalid credentials"):
        server.evaluate(final)


@pytest.mark.parametrize("message", [
    b"p=tls-unique,,n=user,r=abc",  # channel binding requested
    b"n,,n=user",  # no nonce
    b"n,,r=abc,n=user",  # wrong order
    b"n,,n=us=er,r=abc",  # bad saslname escape
    b"n,,n=,r=abc",  # empty user
    b"n,a=mallory,n=user,r=abc",  # authzid differs from the user
    b"n,,n=user,r=abc,m=ext",  # mandatory extension
    b"n,,n=user,r=a\x01c",  # control character in the nonce
    b"\xff\xfe",  # not UTF-8
    b"",
])
def test_bad_client_first_messages_fail(message: bytes) -> None:
    with pytest.raises(ScramError):
        _rfc_server().evaluate(message)


def _final(client: ScramClient) -> tuple[ScramServer, bytes]:
    server = _rfc_server()
    return server, client.final_message(server.evaluate(client.first_message()))


@pytest.mark.parametrize("mutate", [
    lambda m: m.replace(b"r=rOpr", b"r=XOpr"),  # nonce mismatch
    lambda m: m.replace(b"c=biws", b"c=!!!"),  # not base64
    lambda m: m.replace(b"c=biws", b"c=cCwsbg=="),  # "p,,n": channel binding data
    lambda m: m[: m.index(b",p=")],  # no proof
    lambda m: m[:-8] + b"AAAAAAA=",  # a proof of the wrong value
    lambda m: m.replace(b"p=", b"p=AAAA"),  # a proof of the wrong length
], ids=["nonce", "base64", "cbind", "no-proof", "proof-value", "proof-length"])
def test_bad_client_final_messages_fail(mutate) -> None:
    server, final = _final(ScramClient("SCRAM-SHA-256", "user", "pencil",
                                       nonce=RFC_CLIENT_NONCE))
    with pytest.raises(ScramError):
        server.evaluate(mutate(final))
    assert not server.complete


def test_changing_the_channel_binding_flag_breaks_the_proof() -> None:
    # "y,," (client supports binding, thinks the server does not) is a valid first message.
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_CLIENT_NONCE)
    server = _rfc_server()
    server.evaluate(b"y" + client.first_message()[1:])
    client_final = client.final_message(
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,"
        b"i=4096")
    # The proof covers "c=biws" (n,,), so changing the flag must break the proof.
    with pytest.raises(ScramError):
        server.evaluate(client_final.replace(b"c=biws", b"c=eSws"))


def _authenticator(tmp_path, mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")):
    path = tmp_path / "users.json"
    add_user(path, "alice", "alice-secret")
    return SaslAuthenticator(SaslSettings(list(mechanisms), CredentialStore(path)))


def test_authenticator_gates_api_keys_by_state(tmp_path) -> None:
    auth = _authenticator(tmp_path)
    assert auth.allows(ApiKey.ApiVersions)
    assert auth.allows(ApiKey.SaslHandshake)
    assert not auth.allows(ApiKey.Metadata)
    assert not auth.allows(ApiKey.SaslAuthenticate)
    assert auth.handshake("PLAIN") == (ErrorCode.NONE,
                                       ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    assert auth.state is SaslState.AUTHENTICATE
    assert auth.allows(ApiKey.SaslAuthenticate)
    assert not auth.allows(ApiKey.ApiVersions)
    assert auth.authenticate(b"\x00alice\x00alice-secret") == (ErrorCode.NONE, None, b"")
    assert auth.complete
    assert auth.principal == "User:alice"
    assert auth.allows(ApiKey.Produce)


@pytest.mark.parametrize(("token", "message"), [
    (b"\x00alice\x00wrong", "Invalid username or password"),
    (b"\x00nobody\x00alice-secret", "Invalid username or password"),
    (b"bob\x00alice\x00alice-secret", "authorization id"),
    (b"\x00\x00alice-secret", "username not specified"),
    (b"\x00alice\x00", "password not specified"),
    (b"alice\x00alice-secret", "expected 3 tokens"),
    (b"\x00al\xffice\x00x", "not UTF-8"),
])
def test_plain_failures(tmp_path, token: bytes, message: str) -> None:
    auth = _authenticator(tmp_path)
    auth.handshake("PLAIN")
    error, text, _reply = auth.authenticate(token)
    assert error == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert message in text
    assert auth.failed
    assert not auth.allows(ApiKey.ApiVersions)
    # a second attempt on the same connection is refused too
    assert auth.authenticate(b"\x00alice\x00alice-secret")[0] == ErrorCode.ILLEGAL_SASL_STATE


def test_unsupported_mechanism_fails_the_connection(tmp_path) -> None:
    auth = _authenticator(tmp_path, mechanisms=("SCRAM-SHA-512",))
    assert auth.handshake("PLAIN") == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, ["SCRAM-SHA-512"])
    assert auth.failed


def test_credentials_file_holds_no_password_and_reloads(tmp_path) -> None:
    path = tmp_path / "users.json"
    add_user(path, "alice", "correct horse battery staple")
    text = path.read_text()
    assert "correct horse" not in text
    assert set(json.loads(text)["users"]["alice"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    store = CredentialStore(path)
    assert store.verify_plain("alice", "correct horse battery staple")
    assert not store.verify_plain("alice", "Correct horse battery staple")
    add_user(path, "bob", "pw", mechanisms=["SCRAM-SHA-512"])
    os.utime(path, ns=(1, 1))  # a different mtime even on a coarse clock
    store.maybe_reload()
    assert "bob" in store
    assert store.scram("bob", "SCRAM-SHA-256") is None
    assert store.verify_plain("bob", "pw")
    path.write_text("{not json")
    os.utime(path, ns=(2, 2))
    store.maybe_reload()  # logged, previous users kept
    assert "bob" in store
    with pytest.raises(CredentialsError, match="not JSON"):
        CredentialStore(path)


def test_credentials_command_line(tmp_path, monkeypatch, capsys) -> None:
    path = tmp_path / "users.json"
    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret\n"))
    assert main(["add", "carol", "--file", str(path), "--password-stdin",
                 "--mechanism", "SCRAM-SHA-256"]) == 0
    assert main(["list", "--file", str(path)]) == 0
    assert capsys.readouterr().out == "carol\tSCRAM-SHA-256\n"
    assert CredentialStore(path).verify_plain("carol", "s3cret")
    assert main(["remove", "carol", "--file", str(path)]) == 0
    assert main(["remove", "carol", "--file", str(path)]) == 1
    assert not remove_user(path, "carol")
    monkeypatch.setattr("sys.stdin", io.StringIO("x\n"))
    assert main(["add", "bad,name", "--file", str(path), "--password-stdin"]) == 2
    assert "error:" in capsys.readouterr().err
