"""The API keys and the versions Kafka defines for each, recorded once as data.

Why here: the header codec needs the flexible boundary of every (key, version) before anything
else, and the schemas cover exactly Kafka 3.9's minimum .. Kafka 4.1's maximum of each API, so
both read this one table. Kafka 4.1's column is the range a 4.1 broker accepts: versions Kafka
still marks unstable are left out, and Produce keeps 4.1's schema minimum (3) although 4.1
advertises 0 to old clients. Where a later release made a new version stable (ListOffsets v11,
OffsetCommit and OffsetFetch v10 in 4.2, DescribeLogDirs v5 in 4.3) the column holds that
release's maximum, noted on its row.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

__all__ = ["KAFKA_VERSIONS", "ApiKey", "KafkaVersions", "VersionRange", "is_flexible",
           "kafka_range"]


class ApiKey(enum.IntEnum):
    """Kafka's API keys (``org.apache.kafka.common.protocol.ApiKeys``), Kafka's names."""

    Produce = 0
    Fetch = 1
    ListOffsets = 2
    Metadata = 3
    LeaderAndIsr = 4
    StopReplica = 5
    UpdateMetadata = 6
    ControlledShutdown = 7
    OffsetCommit = 8
    OffsetFetch = 9
    FindCoordinator = 10
    JoinGroup = 11
    Heartbeat = 12
    LeaveGroup = 13
    SyncGroup = 14
    DescribeGroups = 15
    ListGroups = 16
    SaslHandshake = 17
    ApiVersions = 18
    CreateTopics = 19
    DeleteTopics = 20
    DeleteRecords = 21
    InitProducerId = 22
    OffsetForLeaderEpoch = 23
    AddPartitionsToTxn = 24
    AddOffsetsToTxn = 25
    EndTxn = 26
    WriteTxnMarkers = 27
    TxnOffsetCommit = 28
    DescribeAcls = 29
    CreateAcls = 30
    DeleteAcls = 31
    DescribeConfigs = 32
    AlterConfigs = 33
    AlterReplicaLogDirs = 34
    DescribeLogDirs = 35
    SaslAuthenticate = 36
    CreatePartitions = 37
    CreateDelegationToken = 38
    RenewDelegationToken = 39
    ExpireDelegationToken = 40
    DescribeDelegationToken = 41
    DeleteGroups = 42
    ElectLeaders = 43
    IncrementalAlterConfigs = 44
    AlterPartitionReassignments = 45
    ListPartitionReassignments = 46
    OffsetDelete = 47
    DescribeClientQuotas = 48
    AlterClientQuotas = 49
    DescribeUserScramCredentials = 50
    AlterUserScramCredentials = 51
    Vote = 52
    BeginQuorumEpoch = 53
    EndQuorumEpoch = 54
    DescribeQuorum = 55
    AlterPartition = 56
    UpdateFeatures = 57
    Envelope = 58
    FetchSnapshot = 59
    DescribeCluster = 60
    DescribeProducers = 61
    BrokerRegistration = 62
    BrokerHeartbeat = 63
    UnregisterBroker = 64
    DescribeTransactions = 65
    ListTransactions = 66
    AllocateProducerIds = 67
    ConsumerGroupHeartbeat = 68
    ConsumerGroupDescribe = 69
    ControllerRegistration = 70
    GetTelemetrySubscriptions = 71
    PushTelemetry = 72
    AssignReplicasToDirs = 73
    ListConfigResources = 74  # ListClientMetricsResources in Kafka 3.9; same layout at v0
    DescribeTopicPartitions = 75
    ShareGroupHeartbeat = 76
    ShareGroupDescribe = 77
    ShareFetch = 78
    ShareAcknowledge = 79
    AddRaftVoter = 80
    RemoveRaftVoter = 81
    UpdateRaftVoter = 82
    InitializeShareGroupState = 83
    ReadShareGroupState = 84
    WriteShareGroupState = 85
    DeleteShareGroupState = 86
    ReadShareGroupStateSummary = 87
    StreamsGroupHeartbeat = 88
    StreamsGroupDescribe = 89
    DescribeShareGroupOffsets = 90
    AlterShareGroupOffsets = 91
    DeleteShareGroupOffsets = 92


class VersionRange(NamedTuple):
    min: int
    max: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min <= version <= self.max


class KafkaVersions(NamedTuple):
    """What Kafka defines for one API: 3.9's and 4.1's version ranges, first flexible version."""

    kafka_3_9: VersionRange
    kafka_4_1: VersionRange
    flexible_from: int | None  # None: no flexible version


# key: Kafka 3.9 validVersions, Kafka 4.1 validVersions (stable), first flexible version.
# Every API a Kafka 3.9 or 4.1 broker answers to clients that this project implements or will.
_KAFKA_TABLE: dict[int, tuple[tuple[int, int], tuple[int, int], int | None]] = {
    0: ((0, 11), (3, 13), 9),  # Produce
    1: ((0, 17), (4, 18), 12),  # Fetch
    2: ((0, 9), (1, 11), 6),  # ListOffsets (v11 is Kafka 4.2's, the same layout as v10)
    3: ((0, 12), (0, 13), 9),  # Metadata
    8: ((0, 9), (2, 10), 8),  # OffsetCommit (v10 is Kafka 4.2's: topics named by id)
    9: ((0, 9), (1, 10), 6),  # OffsetFetch (v10 is Kafka 4.2's: topics named by id)
    10: ((0, 6), (0, 6), 3),  # FindCoordinator
    11: ((0, 9), (0, 9), 6),  # JoinGroup
    12: ((0, 4), (0, 4), 4),  # Heartbeat
    13: ((0, 5), (0, 5), 4),  # LeaveGroup
    14: ((0, 5), (0, 5), 4),  # SyncGroup
    15: ((0, 5), (0, 6), 5),  # DescribeGroups
    16: ((0, 5), (0, 5), 3),  # ListGroups
    17: ((0, 1), (0, 1), None),  # SaslHandshake
    18: ((0, 4), (0, 4), 3),  # ApiVersions
    19: ((0, 7), (2, 7), 5),  # CreateTopics
    20: ((0, 6), (1, 6), 4),  # DeleteTopics
    21: ((0, 2), (0, 2), 2),  # DeleteRecords
    22: ((0, 5), (0, 5), 2),  # InitProducerId
    23: ((0, 4), (2, 4), 4),  # OffsetForLeaderEpoch
    24: ((0, 5), (0, 5), 3),  # AddPartitionsToTxn
    25: ((0, 4), (0, 4), 3),  # AddOffsetsToTxn
    26: ((0, 4), (0, 5), 3),  # EndTxn
    27: ((0, 1), (1, 1), 1),  # WriteTxnMarkers
    28: ((0, 4), (0, 5), 3),  # TxnOffsetCommit
    29: ((0, 3), (1, 3), 2),  # DescribeAcls
    30: ((0, 3), (1, 3), 2),  # CreateAcls
    31: ((0, 3), (1, 3), 2),  # DeleteAcls
    32: ((0, 4), (1, 4), 4),  # DescribeConfigs
    33: ((0, 2), (0, 2), 2),  # AlterConfigs
    34: ((0, 2), (1, 2), 2),  # AlterReplicaLogDirs
    35: ((0, 4), (1, 5), 2),  # DescribeLogDirs (v5 is Kafka 4.3's: a dir's cordoned flag)
    36: ((0, 2), (0, 2), 2),  # SaslAuthenticate
    37: ((0, 3), (0, 3), 2),  # CreatePartitions
    42: ((0, 2), (0, 2), 2),  # DeleteGroups
    43: ((0, 2), (0, 2), 2),  # ElectLeaders
    44: ((0, 1), (0, 1), 1),  # IncrementalAlterConfigs
    45: ((0, 0), (0, 1), 0),  # AlterPartitionReassignments
    46: ((0, 0), (0, 0), 0),  # ListPartitionReassignments
    47: ((0, 0), (0, 0), None),  # OffsetDelete
    48: ((0, 1), (0, 1), 1),  # DescribeClientQuotas
    49: ((0, 1), (0, 1), 1),  # AlterClientQuotas
    50: ((0, 0), (0, 0), 0),  # DescribeUserScramCredentials
    51: ((0, 0), (0, 0), 0),  # AlterUserScramCredentials
    55: ((0, 2), (0, 2), 0),  # DescribeQuorum
    57: ((0, 1), (0, 2), 0),  # UpdateFeatures
    60: ((0, 1), (0, 2), 0),  # DescribeCluster
    61: ((0, 0), (0, 0), 0),  # DescribeProducers
    65: ((0, 0), (0, 0), 0),  # DescribeTransactions
    66: ((0, 1), (0, 2), 0),  # ListTransactions
    68: ((0, 0), (0, 1), 0),  # ConsumerGroupHeartbeat
    69: ((0, 0), (0, 1), 0),  # ConsumerGroupDescribe
    71: ((0, 0), (0, 0), 0),  # GetTelemetrySubscriptions
    72: ((0, 0), (0, 0), 0),  # PushTelemetry
    74: ((0, 0), (0, 1), 0),  # ListConfigResources
    75: ((0, 0), (0, 0), 0),  # DescribeTopicPartitions
    # share groups (KIP-932): stable from Kafka 4.1 (v1), so no 3.9 range of their own; both
    # columns hold Kafka 4.2's, which adds ShareFetch / ShareAcknowledge v2
    76: ((1, 1), (1, 1), 0),  # ShareGroupHeartbeat
    77: ((1, 1), (1, 1), 0),  # ShareGroupDescribe
    78: ((1, 2), (1, 2), 0),  # ShareFetch
    79: ((1, 2), (1, 2), 0),  # ShareAcknowledge
    # share group offsets: new in Kafka 4.1 (v0); 4.2 adds DescribeShareGroupOffsets v1 (lag)
    90: ((0, 1), (0, 1), 0),  # DescribeShareGroupOffsets
    91: ((0, 0), (0, 0), 0),  # AlterShareGroupOffsets
    92: ((0, 0), (0, 0), 0),  # DeleteShareGroupOffsets
}

KAFKA_VERSIONS: dict[ApiKey, KafkaVersions] = {
    ApiKey(key): KafkaVersions(VersionRange(*k39), VersionRange(*k41), flex)
    for key, (k39, k41, flex) in _KAFKA_TABLE.items()
}

_FLEXIBLE_FROM: dict[int, int] = {
    int(key): v.flexible_from for key, v in KAFKA_VERSIONS.items() if v.flexible_from is not None}


def kafka_range(api_key: int) -> VersionRange:
    """Kafka 3.9's minimum .. Kafka 4.1's maximum: every version the schemas cover."""
    v = KAFKA_VERSIONS[ApiKey(api_key)]
    return VersionRange(min(v.kafka_3_9.min, v.kafka_4_1.min),
                        max(v.kafka_3_9.max, v.kafka_4_1.max))


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether (key, version) uses the flexible encoding (compact types, tagged fields)."""
    flex = _FLEXIBLE_FROM.get(api_key)
    return flex is not None and api_version >= flex
