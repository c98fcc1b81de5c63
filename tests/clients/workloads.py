"""One short workload per real client, each under its own client id, for the compatibility
measurement: produce a few compressed records, consume them in a group, commit, read the
commit back, and (for clients with an admin API) the admin calls users make.

The versions each workload sends are what docs/compatibility.md's "exercised by" column may
claim (``tests/clients/test_compatibility.py``). Every workload checks its own results, so a
version is only counted as exercised when the exchange worked.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from typing import Any

import confluent_kafka
import trio

RECORDS = 5
TIMEOUT_S = 30

#: kafka-python releases pinned with ``api_version`` besides the unpinned client
KAFKA_PYTHON_PINS: list[tuple[int, ...]] = [(0, 10, 2), (0, 11), (1, 1), (2, 0), (2, 6)]

#: (bootstrap, SASL_PLAINTEXT bootstrap, topic) -> None; the topic has one partition
Workload = Callable[[str, str, str], None]


def client_id(label: str) -> str:
    return "compat-" + label.replace("@", "-").replace("_", "-")


def _values(label: str) -> list[bytes]:
    return [b"%s %d" % (label.encode(), i) for i in range(RECORDS)]


def _confluent(bootstrap: str, sasl: str, topic: str) -> None:
    from confluent_kafka import TopicCollection, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    cid = client_id("confluent-kafka")
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "client.id": cid,
                                         "compression.type": "lz4", "linger.ms": 5})
    start = int(time.time() * 1000)
    for i, value in enumerate(_values("confluent-kafka")):
        producer.produce(topic, value=value, partition=0, timestamp=start + i)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "client.id": cid, "group.id": cid,
        "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < RECORDS and time.monotonic() < deadline:
        got += [m.value() for m in consumer.consume(RECORDS, timeout=0.2) if m.error() is None]
    assert got == _values("confluent-kafka")
    consumer.commit(asynchronous=False)
    tp = TopicPartition(topic, 0)
    assert consumer.committed([tp], timeout=TIMEOUT_S)[0].offset == RECORDS
    consumer.close()

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": cid})
    assert admin.describe_cluster().result(TIMEOUT_S).nodes
    extra = f"{topic}-admin"
    admin.create_topics([NewTopic(extra, 1, 1)])[extra].result(TIMEOUT_S)
    described = admin.describe_topics(TopicCollection([extra]))[extra].result(TIMEOUT_S)
    assert described.topic_id is not None
    resource = ConfigResource(ResourceType.TOPIC, extra, incremental_configs=[ConfigEntry(
        "retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
    configs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, extra)])
    assert next(iter(configs.values())).result(TIMEOUT_S)["retention.ms"].value == "3600000"
    latest = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(TIMEOUT_S)
    assert latest.offset == RECORDS - 1
    groups = admin.list_consumer_groups().result(TIMEOUT_S)
    assert cid in {g.group_id for g in groups.valid}
    assert admin.describe_consumer_groups([cid])[cid].result(TIMEOUT_S).group_id == cid
    upsert = UserScramCredentialUpsertion(
        "compat", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"compat-secret")
    admin.alter_user_scram_credentials([upsert])["compat"].result(TIMEOUT_S)
    users = admin.describe_user_scram_credentials(["compat"])["compat"].result(TIMEOUT_S)
    assert users.scram_credential_infos
    admin.create_partitions([NewPartitions(extra, 2)])[extra].result(TIMEOUT_S)
    admin.delete_topics([extra])[extra].result(TIMEOUT_S)
    admin.delete_consumer_groups([cid])[cid].result(TIMEOUT_S)
    # the user just created logs in over SCRAM (SaslHandshake + SaslAuthenticate)
    login = AdminClient({"bootstrap.servers": sasl, "client.id": cid,
                         "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "compat",
                         "sasl.password": "compat-secret"})
    assert login.list_topics(timeout=TIMEOUT_S).topics


def _kcat(bootstrap: str, sasl: str, topic: str) -> None:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is missing: install the apt package kcat (make test does)"
    base = [kcat, "-b", bootstrap, "-X", f"client.id={client_id('kcat')}"]
    values = _values("kcat")

    def run(*args: str, stdin: bytes | None = None) -> bytes:
        done = subprocess.run([*base, *args], input=stdin, capture_output=True,
                              timeout=TIMEOUT_S, check=False)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        return done.stdout

    run("-P", "-t", topic, "-p", "0", "-z", "gzip", stdin=b"\n".join(values) + b"\n")
    got = run("-G", client_id("kcat"), "-X", "auto.offset.reset=earliest", "-e", "-u",
              "-f", "%s\n", topic)
    assert got.splitlines() == values


def _kafka_python(pin: tuple[int, ...] | None) -> Workload:
    label = "kafka-python" if pin is None else "kafka-python@" + ".".join(map(str, pin))

    def workload(bootstrap: str, sasl: str, topic: str) -> None:
        from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
        from kafka.admin import ConfigResource, ConfigResourceType

        cid = client_id(label)
        pinned = {} if pin is None else {"api_version": pin}
        producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=cid,
                                 compression_type="gzip", linger_ms=5, **pinned)
        for value in _values(label):
            producer.send(topic, value=value, partition=0)
        producer.flush(TIMEOUT_S)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id=cid, group_id=cid,
                                 enable_auto_commit=False, auto_offset_reset="earliest",
                                 fetch_max_wait_ms=100, **pinned)
        # closed whatever happens: a client left running after a failure reconnects in the
        # background (with jitter from the global random module) through later tests
        try:
            consumer.subscribe([topic])
            got: list[bytes] = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < RECORDS and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=200).values():
                    got += [r.value for r in records]
            assert got == _values(label), (len(got), consumer.assignment())
            consumer.commit()
            assert consumer.committed(TopicPartition(topic, 0)) == RECORDS
        finally:
            consumer.close()
        if pin is None:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=cid)
            try:
                described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC,
                                                                   topic)])
                assert described
                assert cid in str(admin.list_groups())
                assert admin.describe_cluster()
                _kafka_python_admin(admin, cid, topic)
            finally:
                admin.close()

    return workload


def _kafka_python_admin(admin: Any, group: str, topic: str) -> None:
    """The admin calls kafka-python 3 has for the newer APIs, on a topic of their own."""
    from kafka import TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic

    extra = f"{topic}-admin"
    admin.create_topics([NewTopic(extra, 1, 1)])
    admin.create_partitions({extra: NewPartitions(2)})
    [by_name] = admin.describe_topics([extra])
    [by_id] = admin.describe_topics([uuid.UUID(str(by_name["topic_id"]))])  # Metadata by id
    assert by_id["name"] == extra, by_id
    assert len(by_id["partitions"]) == 2
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, extra,
                                        configs={"retention.ms": "7200000"})])
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, extra, configs={
        "retention.ms": "7200000"})], incremental=False)
    tp = TopicPartition(topic, 0)
    assert admin.describe_log_dirs()
    assert admin.describe_producers([tp]) is not None
    assert admin.describe_topic_partitions([extra])
    assert admin.list_partition_reassignments() is not None
    admin.delete_group_offsets(group, [tp])
    admin.delete_groups([group])
    admin.delete_topics([extra])


def _aiokafka(bootstrap: str, sasl: str, topic: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    cid = client_id("aiokafka")

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=cid,
                                    compression_type="zstd", linger_ms=5)
        await producer.start()
        try:
            for value in _values("aiokafka"):
                await producer.send_and_wait(topic, value=value, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, client_id=cid,
                                    group_id=cid, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            got: list[bytes] = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < RECORDS and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got += [r.value for r in records]
            assert got == _values("aiokafka")
            await consumer.commit()
            assert await consumer.committed(TopicPartition(topic, 0)) == RECORDS
        finally:
            await consumer.stop()

    asyncio.run(run())


def _trio_client(bootstrap: str, sasl: str, topic: str) -> None:
    from trio_broker.client import TopicPartition, open_admin, open_consumer, open_producer

    cid = client_id("trio_broker.client")

    async def run() -> None:
        async with open_producer(bootstrap, client_id=cid, compression_type="snappy") as p:
            for value in _values("trio_broker.client"):
                await p.send(topic, value, partition=0)
        async with open_consumer(topic, bootstrap_servers=bootstrap, client_id=cid,
                                 group_id=cid, auto_offset_reset="earliest",
                                 enable_auto_commit=False) as consumer:
            got: list[bytes] = []
            with trio.fail_after(TIMEOUT_S):
                async for record in consumer:
                    got.append(record.value)
                    if len(got) == RECORDS:
                        break
            assert got == _values("trio_broker.client")
            await consumer.commit()
            assert await consumer.committed(TopicPartition(topic, 0)) == RECORDS
        async with open_admin(bootstrap, client_id=cid) as admin:
            assert (await admin.describe_cluster()).brokers
            assert "retention.ms" in (await admin.describe_topic_configs(topic))[topic]
            assert cid in {g.group_id for g in await admin.list_groups()}

    trio.run(run)


def _blocking_client(bootstrap: str, sasl: str, topic: str) -> None:
    from trio_broker.client.blocking import EARLIEST, LATEST, BlockingClient, TopicPartition
    from trio_broker.protocol.compression import Compression
    from trio_broker.protocol.records import build_batch

    cid = client_id("BlockingClient")
    tp = TopicPartition(topic, 0)
    with BlockingClient(bootstrap, client_id=cid) as client:
        batch = build_batch([(None, v) for v in _values("BlockingClient")],
                            compression=Compression.ZSTD)
        client.produce({tp: batch}, acks=-1)
        assert client.list_offsets({tp: EARLIEST})[tp] == 0
        assert client.list_offsets({tp: LATEST})[tp] == RECORDS
        assert client.fetch(tp, 0, max_bytes=1 << 20).records
        client.commit(cid, {tp: RECORDS})
        assert client.committed(cid, [tp])[tp].offset == RECORDS
        assert "retention.ms" in {e.name for e in client.describe_configs(topic)}


#: label in docs/compatibility.md -> workload
WORKLOADS: dict[str, Workload] = {
    "confluent-kafka": _confluent,
    "kcat": _kcat,
    "aiokafka": _aiokafka,
    "kafka-python": _kafka_python(None),
    **{"kafka-python@" + ".".join(map(str, pin)): _kafka_python(pin)
       for pin in KAFKA_PYTHON_PINS},
    "trio_broker.client": _trio_client,
    "BlockingClient": _blocking_client,
}
