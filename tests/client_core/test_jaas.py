"""Kafka's Java client settings read by the client core: the JAAS line of ``sasl.jaas.config``
(Kafka's documented examples, its syntax and its errors), the unsecured OAUTHBEARER token, and
the PEM trust and key stores."""

from __future__ import annotations

import base64
import json

import pytest

from trio_broker.client.core.errors import ConfigError
from trio_broker.client.core.jaas import (
    JaasLoginModule,
    from_java_settings,
    parse_jaas_config,
)
from trio_broker.client.core.oauthbearer import client_first_message, unsecured_token
from trio_broker.client.core.security import resolve_security

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


# Kafka's documentation, "Authentication using SASL", client configuration of each mechanism
@pytest.mark.parametrize(("line", "expected"), [
    (f'{PLAIN} required username="alice" password="alice-secret";',
     JaasLoginModule(PLAIN, "required", {"username": "alice", "password": "alice-secret"})),
    (f'{SCRAM} required username="alice" password="alice-secret";',
     JaasLoginModule(SCRAM, "required", {"username": "alice", "password": "alice-secret"})),
    (f'{OAUTH} required unsecuredLoginStringClaim_sub="alice";',
     JaasLoginModule(OAUTH, "required", {"unsecuredLoginStringClaim_sub": "alice"})),
    # a properties file's continued lines join with spaces; words need no quotes
    (f"{SCRAM} Required \\\n    username=alice\n    password=alice-secret ;",
     JaasLoginModule(SCRAM, "required", {"username": "alice", "password": "alice-secret"})),
    (f'{PLAIN} optional username="a \\"quoted\\" name" password="back\\\\slash;=";',
     JaasLoginModule(PLAIN, "optional", {"username": 'a "quoted" name',
                                         "password": "back\\slash;="})),
    (f"{PLAIN} sufficient;", JaasLoginModule(PLAIN, "sufficient", {})),
    (f'{PLAIN} requisite username="";', JaasLoginModule(PLAIN, "requisite", {"username": ""})),
])
def test_kafkas_examples_parse(line, expected):
    assert parse_jaas_config(line.replace("\\\n", " ")) == expected


@pytest.mark.parametrize(("line", "message"), [
    (f'{PLAIN} required username="alice"', "not terminated by semi-colon"),
    (f'{PLAIN} username="alice";', "invalid login module control flag 'username'"),
    (f"{PLAIN};", "control flag not specified"),
    (f"{PLAIN} mandatory;", "invalid login module control flag 'mandatory'"),
    (f"{PLAIN} required username=;", "value not specified for key 'username'"),
    (f"{PLAIN} required username;", "value not specified for key 'username'"),
    (f'{PLAIN} required username="alice;', "unterminated quoted string"),
    (f"{PLAIN} required; {SCRAM} required;", "contains 2 login modules, should be 1"),
    ("", "contains 0 login modules"),
])
def test_malformed_lines_say_what_is_wrong(line, message):
    with pytest.raises(ConfigError, match=message):
        parse_jaas_config(line)


def test_the_jaas_line_gives_the_login():
    scram = from_java_settings({"sasl.mechanism": "SCRAM-SHA-512",
                                "sasl.jaas.config": f'{SCRAM} required username="alice" '
                                                    'password="s3cr=t";'})
    assert (scram["sasl.username"], scram["sasl.password"]) == ("alice", "s3cr=t")
    plain = from_java_settings({"sasl.jaas.config": f"{PLAIN} required username=bob "
                                                    "password=pw;"})
    assert (plain["sasl.mechanism"], plain["sasl.username"]) == ("PLAIN", "bob")
    # this client's own keys win over the JAAS line
    both = from_java_settings({"sasl.mechanism": "PLAIN", "sasl.password": "other",
                               "sasl.jaas.config": f"{PLAIN} required username=a password=b;"})
    assert both["sasl.password"] == "other"
    security = resolve_security({"security.protocol": "SASL_PLAINTEXT",
                                 "sasl.mechanism": "SCRAM-SHA-256",
                                 "sasl.jaas.config": f'{SCRAM} required username="alice" '
                                                     'password="pw";'}, "h:9092")
    assert security.sasl is not None
    assert security.sasl[:3] == ("SCRAM-SHA-256", "alice", "pw")


