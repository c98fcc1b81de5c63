"""TLS and SASL listeners over real sockets: the raw protocol and real clients."""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.security_files import LIGATURE_PASSWORD, TlsFiles, password
from tests.wire import RawClient, size_prefix
from trio_broker import open_broker
from trio_broker.broker.config import ConfigError
from trio_broker.broker.security import add_user
from trio_broker.client.core.sasl import ScramClient
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.batch import read_batch_header
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.records import build_batch, decode_batches
from trio_broker.testing import ThreadedBroker

API_VERSIONS, METADATA = ApiKey.ApiVersions, ApiKey.Metadata
HANDSHAKE, AUTHENTICATE = ApiKey.SaslHandshake, ApiKey.SaslAuthenticate
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def client_context(tls: TlsFiles, *, with_cert: bool = False) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(tls.ca_pem))
    if with_cert:
        ctx.load_cert_chain(str(tls.client_pem))
    return ctx


async def connect(broker: Any, tls: TlsFiles | None = None, **kw: Any) -> RawClient:
    stream: Any = await trio.open_tcp_stream(broker.host, broker.port)
    if tls is not None:
        stream = trio.SSLStream(stream, client_context(tls, **kw), server_hostname="127.0.0.1")
        await stream.do_handshake()
    return RawClient(stream)


async def login(client: RawClient, mechanism: str, user: str, pw: str,
                version: int = 1) -> Any:
    """Handshake and authenticate; returns the last SaslAuthenticate response."""
    hs = await client.request(HANDSHAKE, 1, mechanism=mechanism)
    assert hs.error_code == 0, hs
    if mechanism == "PLAIN":
        return await client.request(AUTHENTICATE, version, auth_bytes=f"\0{user}\0{pw}".encode())
    scram = ScramClient(mechanism, user, pw)
    first = await client.request(AUTHENTICATE, version, auth_bytes=scram.first_message())
    assert first.error_code == 0, first
    final = await client.request(AUTHENTICATE, version,
                                 auth_bytes=scram.final_message(first.auth_bytes))
    if final.error_code == 0:
        scram.verify_server_final(final.auth_bytes)
    return final


def closed_reasons(broker: Any) -> str:
    return broker.state.metrics.expose().decode()


def sasl_settings(tmp_path: Path, users_file: Path, listeners: str, **extra: Any) -> dict:
    return {"listeners": listeners, "log_dirs": str(tmp_path / "data"),
            "sasl_credentials_file": str(users_file), "shutdown_timeout_ms": 1000,
            "group_initial_rebalance_delay_ms": 0, **extra}


# --- TLS ------------------------------------------------------------------------------------

async def test_ssl_listener_and_client_auth_modes(tmp_path, tls_files, caplog):
    base = {"log_dirs": str(tmp_path / "data"), "ssl_certfile": str(tls_files.server_cert),
            "ssl_keyfile": str(tls_files.server_key), "ssl_cafile": str(tls_files.ca_pem)}
    async with open_broker(listeners="SSL://127.0.0.1:0", ssl_client_auth="required",
                           **base) as broker:
        with_cert = await connect(broker, tls_files, with_cert=True)
        assert (await with_cert.request(API_VERSIONS, 3, client_software_name="t",
                                        client_software_version="1")).error_code == 0
        # Without a certificate: under TLS 1.3 the client learns of the refusal on its first
        # read, after its own side of the handshake completed.
        anonymous = await connect(broker, tls_files)
        with pytest.raises(trio.BrokenResourceError):
            await anonymous.request(API_VERSIONS, 0)
        # A plaintext client on a TLS port is closed, and the broker goes on.
        plain = await RawClient.connect(broker.host, broker.port)
        await plain.send(API_VERSIONS, 0)
        assert await plain.is_closed_by_peer()
        assert (await with_cert.request(METADATA, 5, topics=[],
                                        allow_auto_topic_creation=False)).brokers
        await with_cert.aclose()
        assert 'reason="ssl_handshake_failed"' in closed_reasons(broker)
    async with open_broker(listeners="SSL://127.0.0.1:0", ssl_client_auth="requested",
                           **base) as broker:
        with caplog.at_level(logging.DEBUG, logger="trio_broker.broker.network.processor"):
            for with_cert in (False, True):
                client = await connect(broker, tls_files, with_cert=with_cert)
                assert (await client.request(API_VERSIONS, 0)).error_code == 0
                await client.aclose()
        principals = [r.args[-1] for r in caplog.records if "TLS principal" in r.message]
        assert principals[0] is None
        assert principals[1].startswith("User:CN=client-one,OU=")  # RFC 2253 order, as Kafka


