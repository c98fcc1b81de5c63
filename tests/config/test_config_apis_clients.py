"""The config APIs through real admin clients: confluent-kafka's AdminClient (describe with
sources and synonyms, alter, incremental alter; topics and the broker) and kafka-python's
KafkaAdminClient, and the topic configs infrastructure-as-code tools set."""

from __future__ import annotations

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

#: what Terraform / Pulumi / Strimzi style topic definitions commonly carry
IAC_CONFIGS = {
    "compression.type": "zstd",
    "min.insync.replicas": "1",
    "unclean.leader.election.enable": "false",
    "delete.retention.ms": "86400000",
    "min.compaction.lag.ms": "60000",
    "max.compaction.lag.ms": "604800000",
    "min.cleanable.dirty.ratio": "0.25",
    "cleanup.policy": "compact",
    "retention.ms": "-1",
}


@pytest.fixture
def admin(kafka_broker):
    return AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})


def _describe(admin, resource):
    return admin.describe_configs([resource])[resource].result(10)


def test_confluent_create_topic_with_iac_configs_and_describe_them(kafka_broker, admin,
                                                                     unique_topic):
    topic = unique_topic("iac")
    admin.create_topics([NewTopic(topic, 1, 1, config=IAC_CONFIGS)])[topic].result(10)
    configs = _describe(admin, ConfigResource(ResourceType.TOPIC, topic))
    for name, value in IAC_CONFIGS.items():
        entry = configs[name]
        assert (entry.value, entry.source) == (value, ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    segment = configs["segment.bytes"]
    assert segment.source == ConfigSource.DEFAULT_CONFIG.value
    assert [(s.name, s.source) for s in segment.synonyms.values()] == [
        ("log.segment.bytes", ConfigSource.DEFAULT_CONFIG.value)]
    assert configs["max.message.bytes"].is_read_only is False
    config = kafka_broker.call(kafka_broker.broker.state.logs.topic_config, topic)
    assert (config.compression_type, config.min_cleanable_dirty_ratio) == ("zstd", 0.25)


def test_confluent_create_topic_refuses_bad_values_with_kafkas_message(admin, unique_topic):
    topic = unique_topic("bad")
    with pytest.raises(confluent_kafka.KafkaException) as info:
        admin.create_topics([NewTopic(topic, 1, 1, config={"min.insync.replicas": "0"})])[
            topic].result(10)
    error = info.value.args[0]
    assert error.code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1" in (
        error.str())