@pytest.mark.parametrize(("settings", "message"), [
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config": f"{SCRAM} required username=a password=b;"},
     "ScramLoginModule does not log in with sasl.mechanism=PLAIN"),
    ({"sasl.jaas.config": f"{SCRAM} required username=a password=b;"},
     "does not log in with sasl.mechanism=GSSAPI"),
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config": f"{PLAIN} required username=a;"},
     "needs the password option"),
    ({"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"},
     "login module com.sun.security.auth.module.Krb5LoginModule is not supported"),
])
def test_a_login_that_cannot_work_is_refused(settings, message):
    with pytest.raises(ConfigError, match=message):
        from_java_settings(settings)


def _claims(token: str) -> dict[str, object]:
    header, body, signature = token.split(".")
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "none"}
    assert signature == ""
    return dict(json.loads(base64.urlsafe_b64decode(body + "==")))


def test_the_unsecured_oauthbearer_token_is_kafkas():
    options = {"unsecuredLoginStringClaim_sub": "alice", "unsecuredLoginNumberClaim_n": "7",
               "unsecuredLoginListClaim_scope": ",read,write",
               "unsecuredLoginLifetimeSeconds": "60", "unsecuredLoginExtension_traceId": "abc"}
    claims = _claims(unsecured_token(options, now_s=1000.0))
    assert claims == {"sub": "alice", "n": 7, "scope": ["read", "write"], "iat": 1000.0,
                      "exp": 1060.0}
    message = client_first_message(options, now_s=1000.0)
    assert message.startswith(b"n,,\x01auth=Bearer ")
    assert message.endswith(b"\x01traceId=abc\x01\x01")
    security = resolve_security({"security.protocol": "SASL_PLAINTEXT",
                                 "sasl.jaas.config": f'{OAUTH} required '
                                                     'unsecuredLoginStringClaim_sub="alice";'},
                                "h:9092")
    assert security.sasl is not None
    assert (security.sasl.mechanism, security.sasl.username) == ("OAUTHBEARER", "alice")
    with pytest.raises(ConfigError, match="set unsecuredLoginStringClaim_sub"):
        resolve_security({"security.protocol": "SASL_PLAINTEXT",
                          "sasl.jaas.config": f"{OAUTH} required;"}, "h:9092")


def test_pem_stores_are_read_and_java_stores_refused_naming_key_and_file(tmp_path):
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    keystore = tmp_path / "client.pem"
    keystore.write_text("-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n")
    out = from_java_settings({"ssl.truststore.location": str(pem), "ssl.truststore.type": "PEM",
                              "ssl.keystore.location": str(keystore)})
    assert out["ssl.ca.location"] == str(pem)
    assert out["ssl.certificate.location"] == out["ssl.key.location"] == str(keystore)
    jks = tmp_path / "client.truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02")
    with pytest.raises(ConfigError, match=(
            f"^ssl.truststore.location {jks}: not a PEM file .*set ssl.truststore.type=PEM")):
        from_java_settings({"ssl.truststore.location": str(jks)})
    with pytest.raises(ConfigError, match=(
            f"^ssl.keystore.location {jks}: a PKCS12 store; this client reads PEM only")):
        from_java_settings({"ssl.keystore.location": str(jks), "ssl.keystore.type": "PKCS12"})
    with pytest.raises(ConfigError, match=r"^ssl\.truststore\.location .*missing\.pem: No such"):
        from_java_settings({"ssl.truststore.location": str(tmp_path / "missing.pem")})
