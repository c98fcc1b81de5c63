"""Topic administration through confluent-kafka's AdminClient and kafka-python's
KafkaAdminClient: create, create partitions, describe and alter configs, delete."""

from __future__ import annotations

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)


def _partition_count(kafka_broker, topic: str) -> int | None:
    return kafka_broker.call(kafka_broker.broker.state.logs.topics).get(topic)


def test_confluent_admin_client(kafka_broker, unique_topic):
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    topic = unique_topic("admin")
    admin.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "3600000"})],
                        operation_timeout=10)[topic].result(10)
    assert _partition_count(kafka_broker, topic) == 2
    assert topic in admin.list_topics(timeout=10).topics

    with pytest.raises(confluent_kafka.KafkaException) as exc:
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
    assert exc.value.args[0].code() == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS

    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(10)
    assert _partition_count(kafka_broker, topic) == 5
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 5

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].value == "delete"

    # AlterConfigs replaces the whole set of overrides
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic,
                              set_config={"max.message.bytes": "5000"})
    admin.alter_configs([resource])[resource].result(10)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["max.message.bytes"].value == "5000"
    assert configs["max.message.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    log_config = kafka_broker.call(kafka_broker.broker.state.logs.topic_config, topic)
    assert log_config.max_message_bytes == 5000

    bad = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"retention.ms": "x"})
    with pytest.raises(confluent_kafka.KafkaException) as exc:
        admin.alter_configs([bad])[bad].result(10)
    assert exc.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG

    admin.delete_topics([topic], operation_timeout=10)[topic].result(10)
    assert _partition_count(kafka_broker, topic) is None
    with pytest.raises(confluent_kafka.KafkaException) as exc:
        admin.delete_topics([topic])[topic].result(10)
    assert exc.value.args[0].code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART


def test_confluent_replication_factor_two(kafka_broker, unique_topic):
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    topic = unique_topic("admin")
    with pytest.raises(confluent_kafka.KafkaException) as exc:
        admin.create_topics([NewTopic(topic, 1, 2)])[topic].result(10)
    assert exc.value.args[0].code() == confluent_kafka.KafkaError.INVALID_REPLICATION_FACTOR
    assert _partition_count(kafka_broker, topic) is None


def test_kafka_python_admin_client(kafka_broker, unique_topic):
    from kafka.admin import ConfigResource as KPConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewPartitions as KPNewPartitions
    from kafka.admin import NewTopic as KPNewTopic
    from kafka.errors import InvalidReplicationFactorError, TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    try:
        topic = unique_topic("kp-admin")
        admin.create_topics([KPNewTopic(topic, 3, 1, topic_configs={"segment.bytes": "100000"})])
        assert _partition_count(kafka_broker, topic) == 3
        assert topic in admin.list_topics()
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([KPNewTopic(topic, 3, 1)])
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topics([KPNewTopic(unique_topic("kp-admin"), 1, 2)])

        admin.create_partitions({topic: KPNewPartitions(total_count=4)})
        assert _partition_count(kafka_broker, topic) == 4

        def describe() -> dict[str, tuple[str, str]]:
            result = admin.describe_configs([KPConfigResource(ConfigResourceType.TOPIC, topic)],
                                            config_filter="all")
            entries = result["topic"][topic]
            return {name: (e["value"], e["config_source"]) for name, e in entries.items()}

        configs = describe()
        assert configs["segment.bytes"] == ("100000", "DYNAMIC_TOPIC_CONFIG")
        assert configs["retention.ms"] == ("604800000", "DEFAULT_CONFIG")
        admin.alter_configs([KPConfigResource(ConfigResourceType.TOPIC, topic,
                                              configs={"retention.ms": "1000"})])
        configs = describe()
        assert configs["retention.ms"] == ("1000", "DYNAMIC_TOPIC_CONFIG")
        # kafka-python emulates an incremental change: it resends the other overrides
        assert configs["segment.bytes"] == ("100000", "DYNAMIC_TOPIC_CONFIG")

        admin.delete_topics([topic])
        assert _partition_count(kafka_broker, topic) is None
    finally:
        admin.close()