def test_confluent_alter_and_incremental_alter_topic(kafka_broker, admin, unique_topic):
    topic = unique_topic("alter")
    admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "1000"})])[topic].result(10)
    resource = ConfigResource(ResourceType.TOPIC, topic, set_config={
        "unclean.leader.election.enable": "true", "min.compaction.lag.ms": "10"})
    admin.alter_configs([resource])[resource].result(10)
    overrides = kafka_broker.call(kafka_broker.broker.state.logs.topic_overrides, topic)
    assert overrides == {"unclean.leader.election.enable": "true", "min.compaction.lag.ms": "10"}

    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("min.compaction.lag.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("compression.type", "lz4", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(10)
    configs = _describe(admin, ConfigResource(ResourceType.TOPIC, topic))
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["compression.type"].value == "lz4"
    assert configs["min.compaction.lag.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_confluent_broker_configs(kafka_broker, admin):
    broker = ConfigResource(ResourceType.BROKER, "0")
    configs = _describe(admin, broker)
    assert configs["num.partitions"].is_read_only
    assert configs["log.dirs"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["process.roles"].value == "broker,controller"
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry("log.retention.bytes", "1048576000",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(10)
    try:
        configs = _describe(admin, broker)
        entry = configs["log.retention.bytes"]
        assert (entry.value, entry.source) == (
            "1048576000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        # confluent-kafka keys synonyms by name: the DEFAULT_CONFIG one replaces the dynamic one
        assert list(entry.synonyms) == ["log.retention.bytes"]
        default = kafka_broker.call(lambda: kafka_broker.broker.state.logs.default_config)
        assert default.retention_bytes == 1_048_576_000
    finally:
        resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
            ConfigEntry("log.retention.bytes", None,
                        incremental_operation=AlterConfigOpType.DELETE)])
        admin.incremental_alter_configs([resource])[resource].result(10)
    resource = ConfigResource(ResourceType.BROKER, "0", set_config={"node.id": "4"})
    with pytest.raises(confluent_kafka.KafkaException) as info:
        admin.alter_configs([resource])[resource].result(10)
    assert info.value.args[0].code() == confluent_kafka.KafkaError.INVALID_REQUEST


def test_kafka_python_describe_and_alter(kafka_broker, unique_topic):
    from kafka.admin import ConfigResource as KPConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewTopic as KPNewTopic

    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    try:
        topic = unique_topic("kp-iac")
        admin.create_topics([KPNewTopic(topic, 1, 1, topic_configs=IAC_CONFIGS)])
        result = admin.describe_configs([KPConfigResource(ConfigResourceType.TOPIC, topic)],
                                        include_synonyms=True, config_filter="all")
        entries = result["topic"][topic]
        assert {k: entries[k]["value"] for k in IAC_CONFIGS} == IAC_CONFIGS
        assert entries["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        admin.alter_configs([KPConfigResource(ConfigResourceType.TOPIC, topic,
                                              configs={"min.cleanable.dirty.ratio": "0.75"})])
        overrides = kafka_broker.call(kafka_broker.broker.state.logs.topic_overrides, topic)
        assert overrides["min.cleanable.dirty.ratio"] == "0.75"
        assert overrides["compression.type"] == "zstd"

        result = admin.describe_configs([KPConfigResource(ConfigResourceType.BROKER, "0")],
                                        config_filter="all")
        broker = result["broker"]["0"]
        assert broker["num.io.threads"]["value"] == "8"
        assert broker["log.dirs"]["config_source"] == "STATIC_BROKER_CONFIG"
    finally:
        admin.close()


def test_min_insync_replicas_is_cluster_level_as_with_eligible_leader_replicas(kafka_broker,
                                                                               admin):
    """KIP-966 as a new Kafka 4.1+ cluster has it: min.insync.replicas is a cluster-level
    dynamic config from the start, cannot be set per broker nor removed, and a cluster-level
    change reaches the log defaults. (librdkafka names no cluster-level broker resource: those
    requests go raw.)"""
    from trio_broker.client.blocking import BrokerConnection, parse_address
    from trio_broker.protocol.api_keys import ApiKey, request_class

    iac = request_class(ApiKey.IncrementalAlterConfigs)
    broker = ConfigResource(ResourceType.BROKER, "0")
    entry = _describe(admin, broker)["min.insync.replicas"]
    assert (entry.value, entry.source) == (
        "1", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    message = "Broker-level min.insync.replicas cannot be altered while ELR is enabled."
    for op, value in ((AlterConfigOpType.SET, "2"), (AlterConfigOpType.DELETE, None)):
        change = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
            ConfigEntry("min.insync.replicas", value, incremental_operation=op)])
        with pytest.raises(confluent_kafka.KafkaException) as refused:
            admin.incremental_alter_configs([change])[change].result(10)
        assert refused.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG
        assert refused.value.args[0].str() == message

    def cluster_level(op: int, value: str | None) -> object:
        with BrokerConnection(*parse_address(kafka_broker.bootstrap_servers)) as conn:
            answer = conn.call(ApiKey.IncrementalAlterConfigs, 1, validate_only=False, resources=[
                iac.AlterConfigsResource(resource_type=4, resource_name="", configs=[
                    iac.AlterConfigsResource.AlterableConfig(
                        name="min.insync.replicas", config_operation=op, value=value)])])
        return answer.responses[0]

    removal = cluster_level(1, None)
    assert (removal.error_code, removal.error_message) == (
        confluent_kafka.KafkaError.INVALID_CONFIG,
        "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
    assert cluster_level(0, "2").error_code == 0
    try:
        entry = _describe(admin, broker)["min.insync.replicas"]
        assert (entry.value, entry.source) == (
            "2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        default = kafka_broker.call(lambda: kafka_broker.broker.state.logs.default_config)
        assert default.min_insync_replicas == 2
    finally:
        assert cluster_level(0, "1").error_code == 0