async def test_tls_handshake_that_never_starts_is_closed_by_the_idle_timeout(
        tmp_path, tls_files, autojump_clock):
    async with open_broker(listeners="SSL://127.0.0.1:0", log_dirs=str(tmp_path / "d"),
                           ssl_certfile=str(tls_files.server_pem),
                           connections_max_idle_ms=30_000) as broker:
        silent = await RawClient.connect(broker.host, broker.port)
        start = trio.current_time()
        assert await silent.is_closed_by_peer()
        assert 30 <= trio.current_time() - start < 32


# --- SASL over the raw protocol -------------------------------------------------------------

@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_sasl_login_then_requests(tmp_path, users_file, mechanism):
    async with open_broker(**sasl_settings(tmp_path, users_file,
                                           "SASL_PLAINTEXT://127.0.0.1:0")) as broker:
        client = await connect(broker)
        assert (await client.request(API_VERSIONS, 0)).error_code == 0
        assert (await client.request(API_VERSIONS, 0)).error_code == 0  # retries are allowed
        done = await login(client, mechanism, "alice", password("alice"))
        assert (done.error_code, done.error_message, done.session_lifetime_ms) == (0, None, 0)
        meta = await client.request(METADATA, 5, topics=[], allow_auto_topic_creation=False)
        assert meta.brokers[0].port == broker.port
        again = await client.request(HANDSHAKE, 1, mechanism=mechanism)
        assert again.error_code == ErrorCode.ILLEGAL_SASL_STATE
        auth = await client.request(AUTHENTICATE, 0, auth_bytes=b"x")
        assert auth.error_code == ErrorCode.ILLEGAL_SASL_STATE
        await client.aclose()


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_wrong_password_is_answered_late_and_closed(tmp_path, users_file, mechanism):
    # Real time: PLAIN checks the password in a worker thread, which an autojump clock ignores.
    async with open_broker(**sasl_settings(
            tmp_path, users_file, "SASL_PLAINTEXT://127.0.0.1:0",
            connection_failed_authentication_delay_ms=300)) as broker:
        client = await connect(broker)
        good = await connect(broker)
        start = trio.current_time()
        failed = await login(client, mechanism, "alice", "not-the-password")
        assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "Authentication failed" in failed.error_message
        assert trio.current_time() - start >= 0.3
        assert await client.is_closed_by_peer()
        # an unknown user looks the same
        other = await connect(broker)
        failed = await login(other, mechanism, "mallory", "x")
        assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert (await login(good, mechanism, "bob", password("bob"))).error_code == 0
        assert 'reason="authentication_failed"} 2.0' in closed_reasons(broker)


async def test_requests_before_authentication_close_the_connection(tmp_path, users_file):
    async with open_broker(**sasl_settings(tmp_path, users_file,
                                           "SASL_PLAINTEXT://127.0.0.1:0",
                                           sasl_enabled_mechanisms="SCRAM-SHA-512")) as broker:
        # Metadata (or Produce) as the first request: no answer, closed.
        for api, version, fields in ((METADATA, 5, {"topics": None,
                                                    "allow_auto_topic_creation": True}),
                                     (AUTHENTICATE, 1, {"auth_bytes": b"n,,n=alice,r=x"})):
            client = await connect(broker)
            await client.send(api, version, **fields)
            assert await client.is_closed_by_peer()
        # After the handshake only SaslAuthenticate is allowed.
        client = await connect(broker)
        assert (await client.request(HANDSHAKE, 1, mechanism="SCRAM-SHA-512")).error_code == 0
        await client.send(API_VERSIONS, 0)
        assert await client.is_closed_by_peer()
        # An unknown mechanism: the enabled list comes back, then the connection closes.
        client = await connect(broker)
        resp = await client.request(HANDSHAKE, 1, mechanism="PLAIN")
        assert (resp.error_code, resp.mechanisms) == (ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                                      ["SCRAM-SHA-512"])
        assert await client.is_closed_by_peer()
        # A frame above sasl.server.max.receive.size before login is refused unread.
        client = await connect(broker)
        await client.send_raw(size_prefix(524_289) + b"\0" * 1024)
        assert await client.is_closed_by_peer()
        metrics = closed_reasons(broker)
        assert 'reason="authentication_required"} 3.0' in metrics
        assert 'reason="frame_size"} 1.0' in metrics
        assert broker.state.logs.topics() == {}  # nothing was auto-created


async def test_sasl_requests_on_a_plaintext_listener_are_illegal(trio_broker):
    client = await connect(trio_broker)
    assert (await client.request(HANDSHAKE, 1, mechanism="PLAIN")).error_code == \
        ErrorCode.ILLEGAL_SASL_STATE
    resp = await client.request(AUTHENTICATE, 1, auth_bytes=b"\0a\0b")
    assert resp.error_code == ErrorCode.ILLEGAL_SASL_STATE
    versions = {k.api_key: (k.min_version, k.max_version)
                for k in (await client.request(API_VERSIONS, 0)).api_keys}
    assert versions[HANDSHAKE] == (0, 1)
    assert versions[AUTHENTICATE] == (0, 2)


