"""The versions this broker speaks, and the message classes by API key.

Why two tables: ``versions.KAFKA_VERSIONS`` records what Kafka itself defines per API (Kafka 3.9's
``validVersions``, Kafka 4.1's, the first flexible version); ``SUPPORTED_VERSIONS`` is what the
broker advertises today. Widening an API to Kafka's range is one line (``kafka_range(key)`` is
min(3.9) .. max(4.1)) once its handler is ready.

Why these ranges: every implemented API advertises Kafka's whole range (``kafka_range``), so
each client sends the newest version both sides know and no client generation, from kafka-python
pinned to 0.10.2 to librdkafka's newest, is refused a version Kafka would accept. A version is
only listed once its handler implements that version's semantics, not only its encoding.

A key is advertised only once a handler for it is registered (``apis.registry``): advertise
exactly what is implemented.
"""

from __future__ import annotations

from typing import Any

from .structs import message_class
from .versions import KAFKA_VERSIONS, ApiKey, KafkaVersions, VersionRange, is_flexible, kafka_range

__all__ = ["KAFKA_VERSIONS", "SUPPORTED_VERSIONS", "ApiKey", "KafkaVersions", "VersionRange",
           "is_flexible", "kafka_range", "request_class", "response_class"]

SUPPORTED_VERSIONS: dict[ApiKey, VersionRange] = {
    ApiKey.Produce: kafka_range(ApiKey.Produce),
    ApiKey.Fetch: kafka_range(ApiKey.Fetch),
    ApiKey.ListOffsets: kafka_range(ApiKey.ListOffsets),
    ApiKey.Metadata: kafka_range(ApiKey.Metadata),
    ApiKey.OffsetCommit: kafka_range(ApiKey.OffsetCommit),
    ApiKey.OffsetFetch: kafka_range(ApiKey.OffsetFetch),
    ApiKey.FindCoordinator: kafka_range(ApiKey.FindCoordinator),
    ApiKey.JoinGroup: kafka_range(ApiKey.JoinGroup),
    ApiKey.Heartbeat: kafka_range(ApiKey.Heartbeat),
    ApiKey.LeaveGroup: kafka_range(ApiKey.LeaveGroup),
    ApiKey.SyncGroup: kafka_range(ApiKey.SyncGroup),
    ApiKey.DescribeGroups: kafka_range(ApiKey.DescribeGroups),
    ApiKey.ListGroups: kafka_range(ApiKey.ListGroups),
    ApiKey.SaslHandshake: kafka_range(ApiKey.SaslHandshake),
    ApiKey.ApiVersions: kafka_range(ApiKey.ApiVersions),
    ApiKey.CreateTopics: kafka_range(ApiKey.CreateTopics),
    ApiKey.DeleteTopics: kafka_range(ApiKey.DeleteTopics),
    ApiKey.InitProducerId: kafka_range(ApiKey.InitProducerId),
    ApiKey.DescribeConfigs: kafka_range(ApiKey.DescribeConfigs),
    ApiKey.AlterConfigs: kafka_range(ApiKey.AlterConfigs),
    ApiKey.SaslAuthenticate: kafka_range(ApiKey.SaslAuthenticate),
    ApiKey.CreatePartitions: kafka_range(ApiKey.CreatePartitions),
    ApiKey.DeleteGroups: kafka_range(ApiKey.DeleteGroups),
    ApiKey.OffsetDelete: kafka_range(ApiKey.OffsetDelete),
    ApiKey.ElectLeaders: kafka_range(ApiKey.ElectLeaders),
    ApiKey.AlterPartitionReassignments: kafka_range(ApiKey.AlterPartitionReassignments),
    ApiKey.ListPartitionReassignments: kafka_range(ApiKey.ListPartitionReassignments),
    ApiKey.DescribeAcls: kafka_range(ApiKey.DescribeAcls),
    ApiKey.DescribeClientQuotas: kafka_range(ApiKey.DescribeClientQuotas),
    ApiKey.AlterClientQuotas: kafka_range(ApiKey.AlterClientQuotas),
    ApiKey.CreateAcls: kafka_range(ApiKey.CreateAcls),
    ApiKey.DeleteAcls: kafka_range(ApiKey.DeleteAcls),
    ApiKey.DescribeUserScramCredentials: kafka_range(ApiKey.DescribeUserScramCredentials),
    ApiKey.AlterUserScramCredentials: kafka_range(ApiKey.AlterUserScramCredentials),
    ApiKey.DescribeCluster: kafka_range(ApiKey.DescribeCluster),
    ApiKey.OffsetForLeaderEpoch: kafka_range(ApiKey.OffsetForLeaderEpoch),
    ApiKey.DescribeLogDirs: kafka_range(ApiKey.DescribeLogDirs),
    ApiKey.DescribeProducers: kafka_range(ApiKey.DescribeProducers),
    ApiKey.GetTelemetrySubscriptions: kafka_range(ApiKey.GetTelemetrySubscriptions),
    ApiKey.PushTelemetry: kafka_range(ApiKey.PushTelemetry),
    ApiKey.ListConfigResources: kafka_range(ApiKey.ListConfigResources),
    ApiKey.DescribeTopicPartitions: kafka_range(ApiKey.DescribeTopicPartitions),
    ApiKey.IncrementalAlterConfigs: kafka_range(ApiKey.IncrementalAlterConfigs),
    ApiKey.AddPartitionsToTxn: kafka_range(ApiKey.AddPartitionsToTxn),
    ApiKey.AddOffsetsToTxn: kafka_range(ApiKey.AddOffsetsToTxn),
    ApiKey.EndTxn: kafka_range(ApiKey.EndTxn),
    ApiKey.TxnOffsetCommit: kafka_range(ApiKey.TxnOffsetCommit),
    ApiKey.DescribeTransactions: kafka_range(ApiKey.DescribeTransactions),
    ApiKey.ListTransactions: kafka_range(ApiKey.ListTransactions),
    ApiKey.DeleteRecords: kafka_range(ApiKey.DeleteRecords),
    ApiKey.ConsumerGroupHeartbeat: kafka_range(ApiKey.ConsumerGroupHeartbeat),
    ApiKey.ConsumerGroupDescribe: kafka_range(ApiKey.ConsumerGroupDescribe),
    ApiKey.ShareGroupHeartbeat: kafka_range(ApiKey.ShareGroupHeartbeat),
    ApiKey.ShareGroupDescribe: kafka_range(ApiKey.ShareGroupDescribe),
    ApiKey.ShareFetch: kafka_range(ApiKey.ShareFetch),
    ApiKey.ShareAcknowledge: kafka_range(ApiKey.ShareAcknowledge),
    ApiKey.DescribeShareGroupOffsets: kafka_range(ApiKey.DescribeShareGroupOffsets),
    ApiKey.AlterShareGroupOffsets: kafka_range(ApiKey.AlterShareGroupOffsets),
    ApiKey.DeleteShareGroupOffsets: kafka_range(ApiKey.DeleteShareGroupOffsets),
}


def request_class(api_key: int) -> Any:
    """The request message class of ``api_key`` (nested struct classes are its attributes), or
    None for a key without a schema. Typed classes by name: ``protocol.message_types``."""
    return message_class(api_key, "request")


def response_class(api_key: int) -> Any:
    """The response message class of ``api_key``, or None for a key without a schema."""
    return message_class(api_key, "response")
