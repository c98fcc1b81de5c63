"""SSL principals print as Java's ``X500Principal.getName()`` (RFC 2253), so two subjects never
share a principal: a client cannot name itself into another's ACLs or into super.users."""

from __future__ import annotations

import datetime
import ssl
from pathlib import Path

import pytest
import trio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID

from tests.security_files import TlsFiles
from tests.wire import RawClient
from trio_broker import open_broker
from trio_broker.broker.security.x500 import subject_name
from trio_broker.client.core.admin import NewTopic, create_topics_request
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.errors import ErrorCode

A = x509.NameAttribute


class Issuer:
    """A CA made with ``cryptography``, issuing client certificates with any subject."""

    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([A(NameOID.COMMON_NAME, "principal test CA")])
        self.cert = self._sign(name, name, self.key.public_key(), ca=True)

    def _sign(self, subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey,
              *, ca: bool = False) -> x509.Certificate:
        now = datetime.datetime.now(datetime.UTC)
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                .public_key(public_key).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1))
                .not_valid_after(now + datetime.timedelta(hours=1))
                .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
                .sign(self.key, hashes.SHA256()))

    def issue(self, subject: x509.Name) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key = ec.generate_private_key(ec.SECP256R1())
        return self._sign(subject, self.cert.subject, key.public_key()), key

    def der(self, subject: x509.Name) -> bytes:
        return self.issue(subject)[0].public_bytes(serialization.Encoding.DER)


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


def name(*rdns: list[x509.NameAttribute]) -> x509.Name:
    """A Name from RDNs in DER order (the last prints first)."""
    return x509.Name([x509.RelativeDistinguishedName(rdn) for rdn in rdns])


@pytest.mark.parametrize(("subject", "expected"), [
    (name([A(NameOID.ORGANIZATION_NAME, "corp")], [A(NameOID.COMMON_NAME, "admin")]),
     "CN=admin,O=corp"),
    (name([A(NameOID.COMMON_NAME, "admin,O=corp")]), r"CN=admin\,O\=corp"),
    # a multi-valued RDN prints in its DER order (a SET OF is sorted by encoding)
    (name([A(NameOID.COMMON_NAME, "admin"), A(NameOID.ORGANIZATION_NAME, "corp")]),
     "O=corp+CN=admin"),
    (name([A(NameOID.COMMON_NAME, "a+b;c<d>e\"f\\g#h")]), r'CN=a\+b\;c\<d\>e\"f\\g\#h'),
    (name([A(NameOID.COMMON_NAME, "  #lead")]), r"CN=\ \ \#lead"),
    (name([A(NameOID.COMMON_NAME, "trail  ")]), r"CN=trail\ \ "),
    (name([A(NameOID.COMMON_NAME, "in side")]), "CN=in side"),
    (name([A(NameOID.COMMON_NAME, "Zo\u00eb")]), "CN=Zo\u00eb"),
    (name([A(NameOID.COMMON_NAME, "bmp", _ASN1Type.BMPString)]), "CN=bmp"),
    (name([A(NameOID.DOMAIN_COMPONENT, "example")], [A(NameOID.USER_ID, "u1")],
          [A(NameOID.STREET_ADDRESS, "Main St")]), "STREET=Main St,UID=u1,DC=example"),
    # no RFC 2253 keyword: the OID and the hex of the DER value (IA5String "a@b")
    (name([A(NameOID.COMMON_NAME, "x")], [A(NameOID.EMAIL_ADDRESS, "a@b")]),
     "1.2.840.113549.1.9.1=#1603614062,CN=x"),
])
def test_subject_prints_as_java_x500_principal(issuer: Issuer, subject: x509.Name,
                                               expected: str) -> None:
    assert subject_name(issuer.der(subject)) == expected


def test_subjects_that_used_to_collide_print_apart(issuer: Issuer) -> None:
    subjects = [name([A(NameOID.COMMON_NAME, "admin,O=corp")]),
                name([A(NameOID.ORGANIZATION_NAME, "corp")], [A(NameOID.COMMON_NAME, "admin")]),
                name([A(NameOID.ORGANIZATION_NAME, "corp"), A(NameOID.COMMON_NAME, "admin")])]
    printed = {subject_name(issuer.der(s)) for s in subjects}
    assert len(printed) == 3


def _pem_files(d: Path, issuer: Issuer, subject: x509.Name, stem: str) -> Path:
    cert, key = issuer.issue(subject)
    path = d / f"{stem}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return path


async def test_a_crafted_common_name_is_not_the_super_user(tmp_path: Path, tls_files: TlsFiles,
                                                           issuer: Issuer) -> None:
    ca = tmp_path / "client-ca.pem"
    ca.write_bytes(issuer.cert.public_bytes(serialization.Encoding.PEM))
    admin = _pem_files(tmp_path, issuer, name([A(NameOID.ORGANIZATION_NAME, "corp")],
                                              [A(NameOID.COMMON_NAME, "admin")]), "admin")
    crafted = _pem_files(tmp_path, issuer, name([A(NameOID.COMMON_NAME, "admin,O=corp")]),
                         "crafted")
    async with open_broker(listeners="SSL://127.0.0.1:0", log_dirs=str(tmp_path / "data"),
                           ssl_certfile=str(tls_files.server_pem), ssl_cafile=str(ca),
                           ssl_client_auth="required",
                           authorizer_class_name="org.apache.kafka.metadata.authorizer."
                           "StandardAuthorizer", super_users="User:CN=admin,O=corp") as broker:

        async def create(pem: Path, topic: str) -> int:
            ctx = ssl.create_default_context(cafile=str(tls_files.ca_pem))
            ctx.load_cert_chain(str(pem))
            stream = trio.SSLStream(await trio.open_tcp_stream(broker.host, broker.port), ctx,
                                    server_hostname="127.0.0.1")
            client = RawClient(stream)
            try:
                answer = await client.request(ApiKey.CreateTopics, 4, body=create_topics_request(
                    4, [NewTopic(topic, 1, 1)], timeout_ms=5000))
                return int(answer.topics[0].error_code)
            finally:
                await client.aclose()

        assert await create(crafted, "by-crafted") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert await create(admin, "by-admin") == ErrorCode.NONE
        assert set(broker.state.logs.topics()) == {"by-admin"}