async def test_users_added_while_running_can_log_in(tmp_path, users_file):
    users = tmp_path / "users.json"
    users.write_bytes(users_file.read_bytes())
    async with open_broker(**sasl_settings(tmp_path, users, "SASL_PLAINTEXT://127.0.0.1:0",
                                           connection_failed_authentication_delay_ms=0)) as b:
        assert (await login(await connect(b), "SCRAM-SHA-256", "dave", "pw")).error_code == 58
        add_user(users, "dave", "pw")
        assert (await login(await connect(b), "SCRAM-SHA-256", "dave", "pw")).error_code == 0


def test_security_config_errors(tmp_path, tls_files, users_file):
    from trio_broker.broker.config import load_config

    with pytest.raises(ConfigError, match=r"needs\ ssl\.certfile"):
        load_config(environ={}, overrides={"listeners": "SSL://127.0.0.1:0"})
    # no sasl.credentials.file: the users live in the log dir, as Kafka keeps them with no
    # setting (AlterUserScramCredentials adds them)
    cfg = load_config(environ={}, overrides={"listeners": "SASL_SSL://127.0.0.1:0",
                                             "ssl.keystore.location": str(tls_files.server_pem),
                                             "log.dirs": str(tmp_path)})
    assert cfg.scram_credentials_path == tmp_path / "scram-credentials.json"
    with pytest.raises(ConfigError, match=r"sasl\.enabled\.mechanisms"):
        load_config(environ={}, overrides={"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                                           "sasl.credentials.file": str(users_file),
                                           "sasl.enabled.mechanisms": "GSSAPI"})
    with pytest.raises(ConfigError, match=r"needs\ ssl\.cafile"):
        load_config(environ={}, overrides={"ssl.client.auth": "required"})
    cfg = load_config(environ={}, overrides={"ssl.truststore.location": "/x/ca.pem"})
    assert cfg.ssl_cafile == "/x/ca.pem"


async def test_unreadable_certificate_fails_at_start(tmp_path):
    with pytest.raises(BaseException) as info:  # noqa: PT011 - an exception group from trio
        async with open_broker(listeners="SSL://127.0.0.1:0", log_dirs=str(tmp_path),
                               ssl_certfile=str(tmp_path / "missing.pem")):
            pass
    leaf = info.value
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    assert isinstance(leaf, ConfigError)
    assert "ssl.certfile" in str(leaf)


async def test_describe_configs_hides_the_key_password(tmp_path, tls_files):
    async with open_broker(log_dirs=str(tmp_path), ssl_key_password="hunter2") as broker:
        client = await connect(broker)
        resource = request_class(ApiKey.DescribeConfigs).DescribeConfigsResource(
            resource_type=4, resource_name="0", configuration_keys=["ssl.key.password"])
        resp = await client.request(ApiKey.DescribeConfigs, 1, include_synonyms=False,
                                    resources=[resource])
        (entry,) = resp.results[0].configs
        assert (entry.name, entry.value, entry.is_sensitive) == ("ssl.key.password", None, True)


# --- real clients over SASL_SSL ---------------------------------------------------------------

@pytest.fixture(scope="module")
def sasl_ssl_broker(tmp_path_factory, tls_files, users_file):
    data = tmp_path_factory.mktemp("sasl-ssl")
    broker = ThreadedBroker(listeners="SASL_SSL://127.0.0.1:0", log_dirs=str(data),
                            ssl_certfile=str(tls_files.server_pem),
                            sasl_credentials_file=str(users_file),
                            group_initial_rebalance_delay_ms=0, shutdown_timeout_ms=1000).start()
    yield broker
    broker.stop()


def _confluent(broker, tls, mechanism, pw, topic, errors, user="alice") -> list[bytes]:
    import confluent_kafka

    conf = {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": pw,
            "ssl.ca.location": str(tls.ca_pem), "error_cb": errors.append}
    producer = confluent_kafka.Producer({**conf, "message.timeout.ms": 2000})
    acked = []
    producer.produce(topic, b"confluent", on_delivery=lambda e, m: acked.append(e))
    producer.flush(3)
    consumer = confluent_kafka.Consumer({**conf, "group.id": f"g-{topic}",
                                         "fetch.wait.max.ms": 10})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got = []
    delivered = bool(acked) and acked[0] is None  # (KafkaError == None misbehaves)
    deadline = time.monotonic() + (6 if delivered else 1.5)
    while time.monotonic() < deadline and not got:
        got = [m.value() for m in consumer.consume(10, timeout=0.2) if not m.error()]
    consumer.close()
    return got


