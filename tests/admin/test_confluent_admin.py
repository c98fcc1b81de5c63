"""confluent-kafka's AdminClient against the broker: cluster, consumer groups and their offsets,
SCRAM users, topics, leader elections (librdkafka picks the newest versions both sides know)."""

from __future__ import annotations

import shutil
import time
import uuid

import confluent_kafka
import pytest
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    ElectionType,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclOperation,
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests.coordinator.group_workers import wait_for
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

TIMEOUT_S = 15


def admin_for(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _stable_consumer(bootstrap: str, group: str, topic: str) -> confluent_kafka.Consumer:
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "client.id": "member-1", "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False})
    c.subscribe([topic])
    wait_for(lambda: bool(c.poll(0.1) or c.assignment()), 30, "an assignment")
    return c


def test_describe_cluster(kafka_broker):
    admin = admin_for(kafka_broker.bootstrap_servers)
    state = kafka_broker.broker.state
    cluster = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT_S)
    assert cluster.cluster_id == state.cluster_id
    assert cluster.controller.id == state.node_id
    assert [(n.id, n.port) for n in cluster.nodes] == [(state.node_id, state.advertised_port)]
    assert {AclOperation.DESCRIBE, AclOperation.ALTER, AclOperation.CREATE,
            AclOperation.IDEMPOTENT_WRITE} <= set(cluster.authorized_operations)


def test_consumer_groups_listed_described_offsets_and_deleted(kafka_broker, unique_topic):
    bootstrap = kafka_broker.bootstrap_servers
    admin = admin_for(bootstrap)
    topic = kafka_broker.create_topic(unique_topic("grouped"), 3)
    active, idle = f"active-{uuid.uuid4().hex[:6]}", f"idle-{uuid.uuid4().hex[:6]}"
    consumer = _stable_consumer(bootstrap, active, topic)
    try:
        # alter_consumer_group_offsets: an admin (simple) commit creates the idle group.
        admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            idle, [TopicPartition(topic, 0, 5), TopicPartition(topic, 2, 7)])])[idle].result(
            TIMEOUT_S)
        listed = admin.list_consumer_groups().result(TIMEOUT_S)
        states = {g.group_id: g.state for g in listed.valid}
        assert states[active] == ConsumerGroupState.STABLE  # not UNKNOWN: ListGroups v4+
        assert states[idle] == ConsumerGroupState.EMPTY
        assert {g.type for g in listed.valid if g.group_id in (active, idle)} == {
            ConsumerGroupType.CLASSIC}
        only_stable = admin.list_consumer_groups(
            states={ConsumerGroupState.STABLE}).result(TIMEOUT_S)
        assert active in {g.group_id for g in only_stable.valid}
        assert idle not in {g.group_id for g in only_stable.valid}

        described = admin.describe_consumer_groups(
            [active, idle], include_authorized_operations=True)
        group = described[active].result(TIMEOUT_S)
        assert group.state == ConsumerGroupState.STABLE
        assert group.partition_assignor == "range"
        [member] = group.members
        assert member.client_id == "member-1"
        assert member.group_instance_id is None
        assert {tp.partition for tp in member.assignment.topic_partitions} == {0, 1, 2}
        assert AclOperation.READ in group.authorized_operations
        assert described[idle].result(TIMEOUT_S).state == ConsumerGroupState.EMPTY

        offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
            idle, [TopicPartition(topic, 0), TopicPartition(topic, 1)])])[idle].result(
            TIMEOUT_S)
        assert [(tp.partition, tp.offset) for tp in offsets.topic_partitions] == [
            (0, 5), (1, -1001)]  # never committed: librdkafka's OFFSET_INVALID

        deleted = admin.delete_consumer_groups([idle, active])
        deleted[idle].result(TIMEOUT_S)
        with pytest.raises(confluent_kafka.KafkaException) as busy:
            deleted[active].result(TIMEOUT_S)
        assert busy.value.args[0].code() == confluent_kafka.KafkaError.NON_EMPTY_GROUP
        assert idle not in {g.group_id
                            for g in admin.list_consumer_groups().result(TIMEOUT_S).valid}
    finally:
        consumer.close()


def test_create_and_delete_topics(kafka_broker, unique_topic):
    admin = admin_for(kafka_broker.bootstrap_servers)
    topic = unique_topic("made")
    admin.create_topics([NewTopic(topic, 3, 1)], operation_timeout=10)[topic].result(TIMEOUT_S)
    logs = kafka_broker.broker.state.logs
    assert kafka_broker.call(logs.topics)[topic] == 3
    admin.delete_topics([topic], operation_timeout=10)[topic].result(TIMEOUT_S)
    assert topic not in kafka_broker.call(logs.topics)


