"""A failing disk on every durable write path: the client gets Kafka's error, nothing that was
acknowledged is lost (the broker is restarted on the same dir and everything is read back), and
the broker serves again once the fault clears.

The faults are injected at the syscall seam (``trio_broker.testing.disk_faults``): the real
``OSError`` with ENOSPC or EIO, raised where the write, fsync or rename is made.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from trio_broker.client.blocking import BlockingClient, TopicPartition
from trio_broker.client.core import offsets as offset_requests
from trio_broker.client.core.produce import init_producer_id_request, parse_init_producer_id
from trio_broker.client.core.structs import OffsetAndMetadata
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.errors import ErrorCode
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker
from trio_broker.testing.disk_faults import DiskFaults

STORAGE = confluent_kafka.KafkaError.KAFKA_STORAGE_ERROR
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture
def faults() -> Iterator[DiskFaults]:
    with DiskFaults() as installed:
        yield installed


@pytest.fixture
def settings(tmp_path: Path) -> dict[str, Any]:
    return {**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data")}


class Broker:
    """A broker that can be restarted on the same dir."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.threaded = ThreadedBroker(**settings).start()

    @property
    def bootstrap(self) -> str:
        return self.threaded.bootstrap_servers

    def restart(self) -> None:
        self.threaded.stop()
        self.threaded = ThreadedBroker(**self.settings).start()


@pytest.fixture
def broker(settings: dict[str, Any]) -> Iterator[Broker]:
    running = Broker(settings)
    yield running
    running.threaded.stop()


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> list[confluent_kafka.KafkaError]:
    """Produce with acks=all and no retries (a retry would hide the first answer); the delivery
    errors (None when acknowledged), in order."""
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "retries": 0,
        "enable.idempotence": False, "message.timeout.ms": 5000, "linger.ms": 0})
    errors: list[Any] = []
    for value in values:
        producer.produce(topic, value=value, partition=0,
                         on_delivery=lambda err, _msg: errors.append(err))
        producer.flush(10)  # one batch per record: the fault hits exactly one
    assert len(errors) == len(values)
    return errors


def _read_all(bootstrap: str, topic: str, *, isolation: str = "read_uncommitted",
              ) -> list[bytes]:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
        "isolation.level": isolation, "enable.partition.eof": True})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    got: list[bytes] = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            assert msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, msg.error()
            break
        got.append(msg.value())
    consumer.close()
    return got


# --- partition logs ------------------------------------------------------------------------

#: name: (the fault, whether it hits the flush that follows the batch's write)
PRODUCE_FAULTS = {
    # a short write then ENOSPC: the half-written batch must not stay in the segment
    "segment write, torn": (dict(op="write", path=r"/t-0/\d+\.log$", error=errno.ENOSPC,
                                 partial=True), False),
    "segment write": (dict(op="write", path=r"/t-0/\d+\.log$", error=errno.EIO), False),
    # flush.messages=1: the produce waits for the segment's fsync
    "segment fsync": (dict(op="fsync", path=r"/t-0/\d+\.log$", error=errno.EIO), True),
    # index entries are written to the file when the log is flushed
    "offset index write": (dict(op="write", path=r"/t-0/\d+\.index$", error=errno.ENOSPC),
                           True),
    "time index write": (dict(op="write", path=r"/t-0/\d+\.timeindex$", error=errno.EIO),
                         True),
}


