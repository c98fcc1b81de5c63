"""SASL/OAUTHBEARER: unsecured JWS tokens through confluent-kafka, expired tokens refused,
JWKS-signed tokens, and re-authentication (KIP-368) on a long-lived connection."""

from __future__ import annotations

import base64
import json
import logging
import time
from typing import Any

import pytest
import trio
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.cli.conftest import run_cli
from tests.wire import RawClient
from trio_broker import open_broker
from trio_broker.broker.security.oauthbearer import (
    OAuthBearerError,
    OAuthBearerValidator,
    OAuthSettings,
    parse_client_message,
)
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.errors import ErrorCode
from trio_broker.testing import ThreadedBroker


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsecured(sub: str, exp: float, **claims: Any) -> str:
    header = _b64(json.dumps({"alg": "none"}).encode())
    body = _b64(json.dumps({"sub": sub, "exp": exp, "iat": time.time() - 1, **claims}).encode())
    return f"{header}.{body}."


def signed(key: rsa.RSAPrivateKey, kid: str, claims: dict[str, Any]) -> str:
    signing_input = (_b64(json.dumps({"alg": "RS256", "kid": kid}).encode()) + "." +
                     _b64(json.dumps(claims).encode()))
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{_b64(signature)}"


def test_the_client_message():
    assert parse_client_message(b"n,,\x01auth=Bearer abc.def.\x01\x01") == (None, "abc.def.")
    assert parse_client_message(b"n,a=alice,\x01host=h\x01auth=Bearer t\x01\x01") == ("alice",
                                                                                     "t")
    for bad in (b"auth=Bearer t", b"n,,\x01auth=Basic t\x01\x01", b"\xff"):
        with pytest.raises(OAuthBearerError):
            parse_client_message(bad)


def test_unsecured_tokens():
    validator = OAuthBearerValidator(OAuthSettings())
    now = time.time()
    assert validator.validate(unsecured("alice", now + 60))[0] == "alice"
    signed_without_jwks = _b64(b'{"alg":"HS256"}') + unsecured("alice", now + 60)[20:]
    for token in (unsecured("alice", now - 1), unsecured("", now + 60), "a.b",
                  signed_without_jwks):
        with pytest.raises(OAuthBearerError):
            validator.validate(token)


def test_tokens_signed_by_a_jwks_file(tmp_path):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    numbers = key.public_key().public_numbers()
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{
        "kty": "RSA", "kid": "k1", "alg": "RS256",
        "n": _b64(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
        "e": _b64(numbers.e.to_bytes(3, "big"))}]}))
    validator = OAuthBearerValidator(OAuthSettings(
        jwks_url=jwks.as_uri(), expected_issuer="https://idp", expected_audience=("kafka",)))
    claims = {"sub": "svc", "exp": time.time() + 60, "iss": "https://idp", "aud": "kafka"}
    assert validator.validate(signed(key, "k1", claims))[0] == "svc"
    refused = [signed(other, "k1", claims), signed(key, "k2", claims),
               signed(key, "k1", {**claims, "iss": "https://evil"}),
               signed(key, "k1", {**claims, "aud": "other"}),
               signed(key, "k1", {**claims, "exp": time.time() - 120}),
               unsecured("svc", time.time() + 60)]  # alg none is not accepted with a JWKS
    for token in refused:
        with pytest.raises(OAuthBearerError):
            validator.validate(token)


# --- confluent-kafka against a SASL_PLAINTEXT listener with OAUTHBEARER ------------------------

@pytest.fixture(scope="module")
def oauth_broker(tmp_path_factory: pytest.TempPathFactory):
    broker = ThreadedBroker(listeners="SASL_PLAINTEXT://127.0.0.1:0",
                            log_dirs=str(tmp_path_factory.mktemp("oauth")),
                            sasl_enabled_mechanisms="OAUTHBEARER",
                            connections_max_reauth_ms=1500, shutdown_timeout_ms=1000,
                            connection_failed_authentication_delay_ms=10).start()
    yield broker
    broker.stop()


def _producer(broker: ThreadedBroker, token: str, errors: list[Any],
              timeout_ms: int = 4000) -> Any:
    import confluent_kafka

    return confluent_kafka.Producer({
        "bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER", "message.timeout.ms": timeout_ms,
        "oauth_cb": lambda _config: (token, time.time() + 3600),
        "error_cb": errors.append})