def _kafka_python(broker, tls, mechanism, pw, topic, errors, user="alice") -> list[bytes]:
    import kafka
    import kafka.errors

    conf = {"bootstrap_servers": broker.bootstrap_servers, "security_protocol": "SASL_SSL",
            "sasl_mechanism": mechanism, "sasl_plain_username": user,
            "sasl_plain_password": pw, "ssl_cafile": str(tls.ca_pem),
            "request_timeout_ms": 3000, "bootstrap_timeout_ms": 2000}
    try:
        producer = kafka.KafkaProducer(max_block_ms=3000, **conf)
        producer.send(topic, b"kafka-python").get(10)
        producer.close()
        consumer = kafka.KafkaConsumer(**conf)
        tp = kafka.TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[bytes] = []
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            got = [m.value for ms in consumer.poll(200).values() for m in ms]
        consumer.close()
        return got
    except kafka.errors.KafkaError as exc:
        errors.append(exc)
        return []


def _aiokafka(broker, tls, mechanism, pw, topic, errors, user="alice") -> list[bytes]:
    import aiokafka
    import aiokafka.errors
    from aiokafka.helpers import create_ssl_context

    conf = {"bootstrap_servers": broker.bootstrap_servers, "security_protocol": "SASL_SSL",
            "sasl_mechanism": mechanism, "sasl_plain_username": user,
            "sasl_plain_password": pw, "request_timeout_ms": 3000,
            "ssl_context": create_ssl_context(cafile=str(tls.ca_pem))}

    async def run() -> list[bytes]:
        producer = aiokafka.AIOKafkaProducer(**conf)
        try:
            await producer.start()
            await producer.send_and_wait(topic, b"aiokafka")
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(**conf, auto_offset_reset="earliest")
        try:
            await consumer.start()
            consumer.assign([aiokafka.TopicPartition(topic, 0)])
            await consumer.seek_to_beginning()
            batch = await consumer.getmany(timeout_ms=5000)
            return [m.value for msgs in batch.values() for m in msgs]
        finally:
            await consumer.stop()

    try:
        return asyncio.run(run())
    except aiokafka.errors.KafkaError as exc:
        errors.append(exc)
        return []


CLIENTS = {"confluent": _confluent, "kafka-python": _kafka_python, "aiokafka": _aiokafka}
PRODUCED = {"confluent": b"confluent", "kafka-python": b"kafka-python", "aiokafka": b"aiokafka"}


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_real_clients_authenticate_over_tls(sasl_ssl_broker, tls_files, unique_topic,
                                            client, mechanism):
    topic = sasl_ssl_broker.create_topic(unique_topic("sasl"))
    errors: list[Any] = []
    got = CLIENTS[client](sasl_ssl_broker, tls_files, mechanism, password("alice"), topic,
                          errors)
    assert got == [PRODUCED[client]], errors


@pytest.mark.parametrize("client", list(CLIENTS))
def test_passwords_are_hashed_as_typed(sasl_ssl_broker, tls_files, unique_topic, client):
    topic = sasl_ssl_broker.create_topic(unique_topic("utf8"))
    errors: list[Any] = []
    got = CLIENTS[client](sasl_ssl_broker, tls_files, "SCRAM-SHA-512", LIGATURE_PASSWORD,
                          topic, errors, user="ligature")
    assert got == [PRODUCED[client]], errors


@pytest.mark.parametrize(("client", "mechanism", "evidence"), [
    ("confluent", "SCRAM-SHA-256", "SASL authentication error: Authentication failed"),
    ("kafka-python", "PLAIN", "Authentication failed: Invalid username or password"),
    ("aiokafka", "SCRAM-SHA-512", "[Error 58] SaslAuthenticationFailed: Authentication failed"),
])
def test_real_clients_with_a_wrong_password_see_no_data(sasl_ssl_broker, tls_files,
                                                        unique_topic, caplog, client,
                                                        mechanism, evidence):
    topic = sasl_ssl_broker.create_topic(unique_topic("secret"))
    batch = bytearray(build_batch([(b"k", b"classified")]))
    log = sasl_ssl_broker.broker.state.logs.get_log(topic, 0)
    sasl_ssl_broker.call(lambda: log.append(batch, read_batch_header(batch), now_ms=0))
    errors: list[Any] = []
    with caplog.at_level(logging.INFO):
        got = CLIENTS[client](sasl_ssl_broker, tls_files, mechanism, "wrong", topic, errors)
    assert got == []
    assert errors, "the client reported no error"
    text = " ".join(str(e) for e in errors) + " " + caplog.text
    assert evidence in text
    # the record is still there and still the only one
    data = log.read(0, 1 << 20).records
    assert [r.value for _, rs in decode_batches(data) for r in rs] == [b"classified"]