@pytest.mark.parametrize("fault", list(PRODUCE_FAULTS))
def test_produce_fault(broker: Broker, faults: DiskFaults, fault: str) -> None:
    """A failed write is rolled back and answered KAFKA_STORAGE_ERROR, and the partition takes
    the next batch once the disk works; a failed flush takes the log dir offline until a
    restart, as Kafka does, and the restart recovers what the disk holds."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    config = {"flush.messages": "1", "segment.bytes": "1024", "index.interval.bytes": "1"}
    for future in admin.create_topics([NewTopic(name, 1, 1, config=config)
                                       for name in ("t", "u")]).values():
        future.result(10)
    values = [b"before-%d-" % i + bytes(300) for i in range(5)]
    assert _produce(broker.bootstrap, "t", values) == [None] * 5
    spec, in_flush = PRODUCE_FAULTS[fault]
    injected = faults.add(**spec)
    failed = _produce(broker.bootstrap, "t", [b"failed" + bytes(300)])
    assert injected.failed == 1
    assert failed[0] is not None
    assert failed[0].code() == STORAGE, failed
    faults.clear()
    if in_flush:
        # every partition of the dir is offline (no leader), though the disk works again
        topics = admin.list_topics(timeout=10).topics
        for topic in ("t", "u"):
            [partition] = topics[topic].partitions.values()
            assert partition.leader == -1
            assert partition.error.code() == STORAGE
        broker.restart()
        # written before its fsync failed: the restart's recovery finds it whole on disk
        values.append(b"failed" + bytes(300))
    after = [b"after-%d-" % i + bytes(300) for i in range(5)]
    assert _produce(broker.bootstrap, "t", after) == [None] * 5
    assert _produce(broker.bootstrap, "u", [b"u"]) == [None]
    read = _read_all(broker.bootstrap, "t")
    assert read == [*values, *after]
    broker.restart()
    assert _read_all(broker.bootstrap, "t") == read


def test_new_partition_and_producer_id_faults(broker: Broker, faults: DiskFaults) -> None:
    """A partition whose first leader epoch cannot be recorded fails its CreateTopics and leaves
    no directory behind (the retry succeeds, a restart adopts nothing); an id block that cannot
    be reserved answers InitProducerId KAFKA_STORAGE_ERROR instead of dropping the connection."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    injected = faults.add("write", path=r"/t-1/leader-epoch-checkpoint", error=errno.ENOSPC)
    assert _admin_error(admin.create_topics([NewTopic("t", 2, 1)])["t"]) == STORAGE
    assert injected.failed == 1
    data = Path(broker.settings["log_dirs"])
    assert not [p.name for p in data.iterdir() if p.name.startswith("t-")]
    faults.clear()
    assert _admin_error(admin.create_topics([NewTopic("t", 2, 1)])["t"]) == 0
    with BlockingClient(broker.bootstrap) as client:
        def init_producer_id() -> tuple[int, int, int]:
            return parse_init_producer_id(client.any_connection().request(
                ApiKey.InitProducerId, lambda v: init_producer_id_request(v)))

        faults.add("replace", path=r"/producer-id-block$", error=errno.EIO)
        assert init_producer_id()[0] == ErrorCode.KAFKA_STORAGE_ERROR
        faults.clear()
        code, producer_id, _ = init_producer_id()
        assert code == ErrorCode.NONE
    broker.restart()
    assert len(AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(
        timeout=10).topics["t"].partitions) == 2
    with BlockingClient(broker.bootstrap) as client:
        code, after_restart, _ = parse_init_producer_id(client.any_connection().request(
            ApiKey.InitProducerId, lambda v: init_producer_id_request(v)))
        assert code == ErrorCode.NONE
        assert after_restart > producer_id  # the reserved block survived


def test_delete_records_checkpoint_fault(broker: Broker, faults: DiskFaults) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(10)
    assert _produce(broker.bootstrap, "t", [b"%d" % i for i in range(6)]) == [None] * 6
    injected = faults.add("replace", path="log-start-offset-checkpoint$")
    [future] = admin.delete_records([confluent_kafka.TopicPartition("t", 0, 2)]).values()
    with pytest.raises(confluent_kafka.KafkaException) as failed:
        future.result(10)
    assert failed.value.args[0].code() == STORAGE
    assert injected.failed == 1
    faults.clear()
    [future] = admin.delete_records([confluent_kafka.TopicPartition("t", 0, 3)]).values()
    assert future.result(10).low_watermark == 3
    broker.restart()
    assert _read_all(broker.bootstrap, "t") == [b"3", b"4", b"5"]


def test_cleaner_swap_fault(broker: Broker, faults: DiskFaults) -> None:
    broker.threaded.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "300"})
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(40):  # one batch each: many segments to clean
        producer.produce("c", key=b"k%d" % (i % 4), value=b"v%d" % i, partition=0)
        assert producer.flush(10) == 0
    injected = faults.add("replace", path=r"/c-0/", times=None)
    with pytest.raises(OSError, match="Input/output error"):
        broker.threaded.compact("c")
    assert injected.failed >= 1
    faults.clear()
    broker.threaded.compact("c")
    broker.restart()
    latest = {}
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "r", "enable.partition.eof": True})
    consumer.assign([confluent_kafka.TopicPartition("c", 0, confluent_kafka.OFFSET_BEGINNING)])
    while (msg := consumer.poll(5)) is not None and not msg.error():
        latest[msg.key()] = msg.value()
    consumer.close()
    assert latest == {b"k%d" % k: b"v%d" % (36 + k) for k in range(4)}


# --- the coordinators' files ---------------------------------------------------------------

def _raw_commit(client: BlockingClient, group: str, offset: int) -> int:
    tp = TopicPartition("t", 0)
    body = client.coordinator(group).request(
        ApiKey.OffsetCommit, lambda v: offset_requests.offset_commit_request(
            v, group, {tp: OffsetAndMetadata(offset, "")}))
    return offset_requests.parse_offset_commit(body)[tp]


@pytest.mark.parametrize("fault", [
    dict(op="write", path=r"commits\.log$", error=errno.ENOSPC, partial=True),
    dict(op="fsync", path=r"commits\.log$", error=errno.EIO),
], ids=["write, torn", "fsync"])
def test_offset_commit_fault(broker: Broker, faults: DiskFaults, fault: dict[str, Any]) -> None:
    broker.threaded.create_topic("t")
    tp = TopicPartition("t", 0)
    with BlockingClient(broker.bootstrap) as client:
        assert _raw_commit(client, "g", 3) == ErrorCode.NONE
        injected = faults.add(**fault)
        assert _raw_commit(client, "g", 5) == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert injected.failed == 1
        # the failed commit changed nothing
        assert client.committed("g", [tp])[tp].offset == 3
        faults.clear()
        assert _raw_commit(client, "g", 7) == ErrorCode.NONE
        assert _raw_commit(client, "g", 8) == ErrorCode.NONE
    broker.restart()
    with BlockingClient(broker.bootstrap) as client:
        assert client.committed("g", [tp])[tp].offset == 8