def test_confluent_kafka_authenticates_and_re_authenticates(oauth_broker, caplog):
    caplog.set_level(logging.INFO, logger="trio_broker.broker.security.sasl")
    errors: list[Any] = []
    producer = _producer(oauth_broker, unsecured("alice", time.time() + 3600), errors)
    delivered: list[Any] = []
    start = time.monotonic()
    while time.monotonic() - start < 4.5:  # the session lasts 1.5 s: re-authenticated twice
        producer.produce("oauth", b"v", on_delivery=lambda e, m: delivered.append(e))
        producer.poll(0.25)
    producer.flush(5)
    assert errors == []
    assert delivered
    assert all(e is None for e in delivered)
    reauthentications = [r for r in caplog.records if "re-authentication of User:alice"
                         in r.getMessage()]
    assert len(reauthentications) >= 2


def test_an_expired_token_is_refused(oauth_broker):
    import confluent_kafka

    errors: list[Any] = []
    producer = _producer(oauth_broker, unsecured("alice", time.time() - 60), errors, 1500)
    delivered: list[Any] = []
    producer.produce("oauth", b"v", on_delivery=lambda e, m: delivered.append(e))
    producer.flush(5)
    assert delivered
    assert delivered[0] is not None
    assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors)
    assert any("expired" in e.str() for e in errors)


@pytest.mark.parametrize(("url", "why"), [
    ("missing", "The JWKS cannot be read: [Errno 2] No such file or directory"),
    ("empty", "holds no RSA key"),
    ("not-json", "The JWKS cannot be read: Expecting value"),
    ("https://idp.example/jwks", "only file: URLs are read (the broker has no HTTP client)")])
def test_serve_refuses_a_jwks_it_cannot_use_in_one_line(tmp_path, url, why):
    (tmp_path / "empty").write_text('{"keys": [{"kty": "EC"}]}')
    (tmp_path / "not-json").write_text("keys:")
    if "://" not in url:
        url = (tmp_path / url).as_uri()
    done = run_cli("serve", "--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
                   "--override", "sasl.enabled.mechanisms=OAUTHBEARER",
                   "--override", f"sasl.oauthbearer.jwks.endpoint.url={url}",
                   "--override", f"log.dirs={tmp_path / 'data'}")
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"trio-broker serve: error: --override: Invalid value {url} for configuration "
        "sasl.oauthbearer.jwks.endpoint.url: "), done.stderr
    assert why in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "data").exists()


# --- claims that are not finite numbers, over a real SASL connection -----------------------------

def _raw_token(exp_text: str) -> str:
    """An unsecured token whose exp is the JSON text ``exp_text`` as written (json.dumps would
    write inf as Infinity; 1e400 needs writing by hand)."""
    header = _b64(b'{"alg":"none"}')
    body = _b64(b'{"sub":"alice","exp":' + exp_text.encode() + b"}")
    return f"{header}.{body}."


@pytest.mark.parametrize("exp", ["Infinity", "-Infinity", "NaN", "1e400", "-1e400",
                                 "1" + "0" * 30, "true"])
def test_an_exp_that_is_no_finite_time_fails_the_login(exp: str) -> None:
    with pytest.raises(OAuthBearerError):
        OAuthBearerValidator(OAuthSettings()).validate(_raw_token(exp))


async def test_non_finite_exp_is_sasl_authentication_failed_after_the_delay(tmp_path) -> None:
    async with open_broker(listeners="SASL_PLAINTEXT://127.0.0.1:0",
                           log_dirs=str(tmp_path / "data"),
                           sasl_enabled_mechanisms="OAUTHBEARER",
                           connection_failed_authentication_delay_ms=300) as broker:
        for exp in ("Infinity", "NaN", "1e400"):
            client = RawClient(await trio.open_tcp_stream(broker.host, broker.port))
            hs = await client.request(ApiKey.SaslHandshake, 1, mechanism="OAUTHBEARER")
            assert hs.error_code == 0
            message = f"n,,\x01auth=Bearer {_raw_token(exp)}\x01\x01".encode()
            started = trio.current_time()
            answer = await client.request(ApiKey.SaslAuthenticate, 2, auth_bytes=message)
            assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED, exp
            assert trio.current_time() - started >= 0.29
            assert await client.is_closed_by_peer()
        # and the broker goes on serving good tokens
        client = RawClient(await trio.open_tcp_stream(broker.host, broker.port))
        await client.request(ApiKey.SaslHandshake, 1, mechanism="OAUTHBEARER")
        good = f"n,,\x01auth=Bearer {unsecured('alice', time.time() + 60)}\x01\x01".encode()
        assert (await client.request(ApiKey.SaslAuthenticate, 2,
                                     auth_bytes=good)).error_code == ErrorCode.NONE
        await client.aclose()