def test_elect_leaders(kafka_broker, unique_topic):
    admin = admin_for(kafka_broker.bootstrap_servers)
    topic = kafka_broker.create_topic(unique_topic("elect"), 2)
    result = admin.elect_leaders(ElectionType.PREFERRED,
                                 [TopicPartition(topic, 0)]).result(TIMEOUT_S)
    [(tp, error)] = result.items()
    assert tp.partition == 0
    assert error.code() == confluent_kafka.KafkaError.ELECTION_NOT_NEEDED


@pytest.fixture
def scram_broker(tmp_path, users_file):
    users = tmp_path / "users.json"
    shutil.copy(users_file, users)
    broker = ThreadedBroker(**{
        **TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl_credentials_file": str(users),
        "sasl_enabled_mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}).start()
    yield broker
    broker.stop()


def _sasl_metadata(broker: ThreadedBroker, user: str, pw: str, mechanism: str) -> bool:
    """Whether a SCRAM login of ``user`` on the SASL listener succeeds (a metadata call)."""
    [(host, port)] = [(h, p) for name, h, p in broker.broker.listeners
                      if name == "SASL_PLAINTEXT"]
    refusals: list[confluent_kafka.KafkaError] = []
    admin = AdminClient({"bootstrap.servers": f"{host}:{port}",
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                         "sasl.username": user, "sasl.password": pw,
                         "error_cb": refusals.append})
    # a refused login is reported through error_cb at once; list_topics alone would wait out
    # its whole timeout retrying it
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=0.2)
        except confluent_kafka.KafkaException:
            admin.poll(0)
            if any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in refusals):
                return False
            continue
        return True
    return False


def test_scram_users_over_the_wire(scram_broker):
    admin = admin_for(scram_broker.bootstrap_servers)
    described = admin.describe_user_scram_credentials().result(TIMEOUT_S)
    assert set(described) == {"alice", "bob", "ligature"}
    assert {i.mechanism for i in described["alice"].scram_credential_infos} == {
        ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512}

    upsert = UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 10_000), b"dave-secret")
    admin.alter_user_scram_credentials([upsert])["dave"].result(TIMEOUT_S)
    assert _sasl_metadata(scram_broker, "dave", "dave-secret", "SCRAM-SHA-512")
    assert not _sasl_metadata(scram_broker, "dave", "wrong", "SCRAM-SHA-512")
    one = admin.describe_user_scram_credentials(["dave"])["dave"].result(TIMEOUT_S)
    assert [(i.mechanism, i.iterations) for i in one.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 10_000)]

    removal = UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512)
    admin.alter_user_scram_credentials([removal])["dave"].result(TIMEOUT_S)
    assert not _sasl_metadata(scram_broker, "dave", "dave-secret", "SCRAM-SHA-512")
    with pytest.raises(confluent_kafka.KafkaException) as gone:
        admin.describe_user_scram_credentials(["dave"])["dave"].result(TIMEOUT_S)
    assert gone.value.args[0].code() == confluent_kafka.KafkaError.RESOURCE_NOT_FOUND


def test_scram_users_stored_with_no_setting_survive_a_restart(tmp_path):
    """No sasl.credentials.file: AlterUserScramCredentials stores the users in the log dir,
    SCRAM logins see them at once, and a restarted broker still has them."""
    data = tmp_path / "data"
    settings = {**TEST_DEFAULTS, "log_dirs": str(data),
                "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "sasl_enabled_mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}
    broker = ThreadedBroker(**settings).start()
    try:
        assert not _sasl_metadata(broker, "erin", "erin-secret", "SCRAM-SHA-256")
        admin = admin_for(broker.bootstrap_servers)
        upsert = UserScramCredentialUpsertion(
            "erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"erin-secret")
        admin.alter_user_scram_credentials([upsert])["erin"].result(TIMEOUT_S)
        assert _sasl_metadata(broker, "erin", "erin-secret", "SCRAM-SHA-256")
        assert not _sasl_metadata(broker, "erin", "wrong", "SCRAM-SHA-256")
    finally:
        broker.stop()
    assert (data / "scram-credentials.json").stat().st_mode & 0o777 == 0o600
    broker = ThreadedBroker(**settings).start()
    try:
        assert _sasl_metadata(broker, "erin", "erin-secret", "SCRAM-SHA-256")
        admin = admin_for(broker.bootstrap_servers)
        assert set(admin.describe_user_scram_credentials().result(TIMEOUT_S)) == {"erin"}
    finally:
        broker.stop()