def test_group_metadata_fault(broker: Broker, faults: DiskFaults) -> None:
    """A consumer's join whose group record cannot be written is refused, and the consumer's
    retry joins once the disk works again."""
    broker.threaded.create_topic("t")
    assert _produce(broker.bootstrap, "t", [b"a", b"b"]) == [None, None]
    injected = faults.add("write", path=r"groups\.log$", error=errno.ENOSPC, partial=True)
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "members",
        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["t"])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 2 and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            got.append(msg.value())
        if injected.failed:
            faults.clear()
    assert injected.failed == 1
    assert got == [b"a", b"b"]
    consumer.commit(asynchronous=False)
    consumer.close()
    broker.restart()
    with BlockingClient(broker.bootstrap) as client:
        tp = TopicPartition("t", 0)
        assert client.committed("members", [tp])[tp].offset == 2


@pytest.mark.parametrize("fault", [
    dict(op="write", path=r"transactions\.log$", error=errno.ENOSPC, partial=True),
    dict(op="fsync", path=r"transactions\.log$", error=errno.EIO),
], ids=["write, torn", "fsync"])
def test_transaction_log_fault(broker: Broker, faults: DiskFaults, fault: dict[str, Any]) -> None:
    broker.threaded.create_topic("t")
    with BlockingClient(broker.bootstrap) as client:
        def init_producer_id() -> int:
            body = client.any_connection().request(
                ApiKey.InitProducerId, lambda v: init_producer_id_request(
                    v, transactional_id="tx", transaction_timeout_ms=10_000))
            return parse_init_producer_id(body)[0]

        injected = faults.add(**fault)
        assert init_producer_id() == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert injected.failed == 1
        faults.clear()
    producer = confluent_kafka.Producer({
        "bootstrap.servers": broker.bootstrap, "transactional.id": "tx"})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce("t", value=b"committed", partition=0)
    producer.commit_transaction(10)
    broker.restart()
    assert _read_all(broker.bootstrap, "t", isolation="read_committed") == [b"committed"]


# --- admin state -----------------------------------------------------------------------------

def _admin_error(future: Any) -> int:
    try:
        future.result(10)
    except confluent_kafka.KafkaException as exc:
        return int(exc.args[0].code())
    return 0


def test_admin_write_faults(tmp_path: Path, faults: DiskFaults) -> None:
    """CreateTopics, CreateAcls, IncrementalAlterConfigs and AlterUserScramCredentials each
    answer an error when their file cannot be written, change nothing, and work once the disk
    does; what they stored survives a restart."""
    broker = Broker({**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                     "authorizer_class_name": AUTHORIZER,
                     "allow_everyone_if_no_acl_found": True})
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        acl = AclBinding(ResourceType.TOPIC, "other", ResourcePatternType.LITERAL, "User:alice",
                         "*", AclOperation.READ, AclPermissionType.ALLOW)
        node = str(broker.threaded.broker.state.config.node_id)
        config = ConfigResource(ResourceType.BROKER, node, incremental_configs=[ConfigEntry(
            "log.cleaner.threads", "2", incremental_operation=AlterConfigOpType.SET)])
        scram = UserScramCredentialUpsertion(
            "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"secret")
        calls = {
            "CreateTopics": (r"topic-configs/", lambda: admin.create_topics(
                [NewTopic("t", 1, 1)])["t"]),
            "CreateAcls": (r"acls\.json", lambda: admin.create_acls([acl])[acl]),
            "IncrementalAlterConfigs": (r"broker-configs\.json", lambda: next(iter(
                admin.incremental_alter_configs([config]).values()))),
            "AlterUserScramCredentials": (r"scram-credentials\.json",
                                          lambda: admin.alter_user_scram_credentials(
                                              [scram])["bob"]),
        }
        for name, (path, call) in calls.items():
            for op in ("write", "fsync", "replace"):
                injected = faults.add(op, path=path, error=errno.ENOSPC)
                assert _admin_error(call()) == STORAGE, (name, op)
                assert injected.failed == 1, (name, op)
                faults.clear()
            assert _admin_error(call()) == 0, name
        broker.restart()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert admin.list_topics(timeout=10).topics.keys() >= {"t"}
        assert admin.describe_acls(AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
            AclPermissionType.ANY)).result(10) == [acl]
        [described] = admin.describe_configs([ConfigResource(ResourceType.BROKER, node)]).values()
        assert described.result(10)["log.cleaner.threads"].value == "2"
        [users] = admin.describe_user_scram_credentials(["bob"]).values()
        assert users.result(10).scram_credential_infos[0].iterations == 4096
    finally:
        broker.threaded.stop()
